package edge

import (
	"bytes"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/partnerpay/api/pkg/jsonbody"
	"github.com/partnerpay/api/pkg/serve"
	"github.com/partnerpay/api/pkg/upstream"
	"github.com/partnerpay/api/services/gateway/internal/apikey"
)

const internalBody = `{"environment":"sandbox","error":{"code":"internal","message":"Internal error; it has been logged."}}`

func TestRefusesWhatAFrontProxyCouldReadDifferently(t *testing.T) {
	t.Parallel()
	g := newGateway(t, keySet("bank"), answer(200, "sandbox", `{}`), quiet())
	for _, tt := range []struct {
		name   string
		header []string
		msg    string
	}{
		{"two Content-Type headers", []string{"Content-Type", "application/json", "Content-Type", "text/plain"}, "Send one Content-Type header, not several."},
		{"a gzip body", []string{"Content-Type", "application/json", "Content-Encoding", "gzip"}, "Request bodies must not be encoded: send them without Content-Encoding."},
	} {
		t.Run(tt.name, func(t *testing.T) {
			r := httptest.NewRequest("POST", "/v1/bank/payout/quote", strings.NewReader(`{}`))
			r.Header.Set("Authorization", "Bearer "+testKey)
			for i := 0; i < len(tt.header); i += 2 {
				r.Header.Add(tt.header[i], tt.header[i+1])
			}
			w := httptest.NewRecorder()
			g.ServeHTTP(w, r)
			want := `{"environment":"sandbox","error":{"code":"invalid_request","message":"` + tt.msg + `"}}`
			if w.Code != 400 || w.Body.String() != want || w.Header().Get("Connection") != "close" {
				t.Fatalf("%d %s (Connection %q)", w.Code, w.Body, w.Header().Get("Connection"))
			}
		})
	}
}

// An encoded body is refused in its place in the contract's order (DESIGN
// §2): a deployment without keys is not_configured, an unknown endpoint
// not_found, a missing key 401, a key without the product 403, and only a
// request that passes them all hears about its Content-Encoding, with the
// RateLimit fields of every keyed answer. The connection closes after each.
func TestAnEncodedBodyIsRefusedInItsPlace(t *testing.T) {
	t.Parallel()
	withKeys := newGateway(t, keySet("fiat"), answer(200, "sandbox", `{}`), quiet())
	noKeys := newGateway(t, staticKeys{apikey.NewSet(&apikey.File{})}, answer(200, "sandbox", `{}`), quiet())
	encoded := []string{"Content-Type", "application/json", "Content-Encoding", "gzip"}
	for _, tt := range []struct {
		name   string
		g      *Gateway
		path   string
		key    bool
		status int
		code   string
		limits bool
	}{
		{"no keys configured", noKeys, "/v1/fiat/accounts", true, 404, "not_configured", false},
		{"an unknown endpoint", withKeys, "/v1/nowhere", true, 404, "not_found", false},
		{"no key", withKeys, "/v1/fiat/accounts", false, 401, "unauthorized", false},
		{"a key without the product", withKeys, "/v1/bank/payout/quote", true, 403, "permission_denied", true},
		{"everything else right", withKeys, "/v1/fiat/accounts", true, 400, "invalid_request", true},
	} {
		r := httptest.NewRequest("POST", tt.path, strings.NewReader(`{}`))
		if tt.key {
			r.Header.Set("Authorization", "Bearer "+testKey)
		}
		for i := 0; i < len(encoded); i += 2 {
			r.Header.Set(encoded[i], encoded[i+1])
		}
		w := httptest.NewRecorder()
		tt.g.ServeHTTP(w, r)
		if w.Code != tt.status || !strings.Contains(w.Body.String(), `"code":"`+tt.code+`"`) || w.Header().Get("Connection") != "close" {
			t.Errorf("%s: %d %s (Connection %q), want %d %s", tt.name, w.Code, w.Body, w.Header().Get("Connection"), tt.status, tt.code)
		}
		if got := w.Header().Get("RateLimit-Policy") != ""; got != tt.limits {
			t.Errorf("%s: RateLimit-Policy %q", tt.name, w.Header().Get("RateLimit-Policy"))
		}
	}
}

