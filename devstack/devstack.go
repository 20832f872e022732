// Package devstack starts the whole stack as local processes: the system
// of record (the given DATABASE_URL, or a PostgreSQL under the state
// directory), Redis (the given one, a
// redis-server, or an in-process one), every service binary from a bin
// directory, and a first sandbox key when there is no keys file. It backs
// `make run` and the end-to-end tests, so both run the same stack.
package devstack

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/alicebob/miniredis/v2"

	"github.com/partnerpay/api/pkg/config"
	"github.com/partnerpay/api/testkit/chaintest"
	"github.com/partnerpay/api/testkit/freeport"
	"github.com/partnerpay/api/testkit/pglocal"
	"github.com/partnerpay/api/testkit/redistest"
)

// Service is one binary of the stack.
type Service struct {
	Name      string
	Addr      string // main address, host:port
	AdminAddr string
}

// Options configure a stack. Zero values take the defaults of DESIGN §5.
type Options struct {
	BinDir          string            // where `make build` put the binaries
	StateDir        string            // secrets and the default keys file (.local)
	KeysFile        string            // GATEWAY_KEYS_FILE
	RedisURL        string            // REDIS_URL; empty (and no cluster): start one
	RedisClusterURL string            // REDIS_CLUSTER_URL: a Redis Cluster instead
	DatabaseURL     string            // DATABASE_URL; empty: a local PostgreSQL (startDatabase)
	PostgresSearch  []string          // where a local PostgreSQL's server binaries are looked for; empty: pglocal's places
	Installer       Installer         // installs PostgreSQL where none is found; nil: none (the caller says what to run)
	GatewayAddr     string            // GATEWAY_ADDR
	Ports           map[string]string // per-service "addr" overrides, e.g. "payout": "127.0.0.1:0"
	Env             map[string]string // extra environment for every service (QUOTE_TTL, …)
	ChainURLs       map[int64]string  // CHAIN_RPC_URL_<id>; a sandbox chain not named: a local testnet (startChains)
	Logs            io.Writer         // where service logs go, each line prefixed with its name
	Out             io.Writer         // what a person should read: the key, the addresses
}

// Stack is a running stack.
type Stack struct {
	GatewayURL    string
	SandboxKey    string // set when the stack issued a first key
	InternalToken string // the services' shared X-Internal-Token
	ProviderKey   string // BANK_PROVIDER_KEY: the sandbox bank's API key
	RedisURL      string
	DatabaseURL   string // the services' DATABASE_URL
	Services      map[string]*Process

	opts     Options
	env      []string
	mini     *miniredis.Miniredis
	redisPr  *Process
	postgres *pglocal.Server
	chains   []*chaintest.Chain
	// ChainURLs are the chains' JSON-RPC URLs, local or given.
	ChainURLs map[int64]string
}

// Process is one running binary.
type Process struct {
	Service
	env   []string // the stack's environment and the process's own
	cmd   *exec.Cmd
	done  chan struct{}
	logs  *prefixWriter
	stack *Stack
}

// serviceOrder is the start order of Binaries: each after what it
// calls, the gateway last.
var serviceOrder = Names()

