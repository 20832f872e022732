package pglocal

import (
	"context"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"

	"github.com/jackc/pgx/v5"
)

// Link is the network between a standby and its primary, as a test's
// faults see it: a TCP relay on loopback that can stall (no byte moves
// either way: a partition, or a standby whose disk hung) and be cut (every
// connection closed and what was in flight dropped, as a partition that
// lasts does to WAL the standby had not read).
type Link struct {
	ln     net.Listener
	target string

	mu      sync.Mutex
	stalled bool
	gate    chan struct{} // closed while the link moves bytes
	conns   map[net.Conn]struct{}
	closed  bool
}

// NewLink relays connections made to its address to target (host:port).
func NewLink(target string) (*Link, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	l := &Link{ln: ln, target: target, gate: make(chan struct{}), conns: map[net.Conn]struct{}{}}
	close(l.gate)
	go l.accept()
	return l, nil
}

// Addr is where the standby connects.
func (l *Link) Addr() string { return l.ln.Addr().String() }

// Port is Addr's port.
func (l *Link) Port() int { return l.ln.Addr().(*net.TCPAddr).Port }

// Stall stops every byte, both ways, until Resume.
func (l *Link) Stall() {
	l.mu.Lock()
	defer l.mu.Unlock()
	if !l.stalled {
		l.stalled = true
		l.gate = make(chan struct{})
	}
}

// Resume lets bytes move again.
func (l *Link) Resume() {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.stalled {
		l.stalled = false
		close(l.gate)
	}
}

// Retarget relays the connections made from now on to target instead: an
// address that follows a promotion, as a Service or a virtual IP in front
// of a failed-over store does. Connections already made stay where they
// are until Cut.
func (l *Link) Retarget(target string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.target = target
}

// Cut closes every connection through the link, dropping whatever it held.
// New connections are still relayed (and stall if the link is stalled).
func (l *Link) Cut() {
	l.mu.Lock()
	defer l.mu.Unlock()
	for c := range l.conns {
		c.Close()
	}
	clear(l.conns)
}

// Close cuts the link and stops listening.
func (l *Link) Close() {
	l.mu.Lock()
	l.closed = true
	l.mu.Unlock()
	l.ln.Close()
	l.Cut()
	l.Resume()
}

func (l *Link) track(c net.Conn) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		c.Close()
		return false
	}
	l.conns[c] = struct{}{}
	return true
}

func (l *Link) wait() {
	l.mu.Lock()
	g := l.gate
	l.mu.Unlock()
	<-g
}

func (l *Link) accept() {
	for {
		in, err := l.ln.Accept()
		if err != nil {
			return
		}
		go func() {
			l.mu.Lock()
			target := l.target
			l.mu.Unlock()
			out, err := net.Dial("tcp", target)
			if err != nil {
				in.Close()
				return
			}
			if !l.track(in) || !l.track(out) {
				in.Close()
				out.Close()
				return
			}
			go l.relay(out, in)
			l.relay(in, out)
		}()
	}
}

// relay copies src to dst a chunk at a time, each chunk held back while
// the link is stalled.
func (l *Link) relay(dst, src net.Conn) {
	defer dst.Close()
	defer src.Close()
	buf := make([]byte, 32<<10)
	for {
		l.wait()
		n, err := src.Read(buf)
		if n > 0 {
			l.wait()
			if _, werr := dst.Write(buf[:n]); werr != nil {
				return
			}
		}
		if err != nil { // EOF or a cut: the other side closes with it
			return
		}
	}
}

// StandbyVia makes a streaming standby of s in dir, named name (its
// application_name, which synchronous_standby_names lists), that streams
// from s through a new Link, and starts it.
func (s *Server) StandbyVia(dir, name string, log io.Writer) (*Server, *Link, error) {
	link, err := NewLink(s.Addr())
	if err != nil {
		return nil, nil, err
	}
	st := &Server{opts: Options{Dir: dir, Fsync: s.opts.Fsync, Log: log}, bin: s.bin, cred: s.cred}
	if st.opts.Log == nil {
		st.opts.Log = io.Discard
	}
	if st.Port, err = freePort(); err != nil {
		return nil, nil, err
	}
	if err := st.prepareDir(); err != nil {
		return nil, nil, err
	}
	out, err := st.command("pg_basebackup", "-D", dir, "-h", "127.0.0.1", "-p", strconv.Itoa(s.Port),
		"-U", "postgres", "-X", "stream", "-R", "-c", "fast", "--no-sync").CombinedOutput()
	if err != nil {
		return nil, nil, fmt.Errorf("pg_basebackup: %v\n%s", err, out)
	}
	// The last setting in postgresql.auto.conf wins: through the link, by name.
	conf := fmt.Sprintf("primary_conninfo = 'host=127.0.0.1 port=%d user=postgres application_name=%s'\n", link.Port(), name)
	f, err := os.OpenFile(filepath.Join(dir, "postgresql.auto.conf"), os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		return nil, nil, err
	}
	_, err = f.WriteString(conf)
	f.Close()
	if err != nil {
		return nil, nil, err
	}
	if err := st.Start(); err != nil {
		return nil, nil, err
	}
	return st, link, nil
}

// ReceivedLSN is how far a standby has received WAL, as a number that
// compares: what a failover manager reads to promote the standby that
// has the most.
func (s *Server) ReceivedLSN(ctx context.Context) (uint64, error) {
	c, err := pgx.Connect(ctx, s.URL("postgres"))
	if err != nil {
		return 0, err
	}
	defer c.Close(ctx)
	var lsn *string
	if err := c.QueryRow(ctx, "SELECT pg_last_wal_receive_lsn()::text").Scan(&lsn); err != nil {
		return 0, err
	}
	if lsn == nil {
		return 0, nil
	}
	hi, lo, ok := strings.Cut(*lsn, "/")
	if !ok {
		return 0, fmt.Errorf("lsn %q", *lsn)
	}
	h, err1 := strconv.ParseUint(hi, 16, 32)
	l, err2 := strconv.ParseUint(lo, 16, 32)
	if err1 != nil || err2 != nil {
		return 0, fmt.Errorf("lsn %q", *lsn)
	}
	return h<<32 | l, nil
}

// MostAdvanced is, of standbys, the one that has received the most WAL.
func MostAdvanced(ctx context.Context, standbys ...*Server) (*Server, error) {
	var best *Server
	var bestLSN uint64
	for _, s := range standbys {
		lsn, err := s.ReceivedLSN(ctx)
		if err != nil {
			return nil, fmt.Errorf("standby %s: %w", s.Addr(), err)
		}
		if best == nil || lsn > bestLSN {
			best, bestLSN = s, lsn
		}
	}
	return best, nil
}