// wireServer serves g as the gateway binary does (serve.NewServer: its
// timeouts, OPTIONS * to the handler) and returns its address.
func wireServer(t *testing.T, g http.Handler) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := serve.NewServer(ln.Addr().String(), g, quiet())
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })
	return ln.Addr().String()
}

// sendRaw writes raw on a fresh connection and reads until the server
// closes it, or 2 s pass (closed is false then: the server kept it open).
func sendRaw(t *testing.T, addr, raw string) (answer string, closed bool) {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(2 * time.Second))
	io.WriteString(c, raw)
	b, err := io.ReadAll(c)
	return string(b), err == nil
}

// Framing a front proxy could read differently, over the wire: net/http
// parses every request; the gateway closes the connection after any
// request that carried Transfer-Encoding, and after any HTTP/1.0 request,
// so nothing framed another way rides behind them. OPTIONS * is answered
// in the envelope.
func TestWhatRidesBehindAnAmbiguousRequestIsNeverServed(t *testing.T) {
	t.Parallel()
	var got atomic.Int32
	g := newGateway(t, keySet("bank"), upstreamFunc(func(r *http.Request) *http.Response {
		got.Add(1)
		return answer(200, "sandbox", `{"ok":1}`)(r)
	}), quiet())
	addr := wireServer(t, g)
	head := "POST /v1/bank/payout/quote HTTP/1.1\r\nHost: gw\r\nAuthorization: Bearer " + testKey + "\r\nContent-Type: application/json\r\n"
	next := "GET /v1/currencies HTTP/1.1\r\nHost: gw\r\nAuthorization: Bearer " + testKey + "\r\n\r\n"
	for _, tt := range []struct {
		name, raw string
		requests  int32
	}{
		{"Content-Length with Transfer-Encoding, then a request a front proxy would see inside the body",
			head + "Content-Length: 4\r\nTransfer-Encoding: chunked\r\n\r\n2\r\n{}\r\n0\r\n\r\n" + next, 1},
		{"chunked, then another request", head + "Transfer-Encoding: chunked\r\n\r\n2\r\n{}\r\n0\r\n\r\n" + next, 1},
		{"HTTP/1.0 kept alive with a chunked body (net/http ignores its Transfer-Encoding)",
			strings.Replace(head, "HTTP/1.1", "HTTP/1.0", 1) + "Connection: keep-alive\r\nTransfer-Encoding: chunked\r\n\r\n" +
				"3a\r\nGET /v1/currencies HTTP/1.1\r\nHost: gw\r\nAuthorization: Bearer x\r\n\r\n\r\n0\r\n\r\n", 1},
	} {
		t.Run(tt.name, func(t *testing.T) {
			got.Store(0)
			answer, closed := sendRaw(t, addr, tt.raw)
			if !closed || strings.Count(answer, "HTTP/1.") != 1 || !strings.Contains(answer, "Connection: close") {
				t.Fatalf("closed %v:\n%s", closed, answer)
			}
			if got.Load() != tt.requests {
				t.Errorf("%d requests reached the upstream, want %d", got.Load(), tt.requests)
			}
		})
	}
	t.Run("OPTIONS * gets the envelope, and the connection goes on", func(t *testing.T) {
		answer, closed := sendRaw(t, addr, "OPTIONS * HTTP/1.1\r\nHost: gw\r\n\r\n"+strings.Replace(next, "\r\n\r\n", "\r\nConnection: close\r\n\r\n", 1))
		first, second, _ := strings.Cut(answer, "HTTP/1.1 200 ")
		if !closed || !strings.HasPrefix(first, "HTTP/1.1 404 ") || !strings.Contains(first, `{"environment":"sandbox","error":{"code":"not_found","message":"No such endpoint."}}`) || second == "" {
			t.Fatalf("closed %v:\n%s", closed, answer)
		}
	})
}

// slowReader gives a few bytes, then a timeout, as a connection whose read
// deadline passed does.
type slowReader struct{ n int }

func (s *slowReader) Read(p []byte) (int, error) {
	if s.n == 0 {
		s.n++
		return copy(p, `{"cry`), nil
	}
	return 0, &net.OpError{Op: "read", Err: timeoutErr{}}
}

type timeoutErr struct{}

func (timeoutErr) Error() string   { return "i/o timeout" }
func (timeoutErr) Timeout() bool   { return true }
func (timeoutErr) Temporary() bool { return true }