// Start brings the stack up and waits until every service is healthy.
func Start(ctx context.Context, opts Options) (*Stack, error) {
	if opts.StateDir == "" {
		opts.StateDir = ".local"
	}
	if opts.KeysFile == "" {
		opts.KeysFile = filepath.Join(opts.StateDir, "keys.json")
	}
	if opts.Logs == nil {
		opts.Logs = os.Stderr
	}
	if opts.Out == nil {
		opts.Out = io.Discard
	}
	if err := os.MkdirAll(opts.StateDir, 0o700); err != nil {
		return nil, err
	}
	s := &Stack{opts: opts, Services: map[string]*Process{}}
	ok := false
	defer func() {
		if !ok {
			s.Stop()
		}
	}()
	svcs := map[string]Service{}
	for _, b := range Binaries {
		name, d := b.Name, Service{Name: b.Name, Addr: b.Addr, AdminAddr: b.AdminAddr}
		if name == "gateway" && opts.GatewayAddr != "" {
			d.Addr = opts.GatewayAddr
		}
		if a, ok := opts.Ports[name]; ok {
			d.Addr = a
		}
		if a, ok := opts.Ports[name+"_admin"]; ok {
			d.AdminAddr = a
		}
		svcs[name] = d
	}
	// A second stack on the same fixed ports would print a key the first
	// stack's gateway refuses, then restart its services forever: say so,
	// before anything is started or printed.
	if err := portsFree(svcs); err != nil {
		return nil, err
	}
	if err := s.chainPortsFree(); err != nil {
		return nil, err
	}
	if err := s.startRedis(); err != nil {
		return nil, err
	}
	chainURLs, err := s.startRecords(ctx)
	if err != nil {
		return nil, err
	}
	s.ChainURLs = chainURLs
	secrets, err := loadSecrets(filepath.Join(opts.StateDir, "secrets.env"))
	if err != nil {
		return nil, err
	}
	chainVars, err := chainEnv(s.ChainURLs, secrets["DEPOSIT_SEED"])
	if err != nil {
		return nil, err
	}
	gatewayURL := "http://" + svcs["gateway"].Addr
	bankURL := "http://" + svcs["sandboxbank"].Addr
	env := map[string]string{
		"GATEWAY_KEYS_FILE":      opts.KeysFile,
		"INTERNAL_TOKEN":         secrets["INTERNAL_TOKEN"],
		"QUOTE_SECRET":           secrets["QUOTE_SECRET"],
		"CONSENT_SECRET":         secrets["CONSENT_SECRET"],
		"ORDERS_SECRET":          secrets["ORDERS_SECRET"],
		"BANK_PROVIDER_KEY":      secrets["BANK_PROVIDER_KEY"],
		"BANK_PROVIDER_URL":      bankURL,
		"SANDBOXBANK_PUBLIC_URL": bankURL,
		"CONSENT_RETURN_URL":     gatewayURL + "/consent/return",
		"SANDBOXBANK_NOTIFY_URL": gatewayURL + "/provider/notifications",
		"ORDERS_RETURN_URL":      gatewayURL + "/orders/return",
		// As compose and the chart run them (beside their GOMEMLIMIT): a
		// collection when the heap has grown 4x, not 2x.
		"GOGC": "400",
	}
	for name, svc := range svcs {
		up := strings.ToUpper(name)
		env[up+"_ADDR"] = svc.Addr
		env[up+"_ADMIN_ADDR"] = svc.AdminAddr
		env[up+"_URL"] = "http://" + svc.Addr
	}
	if opts.RedisClusterURL != "" {
		env["REDIS_CLUSTER_URL"] = opts.RedisClusterURL
	} else {
		env["REDIS_URL"] = s.RedisURL
	}
	if s.DatabaseURL != "" {
		env["DATABASE_URL"] = s.DatabaseURL
	}
	for k, v := range chainVars {
		env[k] = v
	}
	for k, v := range opts.Env {
		env[k] = v
	}
	s.env = os.Environ()
	for k, v := range env {
		s.env = append(s.env, k+"="+v)
	}
	s.GatewayURL, s.InternalToken, s.ProviderKey = gatewayURL, env["INTERNAL_TOKEN"], env["BANK_PROVIDER_KEY"]

	if _, err := os.Stat(opts.KeysFile); errors.Is(err, os.ErrNotExist) {
		key, err := s.issueSandboxKey(ctx)
		if err != nil {
			return nil, err
		}
		s.SandboxKey = key
	}
	for _, name := range serviceOrder {
		p, err := s.startProcess(svcs[name])
		if err != nil {
			return nil, err
		}
		s.Services[name] = p
		if err := p.WaitHealthy(ctx, 20*time.Second); err != nil {
			return nil, err
		}
	}
	ok = true
	return s, nil
}

