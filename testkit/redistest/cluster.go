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

// Cluster is a Redis Cluster of three masters, with or without a replica
// each, owned by one test or suite: each a redis-server with
// --cluster-enabled, joined the way redis-cli --cluster create joins them
// (each master takes a third of the slots, then they meet, then each
// replica follows its master), without its one-second polling. Stop,
// Restart, Pause and Resume act on every node, so a test can take the
// whole store down as it would one node; KillMaster takes one master down
// and lets its replica be promoted, as a failover does.
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

// NewCluster starts a cluster for a whole suite (TestMain), three masters
// each with a replica; Close stops it. A new cluster costs two seconds
// (Redis Cluster's writable delay), so a suite shares one and calls Flush
// between tests.
func NewCluster() (*Cluster, error) { return startWith(nil, true) }

func start(tb testing.TB) (*Cluster, error) { return startWith(tb, false) }

func startWith(tb testing.TB, replicas bool) (*Cluster, error) {
	c := &Cluster{tb: tb}
	n := 3
	if replicas {
		n = 6
	}
	for range n {
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
	masters := c.Nodes[:3]
	for i, n := range masters {
		from, to := i*slots/len(masters), (i+1)*slots/len(masters)-1
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
	for i, n := range c.Nodes[3:] {
		id, err := command(masters[i].Addr, "CLUSTER MYID")
		if err == nil {
			err = c.waitKnown(n.Addr, id)
		}
		var reply string
		if err == nil {
			reply, err = command(n.Addr, "CLUSTER REPLICATE "+strings.TrimSpace(id))
		}
		if err != nil || !strings.HasPrefix(reply, "+OK") {
			c.Close()
			return nil, fmt.Errorf("CLUSTER REPLICATE on %s: %q %v", n.Addr, reply, err)
		}
	}
	if err := c.waitOK(); err != nil {
		c.Close()
		return nil, err
	}
	// A replica that never synced does not stand for election: wait for
	// each to be streaming from its master.
	for _, n := range c.Nodes[3:] {
		if err := waitFor(10*time.Second, func() bool {
			info, err := command(n.Addr, "INFO replication")
			return err == nil && strings.Contains(info, "master_link_status:up")
		}); err != nil {
			c.Close()
			return nil, fmt.Errorf("replica %s: %w", n.Addr, err)
		}
	}
	return c, nil
}

func waitFor(within time.Duration, cond func() bool) error {
	deadline := time.Now().Add(within)
	for time.Now().Before(deadline) {
		if cond() {
			return nil
		}
		time.Sleep(20 * time.Millisecond)
	}
	return fmt.Errorf("not within %s", within)
}

// waitKnown waits until the node at addr has heard of node id.
func (c *Cluster) waitKnown(addr, id string) error {
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		if nodes, err := command(addr, "CLUSTER NODES"); err == nil && strings.Contains(nodes, strings.TrimSpace(id)) {
			return nil
		}
		time.Sleep(20 * time.Millisecond)
	}
	return fmt.Errorf("%s did not learn of node %s within 10s", addr, id)
}

// KillMaster kills (SIGKILL) the master that serves slot 0 and returns it;
// its replica takes over once the cluster has marked it failed.
// WaitPromoted waits for that; Restart of the killed node brings it back
// as a replica.
func (c *Cluster) KillMaster() (*Server, error) {
	for _, n := range c.Nodes {
		if n.cmd == nil {
			continue
		}
		nodes, err := command(n.Addr, "CLUSTER NODES")
		if err != nil {
			continue
		}
		for _, line := range strings.Split(nodes, "\n") {
			if f := strings.Fields(line); len(f) > 2 && strings.Contains(f[2], "myself") && holdsSlot0(f) {
				n.Stop()
				return n, nil
			}
		}
	}
	return nil, fmt.Errorf("no live master serves slot 0")
}

// holdsSlot0 reports whether a CLUSTER NODES line is a live master holding
// slot 0.
func holdsSlot0(f []string) bool {
	if len(f) < 9 || !strings.Contains(f[2], "master") || strings.Contains(f[2], "fail") {
		return false
	}
	for _, r := range f[8:] {
		if r == "0" || strings.HasPrefix(r, "0-") {
			return true
		}
	}
	return false
}

// WaitPromoted waits until every slot is served again after a master was
// killed: the cluster is ok on every live node, and slot 0's master is
// another node than dead.
func (c *Cluster) WaitPromoted(dead *Server, within time.Duration) error {
	deadline := time.Now().Add(within)
	for time.Now().Before(deadline) {
		ok := true
		for _, n := range c.Nodes {
			if n == dead || n.cmd == nil {
				continue
			}
			info, err := command(n.Addr, "CLUSTER INFO")
			if err != nil || !strings.Contains(info, "cluster_state:ok") {
				ok = false
				break
			}
			nodes, err := command(n.Addr, "CLUSTER NODES")
			if err != nil || !servesSlot0(nodes, dead.Addr) {
				ok = false
				break
			}
		}
		if ok {
			return nil
		}
		time.Sleep(20 * time.Millisecond)
	}
	return fmt.Errorf("the Redis Cluster did not promote a replica within %s", within)
}

// servesSlot0 reports whether, in a CLUSTER NODES listing, a live master
// other than dead holds slot 0.
func servesSlot0(nodes, dead string) bool {
	for _, line := range strings.Split(nodes, "\n") {
		if f := strings.Fields(line); len(f) > 1 && !strings.HasPrefix(f[1], dead+"@") && holdsSlot0(f) {
			return true
		}
	}
	return false
}

// Close stops every node and removes its data.
func (c *Cluster) Close() {
	for _, n := range c.Nodes {
		n.Stop()
		os.RemoveAll(n.Dir)
	}
}

// Flush empties every master (replicas follow): a fresh store for the
// next test of a suite.
func (c *Cluster) Flush() error {
	for _, n := range c.Nodes {
		reply, err := command(n.Addr, "FLUSHALL SYNC")
		if err == nil && strings.HasPrefix(reply, "-READONLY") {
			continue // a replica
		}
		if err != nil || !strings.HasPrefix(reply, "+OK") {
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

// WaitOK waits until every node reports cluster_state:ok.
func (c *Cluster) WaitOK() error { return c.waitOK() }

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