// TestASlowBodyIs408InTheEnvelope: a body that stops arriving is 408 and
// the connection is closed, read by its Content-Length or chunked; a body
// cut short is 400 and a chunked one over 1 MiB 413, both closing too.
func TestASlowBodyIs408InTheEnvelope(t *testing.T) {
	t.Parallel()
	g := newGateway(t, keySet("bank"), answer(200, "sandbox", `{}`), quiet())
	slow := `{"environment":"sandbox","error":{"code":"request_timeout","message":"The request body did not arrive in time; send it again."}}`
	for _, tc := range []struct {
		name   string
		body   io.Reader
		length int64 // -1: chunked
		status int
		want   string
	}{
		{"with a length", &slowReader{}, 20, 408, slow},
		{"chunked", &slowReader{}, -1, 408, slow},
		{"cut short", strings.NewReader(`{"cry`), 20, 400,
			`{"environment":"sandbox","error":{"code":"invalid_request","message":"Request body could not be read."}}`},
		{"chunked, over 1 MiB", strings.NewReader(strings.Repeat(" ", jsonbody.MaxBytes+1)), -1, 413,
			`{"environment":"sandbox","error":{"code":"invalid_request","message":"Request body is larger than 1 MiB."}}`},
	} {
		r := httptest.NewRequest("POST", "/v1/bank/payout/quote", nil)
		r.Body, r.ContentLength = io.NopCloser(tc.body), tc.length
		r.Header.Set("Authorization", "Bearer "+testKey)
		r.Header.Set("Content-Type", "application/json")
		w := httptest.NewRecorder()
		g.ServeHTTP(w, r)
		if w.Code != tc.status || w.Body.String() != tc.want || w.Header().Get("Connection") != "close" {
			t.Errorf("%s: %d %s (Connection %q)", tc.name, w.Code, w.Body, w.Header().Get("Connection"))
		}
	}
}

// hangs answers nothing until its caller goes away. It reads the body
// first: net/http notices a closed connection only once the body is read.
func hangs(w http.ResponseWriter, r *http.Request) {
	_, _ = io.Copy(io.Discard, r.Body)
	<-r.Context().Done()
}

// hangsButItsHealth answers its health and hangs every other call: a
// service whose handlers are stuck (on a lock, a pool) while its server
// still answers.
func hangsButItsHealth(w http.ResponseWriter, r *http.Request) {
	if r.URL.Path == "/health" {
		io.WriteString(w, `{"ok":true}`)
		return
	}
	hangs(w, r)
}

func TestAHungUpstreamFailsWithinTheRouteTimeoutThenFast(t *testing.T) {
	t.Parallel()
	hung := httptest.NewServer(http.HandlerFunc(hangsButItsHealth))
	defer hung.Close()
	var logs bytes.Buffer
	g := newGatewayTo(t, hung.URL, slog.New(slog.NewJSONHandler(&logs, nil)))
	defer g.Close()
	const timeout = 300 * time.Millisecond // the routes' own (seconds) would make this test slow
	for _, byMethod := range g.routes {
		for _, rt := range byMethod {
			rt.Timeout = timeout
		}
	}
	for i := range breakerTrips {
		start := time.Now()
		w := serveOne(g, "POST", "/v1/bank/payout/quote", `{}`)
		if d := time.Since(start); w.Code != 500 || w.Body.String() != internalBody || d < timeout {
			t.Fatalf("call %d: %d %s after %s; want 500 after the %s route timeout", i, w.Code, w.Body, d, timeout)
		}
	}
	// With the circuit open a call does not wait out its route's timeout,
	// however long: the route's is now a minute, and the call ends long
	// before (a busy machine may take a while, never a minute).
	for _, byMethod := range g.routes {
		for _, rt := range byMethod {
			rt.Timeout = time.Minute
		}
	}
	start := time.Now()
	w := serveOne(g, "POST", "/v1/bank/payout/quote", `{}`)
	if d := time.Since(start); w.Code != 500 || w.Body.String() != internalBody || d > 30*time.Second {
		t.Fatalf("with the circuit open: %d %s after %s; want 500 without waiting out the route's minute", w.Code, w.Body, d)
	}
	if !strings.Contains(logs.String(), `"msg":"upstream circuit open","upstream":"payout"`) {
		t.Errorf("the opening is not logged:\n%s", logs.String())
	}
}

