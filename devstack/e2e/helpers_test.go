// Package e2e drives the stack that `make run` starts, as real processes
// with a real redis-server, through the gateway, as a partner would.
//
// Its tests run one at a time (no t.Parallel): each starts a stack of its
// own, seven processes, and kills, freezes or restarts its parts and times
// its answers against bounds ("within a second", "within 5 s"); side by
// side on CI's two cores they would share the CPU and measure each other.
package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/partnerpay/api/devstack"
	"github.com/partnerpay/api/testkit/freeport"
	"github.com/partnerpay/api/testkit/pgtest"
	"github.com/partnerpay/api/testkit/redistest"
)

var binDir string

// services are the binaries of the stack.
var services = devstack.Names()

func TestMain(m *testing.M) {
	// Not parallel: it runs the package's tests, once, around shared state
	// (the binaries it builds, the Redis Cluster).
	dir, err := os.MkdirTemp("", "e2e-bin-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	binDir = dir
	code := 1
	if err := build(dir); err != nil {
		fmt.Fprintln(os.Stderr, "build:", err)
	} else if onCluster() {
		// One Redis Cluster for the whole run, flushed before each stack: a
		// new cluster costs two seconds.
		if sharedCluster, err = redistest.NewCluster(); err != nil {
			fmt.Fprintln(os.Stderr, "redis cluster:", err)
		} else {
			code = m.Run()
			sharedCluster.Close()
		}
	} else {
		code = m.Run()
	}
	pgtest.Cleanup()
	os.RemoveAll(dir)
	os.Exit(code)
}

// build compiles every service once for the whole run.
func build(dir string) error {
	for _, svc := range services {
		cmd := exec.Command("go", "build", "-ldflags", "-X github.com/partnerpay/api/pkg/obs.Version=e2e -X github.com/partnerpay/api/pkg/obs.Revision=e2e0000",
			"-o", filepath.Join(dir, svc), "./cmd/"+svc)
		cmd.Dir = filepath.Join("..", "..", "services", svc)
		if out, err := cmd.CombinedOutput(); err != nil {
			return fmt.Errorf("%s: %v\n%s", svc, err, out)
		}
	}
	return nil
}

// stack is a running stack for one test.
type stack struct {
	*devstack.Stack
	t        testing.TB
	keysFile string
	redis    store
	logs     *syncBuffer
}

// store is the stack's Redis: one node, or a 3-master Redis Cluster when
// E2E_REDIS=cluster (make test runs the suite both ways). Its faults act on
// every node.
type store interface {
	Stop()
	Restart()
	Pause()
	Resume()
}

type single struct{ *redistest.Server }

type cluster struct{ *redistest.Cluster }

var sharedCluster *redistest.Cluster

// onCluster reports whether this run of the suite is against a Redis Cluster.
func onCluster() bool { return os.Getenv("E2E_REDIS") == "cluster" }

type stackOption func(*devstack.Options)

// devstackOptions is devstack.Options, for options written in tests.
type devstackOptions = devstack.Options

func withEnv(k, v string) stackOption {
	return func(o *devstack.Options) { o.Env[k] = v }
}

// withFirstRunKey starts the stack the way a newcomer's `make run` does:
// no keys file, so the stack issues a sandbox key with every product.
func withFirstRunKey() stackOption {
	return func(o *devstack.Options) { o.Env["e2e.firstrun"] = "1" }
}

// startStack starts the stack on free ports with its own redis-server and
// an empty keys file; it stops when the test ends.
func startStack(t testing.TB, opts ...stackOption) *stack {
	t.Helper()
	dir := t.TempDir()
	var rs store
	logs := &syncBuffer{}
	o := devstack.Options{
		BinDir:   binDir,
		StateDir: dir,
		KeysFile: filepath.Join(dir, "keys.json"),
		Ports:    map[string]string{},
		// No drain before stopping: the tests start and stop many stacks.
		Env: map[string]string{"KEYS_RELOAD_INTERVAL": "100ms", "SANDBOXBANK_SETTLEMENT_DELAY": "300ms", "SANDBOX_PAYOUT_SETTLE": "300ms", "SHUTDOWN_DRAIN": "0s",
			// A transfer is recorded once mined (the local chains mine one
			// that waits at once): the tests do not wait for a second block.
			"CHAIN_CONFIRMATIONS": "84532:1,11155111:1"},
		Logs: logs,
	}
	if onCluster() {
		if err := sharedCluster.Flush(); err != nil {
			t.Fatal(err)
		}
		rs, o.RedisClusterURL = cluster{sharedCluster}, sharedCluster.URL()
	} else {
		n := redistest.Start(t)
		rs, o.RedisURL = single{n}, n.URL()
	}
	// Each stack gets a database of its own on the run's PostgreSQL.
	o.DatabaseURL = pgtest.URL(t)
	// Every address of the stack, its chains' included, chosen at once:
	// none can be another's.
	addrs := freeAddrs(t, 2*len(services)+len(devstack.ChainAddrs))
	for i, svc := range services {
		o.Ports[svc] = addrs[2*i]
		o.Ports[svc+"_admin"] = addrs[2*i+1]
	}
	next := 2 * len(services)
	for id := range devstack.ChainAddrs {
		o.Ports["chain_"+strconv.FormatInt(id, 10)] = addrs[next] // each stack its own chains
		next++
	}
	for _, opt := range opts {
		opt(&o)
	}
	if o.Env["e2e.firstrun"] != "" {
		delete(o.Env, "e2e.firstrun")
	} else if _, err := os.Lstat(o.KeysFile); err == nil {
		// a keys file the test set up itself
	} else if err := os.WriteFile(o.KeysFile, []byte(`{"keys":[]}`), 0o600); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	s, err := devstack.Start(ctx, o)
	if err != nil {
		t.Fatalf("start stack: %v\n%s", err, logs.String())
	}
	st := &stack{Stack: s, t: t, keysFile: o.KeysFile, redis: rs, logs: logs}
	t.Cleanup(func() {
		s.Stop()
		// Card data never reaches a log (DESIGN §7): not ours, not the
		// sandbox provider's, in any stack of the run.
		if n := cardNumber.FindString(logs.String()); n != "" {
			t.Errorf("a test card number (%s) reached the stack's logs", n)
		}
		// A JSON log line names each key once: a log pipeline keeps the
		// first or the last of two, each its own way.
		if line, key := twiceNamed(logs.String()); key != "" {
			t.Errorf("a log line names %q twice: %s", key, line)
		}
		if t.Failed() {
			t.Logf("stack logs:\n%s", logs.String())
		}
	})
	return st
}

// twiceNamed finds a JSON log line (after its "service | " prefix) with
// a key twice at its top level, and answers it and the key.
func twiceNamed(logs string) (line, key string) {
	for line := range strings.Lines(logs) {
		_, rest, ok := strings.Cut(line, "| ")
		if !ok || !strings.HasPrefix(rest, "{") {
			continue
		}
		dec := json.NewDecoder(strings.NewReader(rest))
		if _, err := dec.Token(); err != nil {
			continue
		}
		seen := map[string]bool{}
		for dec.More() {
			k, err := dec.Token()
			name, isKey := k.(string)
			if err != nil || !isKey {
				break
			}
			if seen[name] {
				return strings.TrimSpace(line), name
			}
			seen[name] = true
			var v json.RawMessage
			if dec.Decode(&v) != nil {
				break
			}
		}
	}
	return "", ""
}

// cardNumber matches the sandbox's test card numbers, however typed.
var cardNumber = regexp.MustCompile(`4242[ -]?4242[ -]?4242[ -]?4242|4000[ -]?0000[ -]?0000[ -]?(0002|3220|9995|0069)`)

// startRedis starts a redis-server for one test and returns its URL.
func startRedis(t *testing.T) string { return redistest.Start(t).URL() }

// freeAddrs is freeport.Addrs for a test: addresses no other test
// process is handed at the same time.
func freeAddrs(t testing.TB, n int) []string {
	t.Helper()
	out, err := freeport.Addrs(n)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// keys runs `gateway keys …` against the stack's keys file and returns stdout.
func (s *stack) keys(args ...string) string {
	s.t.Helper()
	full := append([]string{"keys", args[0], "--file", s.keysFile}, args[1:]...)
	cmd := exec.Command(filepath.Join(binDir, "gateway"), full...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		s.t.Fatalf("gateway %s: %v: %s", strings.Join(full, " "), err, stderr.String())
	}
	return strings.TrimSpace(string(out))
}

// issue makes a key and waits until the running gateway accepts it.
func (s *stack) issue(id string, args ...string) string {
	s.t.Helper()
	key := s.keys(append([]string{"issue", "--id", id}, args...)...)
	var last response
	if !eventually(5*time.Second, func() bool { last = s.get("/v1/currencies", key); return last.Status == http.StatusOK }) {
		s.t.Fatalf("the gateway did not accept key %q within 5s; last answer %d %s", id, last.Status, last.Body)
	}
	return key
}

// killAndRestart kills service name with SIGKILL, as a crash or an OOM
// kill would, starts it again and waits until it is healthy.
func (s *stack) killAndRestart(name string) {
	s.t.Helper()
	p := s.Services[name]
	if err := p.Signal(syscall.SIGKILL); err != nil {
		s.t.Fatal(err)
	}
	p.Wait(10 * time.Second)
	if err := p.Start(); err != nil {
		s.t.Fatal(err)
	}
	if err := p.WaitHealthy(context.Background(), 30*time.Second); err != nil {
		s.t.Fatal(err)
	}
}

func (s *stack) waitFor(cond func() bool) { s.t.Helper(); s.waitForWithin(3*time.Second, cond) }

func (s *stack) waitForWithin(d time.Duration, cond func() bool) {
	s.t.Helper()
	if !eventually(d, cond) {
		s.t.Fatalf("condition not met within %s", d)
	}
}

// untilClosed runs work from n goroutines, over and over, until stop is
// closed; wg counts them.
func untilClosed(wg *sync.WaitGroup, n int, stop <-chan struct{}, work func()) {
	for range n {
		wg.Go(func() {
			for {
				select {
				case <-stop:
					return
				default:
				}
				work()
			}
		})
	}
}

// eventually polls cond until it holds, or until d has passed and it has
// been asked three times: on a starved machine one call may take longer
// than d (under stress-ng a test made a single poll in 5 s and failed on
// it, though the gateway had loaded the keys 0.1 s in), and the later
// calls see what has happened by then.
func eventually(d time.Duration, cond func() bool) bool {
	deadline := time.Now().Add(d)
	for tries := 1; ; tries++ {
		if cond() {
			return true
		}
		if tries >= 3 && time.Now().After(deadline) {
			return false
		}
		time.Sleep(25 * time.Millisecond)
	}
}

// withinASecond polls cond until it holds, and fails the test if that
// takes longer than the contract's second (keys files are re-read every
// 100 ms in the tests).
func (s *stack) withinASecond(what string, cond func() bool) {
	s.t.Helper()
	deadline := time.Now().Add(time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			s.t.Fatalf("%s: not within a second", what)
		}
		time.Sleep(25 * time.Millisecond)
	}
}

// logged waits up to 3 s for a log line containing want: logs cross a pipe,
// so a line can arrive after the response it belongs to.
func (s *stack) logged(want string) bool {
	return eventually(3*time.Second, func() bool { return strings.Contains(s.logs.String(), want) })
}

type response struct {
	Status int
	Header http.Header
	Body   string
}

var client = &http.Client{Timeout: 10 * time.Second}

func (s *stack) do(method, path, key, body string, header ...string) response {
	s.t.Helper()
	return s.doWith(client, method, path, key, body, header...)
}

// doWith is do through c (another source address, say).
func (s *stack) doWith(c *http.Client, method, path, key, body string, header ...string) response {
	s.t.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequest(method, s.GatewayURL+path, rd)
	if body != "" {
		req.GetBody = func() (io.ReadCloser, error) { return io.NopCloser(strings.NewReader(body)), nil }
	}
	if err != nil {
		s.t.Fatal(err)
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	if key != "" {
		req.Header.Set("Authorization", "Bearer "+key)
	}
	for i := 0; i+1 < len(header); i += 2 {
		if header[i+1] == "" {
			req.Header.Del(header[i])
			continue
		}
		req.Header.Set(header[i], header[i+1])
	}
	resp, err := c.Do(req)
	if err != nil {
		s.t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		s.t.Fatal(err)
	}
	if err := checkContract(req, []byte(body), resp, b); err != nil {
		s.t.Errorf("%s %s: %v\nbody: %.300s", method, path, err, b)
	}
	return response{Status: resp.StatusCode, Header: resp.Header, Body: string(b)}
}

func (s *stack) get(path, key string) response { return s.do(http.MethodGet, path, key, "") }

func (s *stack) post(path, key, body string) response { return s.do(http.MethodPost, path, key, body) }

// metrics scrapes a service's admin port.
func (s *stack) metrics(service string) string {
	s.t.Helper()
	resp, err := client.Get("http://" + s.Services[service].AdminAddr + "/metrics")
	if err != nil {
		s.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return string(b)
}

// fieldOrder lists the top-level keys of a JSON object in wire order.
func fieldOrder(t testing.TB, body string) []string {
	t.Helper()
	dec := json.NewDecoder(strings.NewReader(body))
	if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
		t.Fatalf("body is not a JSON object: %s", body)
	}
	var keys []string
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			t.Fatal(err)
		}
		keys = append(keys, tok.(string))
		var skip json.RawMessage
		if err := dec.Decode(&skip); err != nil {
			t.Fatal(err)
		}
	}
	return keys
}

// errorBody is the exact envelope the gateway must send.
func errorBody(code, message string) string {
	return `{"environment":"sandbox","error":{"code":"` + code + `","message":` + quote(message) + `}}`
}

func quote(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}

type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

func TestTwiceNamedFindsAKeyNamedTwice(t *testing.T) {
	t.Parallel()
	logs := "payout  | {\"msg\":\"a\",\"payout_id\":\"bpo_1\",\"nested\":{\"payout_id\":\"x\"}}\n" +
		"chain | not json\n" +
		"payout  | {\"msg\":\"b\",\"payout_id\":\"bpo_1\",\"status\":\"completed\",\"payout_id\":\"bpo_1\"}\n"
	line, key := twiceNamed(logs)
	if key != "payout_id" || !strings.Contains(line, `"msg":"b"`) {
		t.Errorf("twiceNamed: %q in %q", key, line)
	}
	if _, key := twiceNamed(logs[:strings.Index(logs, "payout  | {\"msg\":\"b\"")]); key != "" {
		t.Errorf("twiceNamed found %q in lines that name each key once", key)
	}
}
