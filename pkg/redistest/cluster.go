package redistest

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"
)

// Cluster is a Redis Cluster of three masters (no replicas) owned by one
// test: each a durable redis-server with --cluster-enabled, joined the way
// redis-cli --cluster create joins them (each master takes a third of the
// slots, then they meet), without its one-second polling: the suite starts
// dozens of clusters. Stop, Restart, Pause and Resume act on every node, so
// a test can take the whole store down as it would one node.
type Cluster struct {
	tb    testing.TB
	Nodes []*Server
}

// StartCluster starts a cluster for one test, stopped when it ends.
func StartCluster(tb testing.TB) *Cluster {
	tb.Helper()
	c, err := start(tb)
	if err != nil {
		tb.Fatalf("redis cluster: %v", err)
	}
	tb.Cleanup(c.Close)
	return c
}

// NewCluster starts a cluster for a whole suite (TestMain); Close stops it.
// A new cluster costs two seconds (Redis Cluster's writable delay), so a
// suite shares one and calls Flush between tests.
func NewCluster() (*Cluster, error) { return start(nil) }

func start(tb testing.TB) (*Cluster, error) {
	c := &Cluster{tb: tb}
	for range 3 {
		port, err := freePort()
		if err != nil {
			return nil, err
		}
		dir, err := makeDir()
		if err != nil {
			return nil, err
		}
		s := &Server{tb: tb, Addr: "127.0.0.1:" + strconv.Itoa(port), Dir: dir, cluster: true}
		c.Nodes = append(c.Nodes, s)
		s.Restart()
	}
	const slots = 16384
	for i, n := range c.Nodes {
		from, to := i*slots/len(c.Nodes), (i+1)*slots/len(c.Nodes)-1
		if reply, err := command(n.Addr, fmt.Sprintf("CLUSTER ADDSLOTSRANGE %d %d", from, to)); err != nil || !strings.HasPrefix(reply, "+OK") {
			c.Close()
			return nil, fmt.Errorf("CLUSTER ADDSLOTSRANGE on %s: %q %v", n.Addr, reply, err)
		}
	}
	for _, n := range c.Nodes[1:] {
		host, port, _ := net.SplitHostPort(n.Addr)
		if reply, err := command(c.Nodes[0].Addr, "CLUSTER MEET "+host+" "+port); err != nil || !strings.HasPrefix(reply, "+OK") {
			c.Close()
			return nil, fmt.Errorf("CLUSTER MEET %s: %q %v", n.Addr, reply, err)
		}
	}
	if err := c.waitOK(); err != nil {
		c.Close()
		return nil, err
	}
	return c, nil
}

// Close stops every node and removes its data.
func (c *Cluster) Close() {
	for _, n := range c.Nodes {
		n.Stop()
		os.RemoveAll(n.Dir)
	}
}

// Flush empties every master: a fresh store for the next test of a suite.
func (c *Cluster) Flush() error {
	for _, n := range c.Nodes {
		if reply, err := command(n.Addr, "FLUSHALL SYNC"); err != nil || !strings.HasPrefix(reply, "+OK") {
			return fmt.Errorf("FLUSHALL on %s: %q %v", n.Addr, reply, err)
		}
	}
	return nil
}

// URL is the cluster in go-redis' ParseClusterURL form:
// redis://host1:port?addr=host2:port&addr=host3:port.
func (c *Cluster) URL() string {
	u := "redis://" + c.Nodes[0].Addr
	for i, n := range c.Nodes[1:] {
		sep := "&"
		if i == 0 {
			sep = "?"
		}
		u += sep + "addr=" + n.Addr
	}
	return u
}

// Stop kills every node (SIGKILL).
func (c *Cluster) Stop() {
	for _, n := range c.Nodes {
		n.Stop()
	}
}

// Restart brings every node back on its port and data, and waits until the
// cluster serves again.
func (c *Cluster) Restart() {
	for _, n := range c.Nodes {
		n.Restart()
	}
	if err := c.waitOK(); err != nil {
		c.Nodes[0].fail("%v", err)
	}
}

// Pause freezes every node (SIGSTOP); Resume thaws them.
func (c *Cluster) Pause() {
	for _, n := range c.Nodes {
		n.Pause()
	}
}

// Resume undoes Pause.
func (c *Cluster) Resume() {
	for _, n := range c.Nodes {
		n.Resume()
	}
}

func (c *Cluster) waitOK() error {
	deadline := time.Now().Add(20 * time.Second)
	for time.Now().Before(deadline) {
		ok := true
		for _, n := range c.Nodes {
			if info, err := command(n.Addr, "CLUSTER INFO"); err != nil || !strings.Contains(info, "cluster_state:ok") {
				ok = false
			}
		}
		if ok {
			return nil
		}
		time.Sleep(20 * time.Millisecond)
	}
	return fmt.Errorf("the Redis Cluster did not reach cluster_state:ok within 20s")
}

// command sends one inline command and reads a bulk string or status reply.
func command(addr, cmd string) (string, error) {
	conn, err := net.DialTimeout("tcp", addr, 200*time.Millisecond)
	if err != nil {
		return "", err
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(time.Second))
	if _, err := conn.Write([]byte(cmd + "\r\n")); err != nil {
		return "", err
	}
	r := bufio.NewReader(conn)
	line, err := r.ReadString('\n')
	if err != nil {
		return "", err
	}
	if !strings.HasPrefix(line, "$") {
		return line, nil
	}
	n, err := strconv.Atoi(strings.TrimSpace(line[1:]))
	if err != nil || n < 0 {
		return "", fmt.Errorf("reply %q", line)
	}
	buf := make([]byte, n+2)
	_, err = io.ReadFull(r, buf)
	return string(buf[:n]), err
}