// A frozen service (SIGSTOP: nothing answers, its health neither): the
// gateway's own probe notices within a few seconds and opens the circuit,
// so callers stop waiting out the route's timeout even if fewer than five
// calls came; when the service is back, the first good probe closes it.
func TestAFrozenUpstreamFailsFastOnceTheProbeNotices(t *testing.T) {
	t.Parallel()
	var frozen atomic.Bool
	frozen.Store(true)
	thaw := make(chan struct{})
	up := httptest.NewServer(asServiceWithHealth(func(w http.ResponseWriter, r *http.Request) {
		if frozen.Load() {
			select {
			case <-thaw:
			case <-r.Context().Done():
				return
			}
		}
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("X-Environment", "sandbox")
		io.WriteString(w, `{"ok":true}`)
	}))
	defer up.Close()
	var logs syncBuffer
	g := newGatewayTo(t, up.URL, slog.New(slog.NewJSONHandler(&logs, nil)))
	defer g.Close()
	for _, byMethod := range g.routes {
		for _, rt := range byMethod {
			rt.Timeout = time.Minute
		}
	}
	// One caller waits on the frozen service; the probe, not a fifth
	// failure, opens the circuit, and that caller's wait ends with it,
	// well before its own timeout.
	start := time.Now()
	if w := serveOne(g, "POST", "/v1/bank/payout/quote", `{}`); w.Code != 500 || w.Body.String() != internalBody {
		t.Fatalf("the first caller: %d %s", w.Code, w.Body)
	}
	waited := time.Since(start)
	logs.waitFor(t, `"msg":"upstream circuit open","upstream":"payout","why":"its health stopped answering"`)
	if waited >= 30*time.Second { // the probe opens the circuit about 3 s after the freeze
		t.Errorf("the caller waiting when the circuit opened waited %s, toward its route's timeout (a minute): the circuit did not release it", waited)
	}
	for range 3 {
		start := time.Now()
		if w := serveOne(g, "POST", "/v1/bank/payout/quote", `{}`); w.Code != 500 || w.Body.String() != internalBody || time.Since(start) > 30*time.Second {
			t.Fatalf("once the probe noticed: %d %s after %s; want 500 without waiting out the route's minute", w.Code, w.Body, time.Since(start))
		}
	}
	t.Logf("the caller before the probe noticed waited %s; after, none waits", waited.Round(time.Millisecond))
	frozen.Store(false)
	close(thaw)
	deadline := time.Now().Add(10 * time.Second)
	for serveOne(g, "POST", "/v1/bank/payout/quote", `{}`).Code != 200 {
		if time.Now().After(deadline) {
			t.Fatalf("the circuit did not close once the service was back:\n%s", logs.String())
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// A service whose health is slow while it answers calls keeps its circuit
// closed: the probe opens a circuit only when calls get no answer either.
func TestASlowHealthDoesNotOpenAServiceThatAnswers(t *testing.T) {
	t.Parallel() // it waits on a clock: beside the others
	up := httptest.NewServer(asServiceWithHealth(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/health" {
			hangs(w, r)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("X-Environment", "sandbox")
		io.WriteString(w, `{"ok":true}`)
	}))
	defer up.Close()
	var logs syncBuffer
	g := newGatewayTo(t, up.URL, slog.New(slog.NewJSONHandler(&logs, nil)))
	defer g.Close()
	// Calls keep coming for well over probeMisses probe periods.
	end := time.Now().Add(time.Duration(probeMisses+2) * BreakerProbeEvery)
	for time.Now().Before(end) {
		if w := serveOne(g, "POST", "/v1/bank/payout/quote", `{}`); w.Code != 200 {
			t.Fatalf("%d %s\n%s", w.Code, w.Body, logs.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
	// (The other services here share its URL and get no calls: theirs
	// open, as a hung service's would.)
	if strings.Contains(logs.String(), `"msg":"upstream circuit open","upstream":"payout"`) {
		t.Errorf("the circuit of a service that answers opened:\n%s", logs.String())
	}
	if !strings.Contains(logs.String(), `"msg":"upstream circuit open","upstream":"fiat","why":"its health stopped answering"`) {
		t.Errorf("the circuit of a service that answers neither calls nor its probe stayed closed:\n%s", logs.String())
	}
}

// The reference reads are the gateway's own (DESIGN §1): with every
// service refusing connections, they answer at once, the config with the
// key's own grants.
func TestReferenceReadsNeedNoService(t *testing.T) {
	t.Parallel()
	refused, _ := net.Listen("tcp", "127.0.0.1:0")
	nowhere := "http://" + refused.Addr().String()
	refused.Close()
	g := newGatewayTo(t, nowhere, quiet())
	defer g.Close()
	for _, path := range []string{"/v1/config", "/v1/currencies", "/v1/limits", "/v1/countries", "/v1/statuses", "/v1/payment-methods", "/v1/rates"} {
		w := serveOne(g, "GET", path, "")
		if w.Code != 200 || !strings.HasPrefix(w.Body.String(), `{"environment":"sandbox",`) || w.Header().Get("RateLimit-Policy") == "" ||
			w.Header().Get("X-Request-Id") == "" {
			t.Errorf("%s with no service up: %d %.100s %v", path, w.Code, w.Body, w.Header())
		}
	}
	w := serveOne(g, "GET", "/v1/config", "")
	if !strings.HasPrefix(w.Body.String(), `{"environment":"sandbox","products":["bank"],`) {
		t.Errorf("the config is not the key's: %s", w.Body)
	}
	if w := serveOne(g, "POST", "/v1/bank/payout/quote", `{}`); w.Code != 500 {
		t.Errorf("a proxied route with no service up: %d %s", w.Code, w.Body)
	}
}

// A call whose connection is refused (the service is not up yet) is tried
// again, with its whole body, and answered. The service comes up the moment
// the call's first try is refused, before the retry: no clock decides it.
func TestARefusedConnectionIsRetried(t *testing.T) {
	t.Parallel()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close() // nothing listens: connections are refused
	var mu sync.Mutex
	var bodies []string
	up := func() {
		ln, err := net.Listen("tcp", addr)
		if err != nil {
			t.Errorf("the service could not come up: %v", err)
			return
		}
		srv := &http.Server{Handler: asService(func(w http.ResponseWriter, r *http.Request) {
			b, _ := io.ReadAll(r.Body)
			mu.Lock()
			bodies = append(bodies, string(b))
			mu.Unlock()
			w.Header().Set("Content-Type", "application/json")
			w.Header().Set("X-Environment", "sandbox")
			io.WriteString(w, `{"quoted":true}`)
		})}
		go srv.Serve(ln)
		t.Cleanup(func() { srv.Close() })
	}
	tr := &upOnRefusal{next: testTransport(t), path: "/v1/bank/payout/quote", up: up}
	g := newGatewayVia(t, "http://"+addr, tr, quiet())
	w := serveOne(g, "POST", "/v1/bank/payout/quote", `{"chain":84532}`)
	if w.Code != 200 || w.Body.String() != `{"environment":"sandbox","quoted":true}` {
		t.Fatalf("%d %s", w.Code, w.Body)
	}
	mu.Lock()
	defer mu.Unlock()
	if tr.refused.Load() != 1 || len(bodies) != 1 || bodies[0] != `{"chain":84532}` {
		t.Errorf("refused %d times, then the upstream got %q: the retry must send the body once, whole", tr.refused.Load(), bodies)
	}
}

// upOnRefusal is a transport that calls up, once, when a call to path is
// refused, before the refusal returns.
type upOnRefusal struct {
	next    http.RoundTripper
	path    string
	up      func()
	once    sync.Once
	refused atomic.Int32
}

func (u *upOnRefusal) RoundTrip(r *http.Request) (*http.Response, error) {
	resp, err := u.next.RoundTrip(r)
	if errors.Is(err, syscall.ECONNREFUSED) && r.URL.Path == u.path {
		u.refused.Add(1)
		u.once.Do(u.up)
	}
	return resp, err
}

// A POST with an Idempotency-Key whose connection breaks after it went out
// (the service died mid-request) is not sent again by the transport on its
// own: the service sees it once, the caller gets 500 and retries with its
// key. The key reaches the service as X-Partner-Idempotency-Key.
func TestAKeyedPOSTIsNotResentByTheTransport(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	var keyed []string
	srv := httptest.NewServer(asService(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		key := r.Header.Get("X-Partner-Idempotency-Key")
		if r.URL.Path != "/v1/bank/payout" {
			w.Header().Set("Content-Type", "application/json")
			w.Header().Set("X-Environment", "sandbox")
			io.WriteString(w, `{"quoted":true}`)
			return
		}
		mu.Lock()
		keyed = append(keyed, key+" "+r.Header.Get("Idempotency-Key"))
		mu.Unlock()
		c, _, err := http.NewResponseController(w).Hijack()
		if err == nil {
			c.Close() // dies before answering
		}
	}))
	t.Cleanup(srv.Close)
	g := newGatewayTo(t, srv.URL, quiet())
	// The first request leaves an idle connection for the second to reuse.
	if w := serveOne(g, "POST", "/v1/bank/payout/quote", `{"chain":84532}`); w.Code != 200 {
		t.Fatalf("first: %d %s", w.Code, w.Body)
	}
	w := serveOne(g, "POST", "/v1/bank/payout", `{"quoteId":"q"}`, "Idempotency-Key", "order-7")
	if w.Code != 500 {
		t.Errorf("a keyed POST whose service died: %d %s", w.Code, w.Body)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(keyed) != 1 || keyed[0] != "order-7 " {
		t.Errorf("the service got the keyed POST %d times (%q), want once, under X-Partner-Idempotency-Key alone", len(keyed), keyed)
	}
}

func newGatewayTo(t *testing.T, upstream string, log *slog.Logger) *Gateway {
	t.Helper()
	return newGatewayVia(t, upstream, testTransport(t), log)
}

// newGatewayVia is a gateway whose every upstream is at upstream, reached
// through tr.
func newGatewayVia(t *testing.T, upstream string, tr http.RoundTripper, log *slog.Logger) *Gateway {
	t.Helper()
	u := upstreams()
	for k := range u {
		u[k], _ = u[k].Parse(upstream)
	}
	g, err := New(Config{Env: "sandbox", Keys: keySet("bank"), Limiter: localLimiter(), Upstreams: u,
		Transport: tr, InternalToken: "internal-token-0123456789", Log: log})
	if err != nil {
		t.Fatal(err)
	}
	return g
}

// testTransport is the gateway's transport, as cmd/gateway makes it.
func testTransport(tb testing.TB) *http.Transport {
	tb.Helper()
	tr, err := upstream.Transport(upstream.Options{HeaderTimeout: LongestTimeout + 5*time.Second})
	if err != nil {
		tb.Fatal(err)
	}
	return tr
}

// syncBuffer is a log destination that tests read while handlers write.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.Write(p)
}

// waitFor waits up to 10 s for a line containing want to be logged.
func (b *syncBuffer) waitFor(t *testing.T, want string) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !strings.Contains(b.String(), want) {
		if time.Now().After(deadline) {
			t.Fatalf("not logged within 10 s: %s\n%s", want, b.String())
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.String()
}

// A service shutting down gracefully closes its listener and finishes the
// calls it has: the probe is refused, the circuit opens for new calls, and
// a call in flight still gets its answer.
func TestAServiceShuttingDownFinishesItsCalls(t *testing.T) {
	t.Parallel() // it waits on a clock: beside the others
	release := make(chan struct{})
	started := make(chan struct{}, 1)
	up := httptest.NewServer(asService(func(w http.ResponseWriter, r *http.Request) {
		started <- struct{}{}
		<-release
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("X-Environment", "sandbox")
		io.WriteString(w, `{"ok":true}`)
	}))
	defer up.Close()
	var logs syncBuffer
	g := newGatewayTo(t, up.URL, slog.New(slog.NewJSONHandler(&logs, nil)))
	defer g.Close()
	answer := make(chan *httptest.ResponseRecorder)
	go func() { answer <- serveOne(g, "POST", "/v1/bank/payout/quote", `{}`) }()
	<-started
	up.Listener.Close() // no new connection from now on; the one in flight stays
	logs.waitFor(t, `"msg":"upstream circuit open","upstream":"payout","why":"its health refused the probe"`)
	close(release)
	if w := <-answer; w.Code != 200 || w.Body.String() != `{"environment":"sandbox","ok":true}` {
		t.Errorf("the call in flight: %d %s", w.Code, w.Body)
	}
}
