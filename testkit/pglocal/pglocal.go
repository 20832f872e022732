// Package pglocal runs a PostgreSQL server on loopback from the installed
// PostgreSQL binaries (Debian's postgresql package puts them under
// /usr/lib/postgresql/<version>/bin): the store tests' databases, the
// failover tests' primary and synchronous standby, and `make run`'s
// database under .local/pg. PostgreSQL refuses to run as root, so a root
// caller runs it as the postgres user (or nobody), owning its directory.
package pglocal

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/partnerpay/api/testkit/freeport"
)

// Places are where BinIn looks by default: `postgres` on PATH, then
// Debian's /usr/lib/postgresql/<version>/bin, newest first.
var Places = []string{"PATH", "/usr/lib/postgresql/*/bin"}

// Bin is the directory of the PostgreSQL server binaries, in Places.
func Bin() (string, error) { return BinIn() }

// BinIn is the directory of the PostgreSQL server binaries in places (glob
// patterns of directories, or "PATH" for the directory of `postgres` on
// PATH), in order, the newest version first within a pattern; no places:
// Places.
func BinIn(places ...string) (string, error) {
	if len(places) == 0 {
		places = Places
	}
	for _, place := range places {
		if place == "PATH" {
			if p, err := exec.LookPath("postgres"); err == nil {
				if real, err := filepath.EvalSymlinks(p); err == nil {
					return filepath.Dir(real), nil
				}
			}
			continue
		}
		dirs, _ := filepath.Glob(place)
		sort.Slice(dirs, func(i, j int) bool { return version(dirs[i]) > version(dirs[j]) })
		for _, d := range dirs {
			if _, err := os.Stat(filepath.Join(d, "postgres")); err == nil {
				return d, nil
			}
		}
	}
	return "", fmt.Errorf("no PostgreSQL server binaries in %s", strings.Join(places, ", "))
}

func version(binDir string) int {
	n, _ := strconv.Atoi(filepath.Base(filepath.Dir(binDir)))
	return n
}

// Available reports whether a PostgreSQL server can be started here.
func Available() bool {
	_, err := Bin()
	return err == nil
}

// Options configure a server.
type Options struct {
	// Bin is the directory of the server binaries; empty: Bin().
	Bin string
	// Dir is the data directory; initdb fills it when it has no cluster.
	Dir string
	// Port on 127.0.0.1; 0 picks a free one.
	Port int
	// Fsync on (make run) or off (tests on tmpfs: a killed process loses
	// nothing the kernel has, and tests need no power-loss durability).
	Fsync bool
	// Settings are extra server settings (name=value), for instance
	// synchronous_standby_names=* on a primary.
	Settings []string
	// Log receives the server's own log; nil discards it.
	Log io.Writer
}

// Server is one PostgreSQL server process.
type Server struct {
	opts Options
	Port int
	bin  string
	cred *syscall.Credential

	mu   sync.Mutex
	cmd  *exec.Cmd
	done chan struct{}
}

// New prepares a server in opts.Dir, running initdb when the directory
// holds no cluster yet. Start runs it.
func New(opts Options) (*Server, error) {
	bin, err := opts.Bin, error(nil)
	if bin == "" {
		if bin, err = Bin(); err != nil {
			return nil, err
		}
	}
	if opts.Log == nil {
		opts.Log = io.Discard
	}
	if opts.Port == 0 {
		if opts.Port, err = freePort(); err != nil {
			return nil, err
		}
	}
	s := &Server{opts: opts, Port: opts.Port, bin: bin}
	if s.cred, err = credential(); err != nil {
		return nil, err
	}
	if err := s.prepareDir(); err != nil {
		return nil, err
	}
	if _, err := os.Stat(filepath.Join(opts.Dir, "PG_VERSION")); err == nil {
		return s, nil
	}
	args := []string{"-D", opts.Dir, "-U", "postgres", "--auth=trust", "-E", "UTF8", "--locale=C", "--no-instructions"}
	if !opts.Fsync {
		args = append(args, "--no-sync")
	}
	if out, err := s.command("initdb", args...).CombinedOutput(); err != nil {
		return nil, fmt.Errorf("initdb %s: %v\n%s", opts.Dir, err, out)
	}
	return s, nil
}

// credential is who runs PostgreSQL: the caller, or, for root (which
// PostgreSQL refuses), the postgres user or nobody.
func credential() (*syscall.Credential, error) {
	if os.Geteuid() != 0 {
		return nil, nil
	}
	for _, name := range []string{"postgres", "nobody"} {
		u, err := user.Lookup(name)
		if err != nil {
			continue
		}
		uid, _ := strconv.Atoi(u.Uid)
		gid, _ := strconv.Atoi(u.Gid)
		return &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}, nil
	}
	return nil, errors.New("running as root, and there is no postgres or nobody user to run PostgreSQL as")
}