// portsFree checks that every fixed address of the stack can be listened
// on: the first that cannot is named, with the variable that moves it.
func portsFree(svcs map[string]Service) error {
	for _, name := range serviceOrder {
		svc := svcs[name]
		for _, a := range []struct{ addr, env string }{{svc.Addr, strings.ToUpper(name) + "_ADDR"}, {svc.AdminAddr, strings.ToUpper(name) + "_ADMIN_ADDR"}} {
			if _, port, err := net.SplitHostPort(a.addr); err != nil || port == "0" {
				continue
			}
			l, err := net.Listen("tcp", a.addr)
			if err != nil {
				return fmt.Errorf("%s (%s) is in use: another stack (a second make run?) or another program holds it; stop it, or set %s to a free address", a.addr, name, a.env)
			}
			l.Close()
		}
	}
	return nil
}

func (s *Stack) startRedis() error {
	if s.opts.RedisClusterURL != "" {
		s.RedisURL = s.opts.RedisClusterURL
		fmt.Fprintf(s.opts.Out, "redis: the Redis Cluster at %s\n", config.Redacted(s.opts.RedisClusterURL))
		return nil
	}
	if s.opts.RedisURL != "" {
		s.RedisURL = s.opts.RedisURL
		return nil
	}
	if path, err := exec.LookPath("redis-server"); err == nil {
		addrs, err := freeport.Addrs(1)
		if err != nil {
			return err
		}
		addr := addrs[0]
		_, port, _ := net.SplitHostPort(addr)
		// Durable, as every Redis of the product (DESIGN §6): records
		// survive a restart of make run, and a kill -9 of Redis.
		dir, err := filepath.Abs(filepath.Join(s.opts.StateDir, "redis"))
		if err != nil {
			return err
		}
		if err := os.MkdirAll(dir, 0o700); err != nil {
			return err
		}
		p := &Process{Service: Service{Name: "redis", Addr: addr}, stack: s}
		p.cmd = exec.Command(path, redistest.Args(port, dir)...)
		if err := p.start(); err != nil {
			return err
		}
		s.redisPr = p
		s.RedisURL = "redis://" + addr + "/0"
		for i := 0; i < 100; i++ {
			if redistest.Ping(addr) == nil {
				fmt.Fprintf(s.opts.Out, "redis: redis-server on %s, append-only file in %s\n", addr, dir)
				return nil
			}
			time.Sleep(50 * time.Millisecond)
		}
		return fmt.Errorf("redis-server on %s did not start", addr)
	}
	m := miniredis.NewMiniRedis()
	if err := m.StartAddr("127.0.0.1:0"); err != nil {
		return err
	}
	s.mini = m
	s.RedisURL = "redis://" + m.Addr() + "/0"
	fmt.Fprintf(s.opts.Out, "redis: no REDIS_URL and no redis-server on PATH; using an in-process Redis on %s.\n"+
		"       It is for a first look only: nothing is durable and every record is lost on exit. Install redis-server for real work.\n", m.Addr())
	return nil
}

// sandboxTokens are every token of the sandbox catalogue, for the first key.
const sandboxTokens = "84532:0x036CbD53842c5426634e7929541eC2318f3dCF7e,84532:0x808456652fdb597867f38412077A9182bf77359F," +
	"11155111:0x1c7D4B196Cb0C7B01d743Fbc6116a902379C7238,11155111:0x08210F9170F89Ab7658F0B5E3fF39b0E03C594D4"

// KeysFile is the keys file the stack's gateway reads.
func (s *Stack) KeysFile() string { return s.opts.KeysFile }

// SandboxKeyRate is the requests per second of the key a first make run
// issues: plenty for a person pasting the guide, not for a load test.
const SandboxKeyRate = 10

// FasterKeyCommand is the line that issues a key like the first one at a
// higher rate, into keysFile.
func FasterKeyCommand(keysFile string) string {
	return "bin/gateway keys issue --file " + keysFile + " --id fast --products bank,fiat,deposit,card " +
		"--source-chains 84532,11155111 --destination-chains 84532,11155111 --rate 200"
}

