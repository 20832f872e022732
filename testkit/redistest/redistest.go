// Package redistest runs a real redis-server on a free loopback port for a
// test. The server is a child process of the test and dies with it. It
// runs as the Helm chart's Redis does: an append-only file fsynced on every
// write, no eviction (docker-compose's fsyncs every second; DESIGN §6 asks
// Redis to keep only what may be lost without harm); its data lives in a
// directory of its own (on tmpfs when there is one, so fsync costs the
// tests nothing), and survives Stop, Kill and Restart.
package redistest

import (
	"bufio"
	"fmt"
	"net"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/partnerpay/api/testkit/freeport"
)

// Server is a redis-server owned by one test.
type Server struct {
	tb   testing.TB
	Addr string
	Dir  string // where the append-only file lives
	cmd  *exec.Cmd
	// cluster: a node of a Redis Cluster (StartCluster).
	cluster bool
}

// URL is the redis:// address of the server.
func (s *Server) URL() string { return "redis://" + s.Addr + "/0" }

// Start runs redis-server (it must be on PATH: .ci/run installs it) and stops
// it when the test ends.
func Start(tb testing.TB) *Server {
	tb.Helper()
	if _, err := exec.LookPath("redis-server"); err != nil {
		tb.Fatalf("redis-server is not on PATH (apt-get install redis-server): %v", err)
	}
	s := &Server{tb: tb, Addr: "127.0.0.1:" + strconv.Itoa(FreePort(tb)), Dir: dataDir(tb)}
	s.Restart()
	tb.Cleanup(s.Stop)
	return s
}

// fail stops the test that owns s, or, for a server of a suite (no test:
// NewCluster), panics: the suite cannot go on without its Redis.
func (s *Server) fail(format string, args ...any) {
	if s.tb != nil {
		s.tb.Helper()
		s.tb.Fatalf(format, args...)
	}
	panic(fmt.Sprintf(format, args...))
}

// Stop kills the server (SIGKILL: no chance to save anything beyond what
// it already fsynced); Restart brings it back on the same port and data.
func (s *Server) Stop() {
	if s.cmd == nil {
		return
	}
	_ = s.cmd.Process.Kill()
	_ = s.cmd.Wait()
	s.cmd = nil
}

// Pause stops the server with SIGSTOP: it keeps its connections but answers
// nothing, as a hung Redis does. Resume sends SIGCONT.
func (s *Server) Pause() { _ = s.cmd.Process.Signal(syscall.SIGSTOP) }

// Resume undoes Pause.
func (s *Server) Resume() { _ = s.cmd.Process.Signal(syscall.SIGCONT) }

// Restart starts the server again on its port and waits until it answers.
func (s *Server) Restart() {
	if s.tb != nil {
		s.tb.Helper()
	}
	_, port, _ := net.SplitHostPort(s.Addr)
	args := Args(port, s.Dir)
	if s.cluster {
		args = append(args, "--cluster-enabled", "yes", "--cluster-config-file", "nodes.conf", "--cluster-node-timeout", "5000")
	}
	s.cmd = exec.Command("redis-server", args...)
	if err := s.cmd.Start(); err != nil {
		s.fail("start redis-server: %v", err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		if Ping(s.Addr) == nil {
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
	s.Stop()
	s.fail("redis-server on %s did not answer PING within 10s", s.Addr)
}

// Args are the flags of a redis-server on port with its data in dir, as the
// Helm chart and compose run it: what the tests and `make run` start. The
// append-only file is written before Redis answers (unless the disk has
// fallen a second behind) and fsynced once a second: Redis holds only what may be lost (DESIGN §6), so a kill -9 of
// Redis loses nothing it answered, and a crash of the machine at most the
// last second's offers and tombstones. An fsync on every write cost each
// quote and execution about 0.13 ms on this machine's disk, and cut Redis's
// writes to a third (redis-benchmark -t set, 16 clients: 34,000/s against
// 113,000/s).
func Args(port, dir string) []string {
	return []string{"--port", port, "--bind", "127.0.0.1", "--protected-mode", "yes", "--loglevel", "warning",
		"--dir", dir, "--appendonly", "yes", "--appendfsync", "everysec", "--save", "",
		"--maxmemory-policy", "noeviction"}
}

func dataDir(tb testing.TB) string {
	tb.Helper()
	dir, err := makeDir()
	if err != nil {
		tb.Fatalf("redis data dir: %v", err)
	}
	tb.Cleanup(func() { os.RemoveAll(dir) })
	return dir
}

func makeDir() (string, error) {
	base := ""
	if fi, err := os.Stat("/dev/shm"); err == nil && fi.IsDir() {
		base = "/dev/shm"
	}
	return os.MkdirTemp(base, "redistest-")
}

// Ping sends PING over the wire protocol and expects +PONG.
func Ping(addr string) error {
	c, err := net.DialTimeout("tcp", addr, 200*time.Millisecond)
	if err != nil {
		return err
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(500 * time.Millisecond))
	if _, err := c.Write([]byte("PING\r\n")); err != nil {
		return err
	}
	line, err := bufio.NewReader(c).ReadString('\n')
	if err != nil {
		return err
	}
	if !strings.HasPrefix(line, "+PONG") {
		return fmt.Errorf("unexpected reply %q", line)
	}
	return nil
}

// FreePort returns a loopback TCP port that was free a moment ago.
func FreePort(tb testing.TB) int {
	tb.Helper()
	port, err := freePort()
	if err != nil {
		tb.Fatalf("free port: %v", err)
	}
	return port
}

// freePort is a port of this process's own (package freeport).
func freePort() (int, error) {
	ports, err := freeport.Ports(1)
	if err != nil {
		return 0, err
	}
	return ports[0], nil
}