// prepareDir makes the data directory and, for a server run as another
// user, hands it over and lets that user reach it.
func (s *Server) prepareDir() error {
	if err := os.MkdirAll(s.opts.Dir, 0o700); err != nil {
		return err
	}
	if s.cred == nil {
		return nil
	}
	for d := filepath.Dir(s.opts.Dir); d != "/" && d != "."; d = filepath.Dir(d) {
		fi, err := os.Stat(d)
		if err != nil {
			return err
		}
		if fi.Mode().Perm()&0o001 == 0 {
			if err := os.Chmod(d, fi.Mode().Perm()|0o011); err != nil {
				return err
			}
		}
	}
	return filepath.Walk(s.opts.Dir, func(p string, _ os.FileInfo, err error) error {
		if err != nil {
			return err
		}
		return os.Lchown(p, int(s.cred.Uid), int(s.cred.Gid))
	})
}

func (s *Server) command(name string, args ...string) *exec.Cmd {
	cmd := exec.Command(filepath.Join(s.bin, name), args...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: s.cred, Setpgid: true, Pdeathsig: syscall.SIGKILL}
	cmd.Env = append(cmd.Environ(), "LC_ALL=C")
	return cmd
}

// Dir is the data directory.
func (s *Server) Dir() string { return s.opts.Dir }

// Addr is host:port.
func (s *Server) Addr() string { return "127.0.0.1:" + strconv.Itoa(s.Port) }

// URL is the libpq URL of database db as the superuser.
func (s *Server) URL(db string) string {
	return "postgres://postgres@" + s.Addr() + "/" + db + "?sslmode=disable"
}

// Start runs the server and waits until it accepts connections (a standby
// accepts them read-only).
func (s *Server) Start() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cmd != nil {
		return nil
	}
	fsync := "off"
	if s.opts.Fsync {
		fsync = "on"
	}
	args := []string{"-D", s.opts.Dir, "-p", strconv.Itoa(s.Port),
		"-c", "listen_addresses=127.0.0.1", "-c", "unix_socket_directories=",
		"-c", "fsync=" + fsync, "-c", "full_page_writes=" + fsync,
		"-c", "max_connections=300", "-c", "shared_buffers=32MB",
		"-c", "wal_level=replica", "-c", "max_wal_senders=5", "-c", "hot_standby=on",
		"-c", "log_min_messages=warning", "-c", "log_checkpoints=off", "-c", "log_line_prefix=%m [%p] "}
	for _, kv := range s.opts.Settings {
		args = append(args, "-c", kv)
	}
	cmd := s.command("postgres", args...)
	cmd.Stdout, cmd.Stderr = s.opts.Log, s.opts.Log
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("start postgres: %w", err)
	}
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); close(done) }()
	s.cmd, s.done = cmd, done
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		select {
		case <-done:
			s.cmd = nil
			return fmt.Errorf("postgres on %s exited during start-up (see its log)", s.Addr())
		default:
		}
		// Connect only once the postmaster says it takes connections: a
		// connection before that is refused with a FATAL line in its log
		// ("the database system is starting up") that reads like a failure.
		if s.accepting() && s.ping() == nil {
			return nil
		}
		time.Sleep(25 * time.Millisecond)
	}
	return fmt.Errorf("postgres on %s did not accept connections within 30s", s.Addr())
}

// accepting reports whether the postmaster says it accepts connections:
// the status line of postmaster.pid (PostgreSQL 10 and later) is "ready";
// a file without one (an older server) is taken at its word by ping.
func (s *Server) accepting() bool {
	b, err := os.ReadFile(filepath.Join(s.opts.Dir, "postmaster.pid"))
	if err != nil {
		return false
	}
	lines := strings.Split(string(b), "\n")
	return len(lines) < 8 || strings.TrimSpace(lines[7]) == "ready"
}

func (s *Server) ping() error {
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	c, err := pgx.Connect(ctx, s.URL("postgres"))
	if err != nil {
		return err
	}
	defer c.Close(ctx)
	return c.Ping(ctx)
}

// Stop shuts the server down fast (SIGINT: in-flight transactions roll
// back, committed ones stay) and waits for it.
func (s *Server) Stop() { s.signal(syscall.SIGINT) }

// Kill kills the server with SIGKILL, as a crash would, and waits for it.
// Its children (backends, the WAL writer) go with it.
func (s *Server) Kill() { s.signal(syscall.SIGKILL) }

func (s *Server) signal(sig syscall.Signal) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cmd == nil {
		return
	}
	_ = s.cmd.Process.Signal(sig)
	if sig == syscall.SIGKILL {
		// The postmaster's children would linger (and keep the port and
		// shared memory) without it: kill the process group.
		_ = syscall.Kill(-s.cmd.Process.Pid, syscall.SIGKILL)
	}
	select {
	case <-s.done:
	case <-time.After(30 * time.Second):
		_ = syscall.Kill(-s.cmd.Process.Pid, syscall.SIGKILL)
		<-s.done
	}
	s.cmd = nil
}

// Pid is the postmaster's process id, 0 when it is not running.
func (s *Server) Pid() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cmd == nil {
		return 0
	}
	return s.cmd.Process.Pid
}