func (s *Stack) issueSandboxKey(ctx context.Context) (string, error) {
	cmd := exec.CommandContext(ctx, filepath.Join(s.opts.BinDir, "gateway"), "keys", "issue",
		"--file", s.opts.KeysFile, "--id", "sandbox", "--products", "bank,fiat,deposit,card",
		"--source-chains", "84532,11155111", "--destination-chains", "84532,11155111",
		"--tokens", sandboxTokens, "--rate", strconv.Itoa(SandboxKeyRate), "--max-execution-usd", "25000")
	cmd.Env = s.env
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return "", fmt.Errorf("issue the sandbox key: %v: %s", err, stderr.String())
	}
	return strings.TrimSpace(string(out)), nil
}

func (s *Stack) startProcess(svc Service) (*Process, error) {
	p := &Process{Service: svc, stack: s, env: s.env}
	if err := p.Start(); err != nil {
		return nil, err
	}
	return p, nil
}

// Environ is the environment the process runs with: what its container
// gives a subcommand run beside it (healthcheck).
func (p *Process) Environ() []string { return append([]string{}, p.env...) }

// Start (re)starts the process with the stack's environment.
func (p *Process) Start() error {
	p.cmd = exec.Command(filepath.Join(p.stack.opts.BinDir, p.Name))
	p.cmd.Env = p.env
	return p.start()
}

func (p *Process) start() error {
	p.logs = &prefixWriter{prefix: fmt.Sprintf("%-8s| ", p.Name), w: p.stack.opts.Logs}
	p.cmd.Stdout, p.cmd.Stderr = p.logs, p.logs
	p.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGTERM}
	if err := p.cmd.Start(); err != nil {
		return fmt.Errorf("start %s: %w", p.Name, err)
	}
	p.done = make(chan struct{})
	go func() { _ = p.cmd.Wait(); close(p.done) }()
	return nil
}

// WaitHealthy polls GET /health until it answers 200.
func (p *Process) WaitHealthy(ctx context.Context, within time.Duration) error {
	deadline := time.Now().Add(within)
	c := &http.Client{Timeout: 500 * time.Millisecond}
	for time.Now().Before(deadline) {
		select {
		case <-p.done:
			return fmt.Errorf("%s exited during start-up (see its log lines above)", p.Name)
		case <-ctx.Done():
			return ctx.Err()
		default:
		}
		if resp, err := c.Get("http://" + p.Addr + "/health"); err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
		}
		time.Sleep(50 * time.Millisecond)
	}
	return fmt.Errorf("%s did not become healthy on %s within %s", p.Name, p.Addr, within)
}

// stopWait is how long Stop waits for a graceful exit before SIGKILL:
// above every binary's drain and grace (Binaries).
const stopWait = 45 * time.Second

// Stop sends SIGTERM and waits for a graceful exit (SIGKILL after stopWait).
func (p *Process) Stop() {
	if p == nil || p.cmd == nil || p.cmd.Process == nil {
		return
	}
	select {
	case <-p.done:
		return
	default:
	}
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	if !p.Wait(stopWait) {
		_ = syscall.Kill(-p.cmd.Process.Pid, syscall.SIGKILL)
		<-p.done
	}
}

// Signal sends sig to the process (SIGSTOP and SIGCONT for fault tests,
// SIGTERM to stop it without waiting). After SIGSTOP it returns once the
// process is stopped: the kernel stops a busy process's threads a moment
// after the signal is sent.
func (p *Process) Signal(sig os.Signal) error {
	if err := p.cmd.Process.Signal(sig); err != nil || sig != syscall.SIGSTOP {
		return err
	}
	stat := fmt.Sprintf("/proc/%d/stat", p.cmd.Process.Pid)
	for range 200 {
		b, err := os.ReadFile(stat)
		if err != nil {
			return nil // not on Linux: nothing to wait for
		}
		// pid (comm) state …: the state follows the last ')'.
		if i := bytes.LastIndexByte(b, ')'); i >= 0 && i+2 < len(b) && (b[i+2] == 'T' || b[i+2] == 't') {
			return nil
		}
		time.Sleep(5 * time.Millisecond)
	}
	return fmt.Errorf("%s did not stop within 1s of SIGSTOP", p.Name)
}

