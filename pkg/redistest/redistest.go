// Package redistest runs a real redis-server on a free loopback port for a
// test. The server is a child process of the test and dies with it.
package redistest

import (
	"bufio"
	"fmt"
	"net"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"
)

// Server is a redis-server owned by one test.
type Server struct {
	tb   testing.TB
	Addr string
	cmd  *exec.Cmd
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
	s := &Server{tb: tb, Addr: "127.0.0.1:" + strconv.Itoa(FreePort(tb))}
	s.Restart()
	tb.Cleanup(s.Stop)
	return s
}

// Stop kills the server; Restart brings it back on the same port, empty.
func (s *Server) Stop() {
	if s.cmd == nil {
		return
	}
	_ = s.cmd.Process.Kill()
	_ = s.cmd.Wait()
	s.cmd = nil
}

// Restart starts the server again on its port and waits until it answers.
func (s *Server) Restart() {
	s.tb.Helper()
	_, port, _ := net.SplitHostPort(s.Addr)
	s.cmd = exec.Command("redis-server", "--port", port, "--bind", "127.0.0.1",
		"--save", "", "--appendonly", "no", "--protected-mode", "yes", "--loglevel", "warning")
	if err := s.cmd.Start(); err != nil {
		s.tb.Fatalf("start redis-server: %v", err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		if Ping(s.Addr) == nil {
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
	s.Stop()
	s.tb.Fatalf("redis-server on %s did not answer PING within 10s", s.Addr)
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
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatalf("free port: %v", err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}