// Exec runs one statement as the superuser on database db.
func (s *Server) Exec(ctx context.Context, db, sql string) error {
	c, err := pgx.Connect(ctx, s.URL(db))
	if err != nil {
		return err
	}
	defer c.Close(ctx)
	_, err = c.Exec(ctx, sql)
	return err
}

// Schema is database db's schema as pg_dump --schema-only writes it,
// without owners, privileges, comments or SET lines, one blank line
// between statements, and
// without the tables that match each of exclude (pg_dump patterns): what a
// schema file compares and keeps.
func (s *Server) Schema(ctx context.Context, db string, exclude ...string) (string, error) {
	args := []string{"--schema-only", "--no-owner", "--no-privileges", "--no-comments", "--dbname", s.URL(db)}
	for _, x := range exclude {
		args = append(args, "--exclude-table", x)
	}
	cmd := exec.CommandContext(ctx, filepath.Join(s.bin, "pg_dump"), args...)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return "", fmt.Errorf("pg_dump: %v: %s", err, stderr.String())
	}
	var b strings.Builder
	blank := true // no blank line first
	for _, line := range strings.Split(string(out), "\n") {
		switch {
		case strings.HasPrefix(line, "--"),
			strings.HasPrefix(line, "SET "),
			strings.HasPrefix(line, "SELECT pg_catalog.set_config("),
			// pg_dump 15.14 and later fence its script with a random key.
			strings.HasPrefix(line, `\restrict `), strings.HasPrefix(line, `\unrestrict `):
			continue
		case strings.TrimSpace(line) == "":
			if !blank {
				b.WriteString("\n")
			}
			blank = true
			continue
		}
		blank = false
		b.WriteString(line + "\n")
	}
	return strings.TrimRight(b.String(), "\n") + "\n", nil
}

// CreateDatabase creates database name.
func (s *Server) CreateDatabase(ctx context.Context, name string) error {
	return s.Exec(ctx, "postgres", "CREATE DATABASE "+pgx.Identifier{name}.Sanitize())
}

// Standby makes a streaming standby of s in dir (pg_basebackup -R) and
// starts it. With synchronous_standby_names set on s, s's commits wait
// for it.
func (s *Server) Standby(dir string, log io.Writer) (*Server, error) {
	st := &Server{opts: Options{Dir: dir, Fsync: s.opts.Fsync, Log: log}, bin: s.bin, cred: s.cred}
	if st.opts.Log == nil {
		st.opts.Log = io.Discard
	}
	var err error
	if st.Port, err = freePort(); err != nil {
		return nil, err
	}
	if err := st.prepareDir(); err != nil {
		return nil, err
	}
	out, err := st.command("pg_basebackup", "-D", dir, "-h", "127.0.0.1", "-p", strconv.Itoa(s.Port),
		"-U", "postgres", "-X", "stream", "-R", "-c", "fast", "--no-sync").CombinedOutput()
	if err != nil {
		return nil, fmt.Errorf("pg_basebackup: %v\n%s", err, out)
	}
	if err := st.Start(); err != nil {
		return nil, err
	}
	return st, nil
}

// Promote turns a standby into a primary (pg_ctl promote, waiting until it
// takes writes).
func (s *Server) Promote() error {
	out, err := s.command("pg_ctl", "promote", "-w", "-t", "30", "-D", s.opts.Dir).CombinedOutput()
	if err != nil {
		return fmt.Errorf("pg_ctl promote: %v\n%s", err, out)
	}
	return nil
}

// WaitStreaming waits until n standbys stream from s synchronously.
func (s *Server) WaitStreaming(ctx context.Context, n int) error {
	for {
		c, err := pgx.Connect(ctx, s.URL("postgres"))
		if err == nil {
			var got int
			err = c.QueryRow(ctx, "SELECT count(*) FROM pg_stat_replication WHERE state = 'streaming' AND sync_state IN ('sync','quorum')").Scan(&got)
			c.Close(ctx)
			if err == nil && got >= n {
				return nil
			}
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("no synchronous standby streaming from %s: %w", s.Addr(), ctx.Err())
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// TempDir makes a directory for a data directory: on tmpfs when there is
// one (fsync costs nothing there), reachable by the user PostgreSQL runs as.
func TempDir(pattern string) (string, error) {
	base := ""
	if fi, err := os.Stat("/dev/shm"); err == nil && fi.IsDir() {
		base = "/dev/shm"
	}
	dir, err := os.MkdirTemp(base, pattern)
	if err != nil {
		return "", err
	}
	return dir, os.Chmod(dir, 0o711)
}

// freePort is a port of this process's own (package freeport).
func freePort() (int, error) {
	ports, err := freeport.Ports(1)
	if err != nil {
		return 0, err
	}
	return ports[0], nil
}

// ValidName reports whether s is a plain lower-case identifier, safe as a
// database name.
func ValidName(s string) bool {
	if s == "" || len(s) > 63 {
		return false
	}
	return strings.Trim(s, "abcdefghijklmnopqrstuvwxyz0123456789_") == "" && (s[0] < '0' || s[0] > '9')
}