// Wait waits up to d for the process to exit and reports whether it did.
func (p *Process) Wait(d time.Duration) bool {
	select {
	case <-p.done:
		return true
	case <-time.After(d):
		return false
	}
}

// ExitCode is the process's exit code once it has exited (-1 before).
func (p *Process) ExitCode() int {
	select {
	case <-p.done:
		return p.cmd.ProcessState.ExitCode()
	default:
		return -1
	}
}

// StartGateway starts one more gateway on addr (admin on adminAddr), with
// the stack's environment: replicas share the keys file and Redis.
func (s *Stack) StartGateway(ctx context.Context, addr, adminAddr string) (*Process, error) {
	p := &Process{Service: Service{Name: "gateway", Addr: addr, AdminAddr: adminAddr}, stack: s}
	p.env = append(append([]string{}, s.env...), "GATEWAY_ADDR="+addr, "GATEWAY_ADMIN_ADDR="+adminAddr)
	p.cmd = exec.Command(filepath.Join(s.opts.BinDir, "gateway"))
	p.cmd.Env = p.env
	if err := p.start(); err != nil {
		return nil, err
	}
	if err := p.WaitHealthy(ctx, 20*time.Second); err != nil {
		p.Stop()
		return nil, err
	}
	return p, nil
}

// startRecords starts the database and the local chains, kept from the
// run before or new, together: a database kept across chains started from
// their genesis, or chains kept across a new database, would disagree
// (forgetChains, startDatabase). It answers every chain's RPC URL.
func (s *Stack) startRecords(ctx context.Context) (map[int64]string, error) {
	chainsNew := s.chainsNew()
	databaseNew, err := s.startDatabase(ctx, chainsNew)
	if err != nil {
		return nil, err
	}
	if databaseNew || chainsNew {
		if err := s.forgetChains(); err != nil {
			return nil, err
		}
	}
	return s.startChains()
}

// startDatabase picks the system of record (DESIGN §6): DatabaseURL; else
// a local PostgreSQL's server binaries run under the state directory
// (initdb on first use, fsync on, stopped with the stack); else, as root
// on Debian or Ubuntu, Debian's postgresql installed now, said so; else it
// stops at once, with the one line to run. A local database kept from an
// earlier run starts afresh when the local chains start new (chainsNew):
// its deposits, refunds and nonces were of blocks the new chains lack.
// created: the local database is new (made now, or afresh).
func (s *Stack) startDatabase(ctx context.Context, chainsNew bool) (created bool, err error) {
	if s.opts.DatabaseURL != "" {
		s.DatabaseURL = s.opts.DatabaseURL
		fmt.Fprintf(s.opts.Out, "database: %s\n", config.Redacted(s.opts.DatabaseURL))
		return false, nil
	}
	bin, err := pglocal.BinIn(s.opts.PostgresSearch...)
	if err != nil {
		switch install := s.opts.Installer; {
		case install == nil || !install.Possible():
			return false, errNoPostgres
		default:
			fmt.Fprintf(s.opts.Out, "database: no DATABASE_URL and no PostgreSQL installed; installing Debian's postgresql now (apt-get install postgresql), as .ci/run does…\n")
			if err := install.Install(ctx, s.opts.Logs); err != nil {
				return false, fmt.Errorf("installing postgresql: %w\n%w", err, errNoPostgres)
			}
			if bin, err = pglocal.BinIn(s.opts.PostgresSearch...); err != nil {
				return false, fmt.Errorf("postgresql installed, but %w", err)
			}
		}
	}
	dir, err := filepath.Abs(filepath.Join(s.opts.StateDir, "pg"))
	if err != nil {
		return false, err
	}
	addrs, err := freeport.Addrs(1)
	if err != nil {
		return false, err
	}
	_, port, _ := net.SplitHostPort(addrs[0])
	n, _ := strconv.Atoi(port)
	pg, err := pglocal.New(pglocal.Options{Bin: bin, Dir: dir, Port: n, Fsync: true,
		Log: &prefixWriter{prefix: fmt.Sprintf("%-8s| ", "postgres"), w: s.opts.Logs}})
	if err != nil {
		return false, fmt.Errorf("postgresql under %s: %w", dir, err)
	}
	if err := pg.Start(); err != nil {
		return false, err
	}
	s.postgres = pg
	err = pg.Exec(ctx, "postgres", "CREATE DATABASE partnerapi")
	created = err == nil
	if err != nil && strings.Contains(err.Error(), "already exists") && chainsNew {
		fmt.Fprintf(s.opts.Out, "database: the local chains start new (no %s yet), and the database held an earlier chain's deposits, refunds and nonces: it starts afresh too (the keys file is kept)\n",
			filepath.Join(s.opts.StateDir, "chain"))
		err = pg.Exec(ctx, "postgres", "DROP DATABASE partnerapi WITH (FORCE)")
		if err == nil {
			err = pg.Exec(ctx, "postgres", "CREATE DATABASE partnerapi")
		}
		created = err == nil
	}
	if err != nil && !strings.Contains(err.Error(), "already exists") {
		return false, fmt.Errorf("create database: %w", err)
	}
	s.DatabaseURL = pg.URL("partnerapi")
	fmt.Fprintf(s.opts.Out, "database: PostgreSQL (%s) on %s, data in %s\n", bin, pg.Addr(), dir)
	return created, nil
}

// errNoPostgres is what a machine without PostgreSQL is told: the one line
// to run.
var errNoPostgres = errors.New("no PostgreSQL here, and the stack keeps every record in it. Install it and run make run again:\n\n    sudo apt-get install postgresql      (Debian, Ubuntu; or brew install postgresql@15 on macOS)\n\nor point DATABASE_URL at one (postgres://user:password@host:5432/db)")

// Postgres is the PostgreSQL server the stack started (nil when it
// started none).
func (s *Stack) Postgres() *pglocal.Server { return s.postgres }

// StopRedis stops the Redis the stack started (for outage tests).
func (s *Stack) StopRedis() {
	if s.redisPr != nil {
		s.redisPr.Stop()
	}
	if s.mini != nil {
		s.mini.Close()
	}
}

// Stop stops every process: the gateway first (no new requests come in),
// then the services together, then Redis.
func (s *Stack) Stop() {
	last := len(serviceOrder) - 1
	s.Services[serviceOrder[last]].Stop()
	var wg sync.WaitGroup
	for _, name := range serviceOrder[:last] {
		wg.Add(1)
		go func(p *Process) { defer wg.Done(); p.Stop() }(s.Services[name])
	}
	wg.Wait()
	s.StopRedis()
	if s.postgres != nil {
		s.postgres.Stop()
	}
	s.stopChains()
}

// Supervise restarts a service that exits, as a process supervisor would,
// until ctx ends: after 1 s, then twice as long each time it exits again
// within a minute of its start (at most 30 s). say gets a line naming the
// service, its exit code and the delay. It returns once ctx has ended and
// no restart is under way, so Stop may follow.
func (s *Stack) Supervise(ctx context.Context, say func(string)) {
	var wg sync.WaitGroup
	for _, name := range serviceOrder {
		p := s.Services[name]
		wg.Add(1)
		go func() {
			defer wg.Done()
			delay, started := time.Second, time.Now()
			for {
				select {
				case <-ctx.Done():
					return
				case <-p.done:
				}
				if ctx.Err() != nil {
					return
				}
				if time.Since(started) > time.Minute {
					delay = time.Second
				}
				say(fmt.Sprintf("devstack: %s exited (exit code %d); restarting it in %s", name, p.cmd.ProcessState.ExitCode(), delay))
				select {
				case <-ctx.Done():
					return
				case <-time.After(delay):
				}
				started = time.Now()
				if err := p.Start(); err != nil {
					say(fmt.Sprintf("devstack: %s did not restart: %v", name, err))
					p.done = closed
				} else if err := p.WaitHealthy(ctx, 30*time.Second); err == nil {
					say(fmt.Sprintf("devstack: %s is back", name))
				}
				delay = min(2*delay, 30*time.Second)
			}
		}()
	}
	wg.Wait()
}

// closed is a done channel for a process that could not be started.
var closed = func() chan struct{} { c := make(chan struct{}); close(c); return c }()

// loadSecrets reads the stack's shared secrets, making them on first use so
// quote ids stay the same across restarts of `make run`.
func loadSecrets(path string) (map[string]string, error) {
	out := map[string]string{}
	if b, err := os.ReadFile(path); err == nil {
		for _, line := range strings.Split(string(b), "\n") {
			if k, v, ok := strings.Cut(line, "="); ok {
				out[k] = v
			}
		}
	}
	changed := false
	for _, k := range secretNames {
		if out[k] == "" {
			var b [32]byte
			if _, err := rand.Read(b[:]); err != nil {
				return nil, err
			}
			out[k] = hex.EncodeToString(b[:])
			changed = true
		}
	}
	if changed {
		var content strings.Builder
		for _, k := range secretNames {
			content.WriteString(k + "=" + out[k] + "\n")
		}
		if err := os.WriteFile(path, []byte(content.String()), 0o600); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// secretNames are the secrets the services share in a local stack.
// DEPOSIT_SEED is the local deposit wallet's seed: the payout service is
// given its public key (DEPOSIT_XPUB), and a test derives a payout's
// private key from it.
var secretNames = []string{"INTERNAL_TOKEN", "QUOTE_SECRET", "CONSENT_SECRET", "ORDERS_SECRET", "BANK_PROVIDER_KEY", "DEPOSIT_SEED"}

// prefixWriter relays a process's output line by line, each prefixed with
// the process's name, and keeps nothing once written: under load it makes
// one write per chunk the pipe delivers, and its memory stays flat.
type prefixWriter struct {
	mu      sync.Mutex
	prefix  string
	w       io.Writer
	partial []byte // the start of a line whose end has not arrived
	out     []byte
}

// maxPartial bounds a line without its newline (the services cap theirs at
// 4 KiB): past it, the line is written as it is.
const maxPartial = 64 << 10

func (p *prefixWriter) Write(b []byte) (int, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	n := len(b)
	p.out = p.out[:0]
	for len(b) > 0 {
		i := bytes.IndexByte(b, '\n')
		if i < 0 {
			p.partial = append(p.partial, b...)
			if len(p.partial) > maxPartial {
				p.out = append(append(append(p.out, p.prefix...), p.partial...), '\n')
				p.partial = p.partial[:0]
			}
			break
		}
		p.out = append(append(append(p.out, p.prefix...), p.partial...), b[:i+1]...)
		p.partial = p.partial[:0]
		b = b[i+1:]
	}
	if len(p.out) > 0 {
		_, _ = p.w.Write(p.out)
	}
	if cap(p.out) > 1<<20 { // one huge chunk does not pin its buffer
		p.out = nil
	}
	return n, nil
}

// Pid is the process id of the running binary, 0 when it is not running.
func (p *Process) Pid() int {
	if p == nil || p.cmd == nil || p.cmd.Process == nil {
		return 0
	}
	return p.cmd.Process.Pid
}

// RedisPid is the process id of the redis-server the stack started, 0 when
// it started none.
func (s *Stack) RedisPid() int { return s.redisPr.Pid() }
