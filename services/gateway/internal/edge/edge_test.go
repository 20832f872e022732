package edge

import (
	"bytes"
	"context"
	"encoding/pem"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/partnerpay/api/pkg/partner"
	"github.com/partnerpay/api/pkg/upstream"
	"github.com/partnerpay/api/services/gateway/internal/apikey"
	"github.com/partnerpay/api/services/gateway/internal/ratelimit"
)

const testKey = "pk_AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA"

type staticKeys struct{ set *apikey.Set }

func (k staticKeys) Current() *apikey.Set { return k.set }

func keySet(products ...string) staticKeys {
	return staticKeys{apikey.NewSet(&apikey.File{Keys: []apikey.Key{{
		ID: "acme", Fingerprint: apikey.Fingerprint(testKey), RatePerSecond: 1000,
		Grants: partner.Grants{Products: products, Chains: partner.Chains{Source: []int64{84532}}, MaxExecutionUSD: "25000"},
	}}})}
}

// upstreamFunc is an in-process upstream: a RoundTripper that answers
// without a network, so tests and benchmarks see the gateway's work alone.
type upstreamFunc func(*http.Request) *http.Response

func (f upstreamFunc) RoundTrip(r *http.Request) (*http.Response, error) {
	// The gateway's own health probes (every second, from the circuits'
	// probers) are answered here: a test's function sees partner calls.
	if r.URL.Path == "/health" {
		return &http.Response{StatusCode: 200, Header: http.Header{}, Body: io.NopCloser(strings.NewReader(`{"ok":true}`)), Request: r}, nil
	}
	if r.Body != nil {
		io.Copy(io.Discard, r.Body)
		r.Body.Close()
	}
	resp := f(r)
	if _, ok := resp.Header["X-Internal-Call-Id"]; !ok { // as every service answers (kithttp.Wrap)
		resp.Header["X-Internal-Call-Id"] = r.Header["X-Internal-Call-Id"]
	}
	return resp, nil
}

// asService answers as our services do: with the gateway's call id
// (kithttp.Wrap).
func asService(h http.HandlerFunc) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		// The gateway's own health probes are answered here, as a live
		// service answers them: h sees partner calls.
		if r.URL.Path == "/health" {
			io.WriteString(w, `{"ok":true}`)
			return
		}
		w.Header()["X-Internal-Call-Id"] = r.Header["X-Internal-Call-Id"]
		h(w, r)
	})
}

// asServiceWithHealth is asService whose health h answers too.
func asServiceWithHealth(h http.HandlerFunc) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header()["X-Internal-Call-Id"] = r.Header["X-Internal-Call-Id"]
		h(w, r)
	})
}

func answer(status int, env, body string, header ...string) upstreamFunc {
	return func(r *http.Request) *http.Response {
		h := http.Header{"Content-Type": {"application/json"}}
		if env != "" {
			h.Set("X-Environment", env)
		}
		for i := 0; i+1 < len(header); i += 2 {
			h.Set(header[i], header[i+1])
		}
		return &http.Response{StatusCode: status, Header: h, Body: io.NopCloser(strings.NewReader(body)),
			ContentLength: int64(len(body)), Request: r}
	}
}

func newGateway(t testing.TB, keys Keys, rt http.RoundTripper, log *slog.Logger) *Gateway {
	t.Helper()
	return newGatewayWith(t, keys, ratelimit.NewLocal(time.Now), rt, log)
}

// upstreams points every upstream at one in-process target.
func upstreams() map[string]*url.URL {
	u, _ := url.Parse("http://service.internal")
	return map[string]*url.URL{UpstreamPayout: u, UpstreamFiat: u, UpstreamConsent: u, UpstreamOrders: u}
}

func newGatewayWith(t testing.TB, keys Keys, limiter Limiter, rt http.RoundTripper, log *slog.Logger) *Gateway {
	t.Helper()
	g, err := New(Config{
		Env: "sandbox", Keys: keys, Limiter: limiter,
		Upstreams: upstreams(), Transport: rt,
		InternalToken: "internal-token-0123456789", Log: log,
	})
	if err != nil {
		t.Fatal(err)
	}
	return g
}

func quiet() *slog.Logger { return slog.New(slog.DiscardHandler) }

func serveOne(g http.Handler, method, path, body string, header ...string) *httptest.ResponseRecorder {
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	r := httptest.NewRequest(method, path, rd)
	r.Header.Set("Authorization", "Bearer "+testKey)
	if body != "" {
		r.Header.Set("Content-Type", "application/json")
	}
	for i := 0; i+1 < len(header); i += 2 {
		r.Header.Set(header[i], header[i+1])
	}
	w := httptest.NewRecorder()
	g.ServeHTTP(w, r)
	return w
}

func TestSplicesEnvironmentFirst(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, upstream, want string
	}{
		{"object with fields", `{"a":1,"b":"x"}`, `{"environment":"sandbox","a":1,"b":"x"}`},
		{"empty object", `{}`, `{"environment":"sandbox"}`},
		{"trailing newline kept", "{\"a\":[1,2]}\n", "{\"environment\":\"sandbox\",\"a\":[1,2]}\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := newGateway(t, keySet("bank"), answer(200, "sandbox", tt.upstream), quiet())
			w := serveOne(g, "GET", "/v1/bank/payouts", "")
			if w.Code != 200 || w.Body.String() != tt.want {
				t.Fatalf("got %d %q, want %q", w.Code, w.Body, tt.want)
			}
			if cl := w.Header().Get("Content-Length"); cl != strconv.Itoa(len(tt.want)) {
				t.Errorf("Content-Length %s for %d bytes", cl, len(tt.want))
			}
		})
	}
}

// internalAnswer is what a client gets when the gateway's upstream failed.
const internalAnswer = `{"environment":"sandbox","error":{"code":"internal","message":"Internal error; it has been logged."}}`

func TestRefusesUpstreamAnswersItCannotVouchFor(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name     string
		upstream upstreamFunc
		logged   string
	}{
		{"another environment", answer(200, "production", `{"a":1}`), `environment \"production\", gateway is \"sandbox\"`},
		{"no environment", answer(200, "", `{"a":1}`), `environment \"\"`},
		{"not JSON", answer(200, "sandbox", `{"a":1}`, "Content-Type", "text/html"), `Content-Type \"text/html\"`},
		{"not an object", answer(200, "sandbox", `[1,2]`), "not a JSON object"},
		{"not compact", answer(200, "sandbox", `{ "a":1}`), "not compact JSON"},
		{"empty body", answer(200, "sandbox", ``), "body: EOF"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var logs bytes.Buffer
			g := newGateway(t, keySet("bank"), tt.upstream, slog.New(slog.NewJSONHandler(&logs, nil)))
			w := serveOne(g, "GET", "/v1/bank/payouts", "")
			if w.Code != 500 || w.Body.String() != internalAnswer {
				t.Fatalf("got %d %s", w.Code, w.Body)
			}
			if !strings.Contains(logs.String(), tt.logged) {
				t.Errorf("log lacks %q:\n%s", tt.logged, logs.String())
			}
		})
	}
}

func TestForwardsIdentityAndStripsClientHeaders(t *testing.T) {
	t.Parallel()
	var got http.Header
	up := upstreamFunc(func(r *http.Request) *http.Response {
		got = r.Header.Clone()
		return answer(200, "sandbox", `{}`)(r)
	})
	g := newGateway(t, keySet("bank"), up, quiet())
	w := serveOne(g, "GET", "/v1/bank/payouts", "",
		"X-Partner-Key-Id", "mallory", "X-Partner-Grants", `{"products":["deposit"]}`,
		"X-Partner-Anything", "x", "X-Internal-Token", "guess", "X-Internal-Other", "y", "X-Request-Id", "req-1")
	if w.Code != 200 {
		t.Fatalf("status %d", w.Code)
	}
	want := map[string]string{
		"X-Partner-Key-Id":   "acme",
		"X-Partner-Grants":   `{"products":["bank"],"chains":{"source":[84532],"destination":null},"tokens":null,"maxExecutionUsd":"25000"}`,
		"X-Internal-Token":   "internal-token-0123456789",
		"X-Request-Id":       "req-1",
		"X-Partner-Anything": "",
		"X-Internal-Other":   "",
		"Authorization":      "",
		"X-Forwarded-For":    "",
	}
	for k, v := range want {
		if got.Get(k) != v || len(got.Values(k)) > 1 {
			t.Errorf("upstream %s = %q, want %q", k, got.Values(k), v)
		}
	}
	if w.Header().Get("X-Request-Id") != "req-1" {
		t.Errorf("X-Request-Id not echoed")
	}
}

func TestStripsInternalResponseHeaders(t *testing.T) {
	t.Parallel()
	g := newGateway(t, keySet("bank"), answer(400, "sandbox", `{"error":{"code":"invalid_request","message":"m"}}`,
		"X-Internal-Error-Code", "invalid_request", "X-Request-Id", "from-service"), quiet())
	w := serveOne(g, "GET", "/v1/config", "", "X-Request-Id", "from-client")
	if w.Header().Get("X-Internal-Error-Code") != "" || w.Header().Get("X-Environment") != "" {
		t.Errorf("internal headers reached the client: %v", w.Header())
	}
	if v := w.Header().Values("X-Request-Id"); len(v) != 1 || v[0] != "from-client" {
		t.Errorf("X-Request-Id = %q", v)
	}
}

func TestLogsOneLinePerRequestWithoutTheKey(t *testing.T) {
	t.Parallel()
	var logs bytes.Buffer
	g := newGateway(t, keySet("bank"), answer(400, "sandbox", `{"error":{}}`, "X-Internal-Error-Code", "no_route"),
		slog.New(slog.NewJSONHandler(&logs, nil)))
	serveOne(g, "POST", "/v1/bank/payout/quote", `{"cryptoCurrency":"USDC"}`, "X-Request-Id", "r-42")
	line := logs.String()
	if strings.Count(line, "\n") != 1 {
		t.Fatalf("want one line, got:\n%s", line)
	}
	for _, want := range []string{`"method":"POST"`, `"route":"POST /v1/bank/payout/quote"`, `"status":400`,
		`"code":"no_route"`, `"key_id":"acme"`, `"request_id":"r-42"`, `"duration_us":`} {
		if !strings.Contains(line, want) {
			t.Errorf("log line lacks %s: %s", want, line)
		}
	}
	for _, secret := range []string{testKey, testKey[3:], "Bearer", "USDC"} {
		if strings.Contains(line, secret) {
			t.Errorf("log line holds %q: %s", secret, line)
		}
	}
}

func TestUnknownKeyIsRefusedBeforeTheLimiter(t *testing.T) {
	t.Parallel()
	var called bool
	g, err := New(Config{Env: "sandbox", Keys: keySet("bank"), Limiter: limiterFunc(func() { called = true }),
		Upstreams: upstreams(), Transport: answer(200, "sandbox", `{}`), Log: quiet()})
	if err != nil {
		t.Fatal(err)
	}
	r := httptest.NewRequest("GET", "/v1/config", nil)
	r.Header.Set("Authorization", "Bearer pk_"+strings.Repeat("B", 43))
	w := httptest.NewRecorder()
	g.ServeHTTP(w, r)
	if w.Code != 401 || called || w.Header().Get("RateLimit") != "" {
		t.Errorf("status %d, limiter called %v, RateLimit %q", w.Code, called, w.Header().Get("RateLimit"))
	}
	if w.Header().Get("WWW-Authenticate") == "" {
		t.Error("a 401 names its scheme in WWW-Authenticate")
	}
}

type limiterFunc func()

func (f limiterFunc) Allow(context.Context, string, int) ratelimit.Decision {
	f()
	return ratelimit.Decision{Allowed: true, Limit: 1, Remaining: 0}
}

func TestSandboxRoutesDoNotExistInProduction(t *testing.T) {
	t.Parallel()
	g, err := New(Config{Env: "production", Keys: keySet("fiat"), Limiter: ratelimit.NewLocal(time.Now),
		Upstreams: upstreams(), Transport: answer(200, "production", `{}`), Log: quiet()})
	if err != nil {
		t.Fatal(err)
	}
	for _, path := range []string{"/v1/sandbox/payin", "/v1/sandbox/identity"} {
		w := serveOne(g, "POST", path, `{}`)
		if w.Code != 404 || w.Body.String() != `{"environment":"production","error":{"code":"not_found","message":"No such endpoint."}}` {
			t.Errorf("%s in production: %d %s", path, w.Code, w.Body)
		}
	}
	if w := serveOne(g, "POST", "/v1/fiat/status", `{}`); w.Code != 200 {
		t.Errorf("the other fiat routes exist in production: %d", w.Code)
	}
}

func TestPublicRoutePassesPagesThroughWithoutAKey(t *testing.T) {
	t.Parallel()
	var got http.Header
	page := upstreamFunc(func(r *http.Request) *http.Response {
		got = r.Header.Clone()
		body := "<!doctype html><p>All done</p>"
		return &http.Response{StatusCode: 200, Request: r, ContentLength: int64(len(body)), Body: io.NopCloser(strings.NewReader(body)),
			Header: http.Header{"Content-Type": {"text/html; charset=utf-8"}, "X-Environment": {"sandbox"}, "X-Internal-Error-Code": {"x"}}}
	})
	g := newGateway(t, staticKeys{apikey.NewSet(&apikey.File{})}, page, quiet()) // no keys at all: public routes still answer
	r := httptest.NewRequest("GET", "/consent/return?state=abc", nil)
	r.Header.Set("X-Partner-Key-Id", "mallory")
	w := httptest.NewRecorder()
	g.ServeHTTP(w, r)
	if w.Code != 200 || w.Body.String() != "<!doctype html><p>All done</p>" || w.Header().Get("X-Environment") != "" || w.Header().Get("X-Internal-Error-Code") != "" {
		t.Fatalf("%d %q %v", w.Code, w.Body, w.Header())
	}
	if got.Get("X-Partner-Key-Id") != "" || got.Get("X-Internal-Token") == "" {
		t.Errorf("forwarded headers %v", got)
	}
	g = newGateway(t, keySet(), answer(200, "production", "<p>"), quiet())
	w = httptest.NewRecorder()
	g.ServeHTTP(w, httptest.NewRequest("GET", "/consent/return", nil))
	if w.Code != 500 {
		t.Errorf("a page from another environment: %d", w.Code)
	}
}

func TestAnyWebPageMayCall(t *testing.T) {
	t.Parallel()
	g := newGateway(t, keySet("bank"), answer(200, "sandbox", `{}`), quiet())
	pre := httptest.NewRequest("OPTIONS", "/v1/bank/payout/quote", nil)
	pre.Header.Set("Origin", "https://partner.example")
	pre.Header.Set("Access-Control-Request-Method", "POST")
	pre.Header.Set("Access-Control-Request-Headers", "authorization, content-type, idempotency-key")
	w := httptest.NewRecorder()
	g.ServeHTTP(w, pre)
	h := w.Header()
	if w.Code != 204 || h.Get("Access-Control-Allow-Origin") != "*" || !strings.Contains(h.Get("Access-Control-Allow-Headers"), "Authorization") ||
		!strings.Contains(h.Get("Access-Control-Allow-Headers"), "Idempotency-Key") || h.Get("Access-Control-Allow-Methods") != "GET, POST" {
		t.Fatalf("preflight: %d %v", w.Code, h)
	}
	w = serveOne(g, "GET", "/v1/config", "", "Origin", "https://partner.example")
	if w.Header().Get("Access-Control-Allow-Origin") != "*" || !strings.Contains(w.Header().Get("Access-Control-Expose-Headers"), "RateLimit") {
		t.Errorf("answers do not let a page read them: %v", w.Header())
	}
	// Not a preflight: OPTIONS is not an endpoint.
	w = httptest.NewRecorder()
	g.ServeHTTP(w, httptest.NewRequest("OPTIONS", "/v1/config", nil))
	if w.Code != 404 || !strings.Contains(w.Body.String(), `"code":"not_found"`) {
		t.Errorf("a bare OPTIONS: %d %s", w.Code, w.Body)
	}
	// A preflight for something that is not an endpoint gets no blessing.
	pre = httptest.NewRequest("OPTIONS", "/v1/nope", nil)
	pre.Header.Set("Access-Control-Request-Method", "GET")
	w = httptest.NewRecorder()
	g.ServeHTTP(w, pre)
	if w.Code != 404 || w.Header().Get("Access-Control-Allow-Methods") != "" {
		t.Errorf("a preflight for no endpoint: %d %v", w.Code, w.Header())
	}
}

func TestEveryRouteNeedsItsUpstream(t *testing.T) {
	t.Parallel()
	_, err := New(Config{Env: "sandbox", Keys: keySet(), Limiter: ratelimit.NewLocal(time.Now), Upstreams: map[string]*url.URL{},
		Transport: testTransport(t), Log: quiet()})
	if err == nil || !strings.Contains(err.Error(), `upstream "payout"`) {
		t.Fatalf("New without upstreams: %v", err)
	}
}

// An upstream URL with a query or a fragment stops the boot (they would be
// the request's, not the upstream's), rather than failing every request.
func TestUpstreamURLsHaveNoQuery(t *testing.T) {
	t.Parallel()
	for _, raw := range []string{"ftp://payout.internal", "http://payout.internal/?a=1", "http://payout.internal/#x"} {
		u := upstreams()
		u[UpstreamPayout], _ = url.Parse(raw)
		_, err := New(Config{Env: "sandbox", Keys: keySet(), Limiter: ratelimit.NewLocal(time.Now), Upstreams: u, Transport: testTransport(t), Log: quiet()})
		if err == nil || !strings.Contains(err.Error(), `upstream "payout" must be an http:// or https:// URL without a query`) {
			t.Errorf("upstream %s: %v", raw, err)
		}
	}
}

// A service served over TLS, its certificate signed by the CA file the
// gateway is given (UPSTREAM_CA_FILE): the gateway reaches it over https,
// and refuses one whose certificate nothing it trusts signed.
func TestAServiceOverTLS(t *testing.T) {
	t.Parallel()
	svc := httptest.NewTLSServer(asService(func(w http.ResponseWriter, r *http.Request) {
		if r.TLS == nil || r.Header.Get("X-Internal-Token") == "" {
			w.WriteHeader(401)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("X-Environment", "sandbox")
		io.WriteString(w, `{"tls":true}`)
	}))
	defer svc.Close()
	ca := filepath.Join(t.TempDir(), "ca.pem")
	if err := os.WriteFile(ca, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: svc.Certificate().Raw}), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		caFile string
		status int
		body   string
	}{{ca, 200, `{"environment":"sandbox","tls":true}`}, {"", 500, internalBody}} {
		tr, err := upstream.Transport(upstream.Options{CAFile: tc.caFile})
		if err != nil {
			t.Fatal(err)
		}
		g := newGatewayVia(t, svc.URL, tr, quiet())
		if w := serveOne(g, "GET", "/v1/bank/payouts", ""); w.Code != tc.status || w.Body.String() != tc.body {
			t.Errorf("CA file %q: %d %s, want %d %s", tc.caFile, w.Code, w.Body, tc.status, tc.body)
		}
	}
	if _, err := upstream.Transport(upstream.Options{CAFile: filepath.Join(t.TempDir(), "missing.pem")}); err == nil {
		t.Error("a CA file that does not exist was accepted")
	}
}

// BenchmarkQuotePath measures the gateway's whole per-request path for a
// quote: request id, route lookup, key fingerprint and lookup, limiter call
// (in-process), RateLimit headers, product and content checks, the reverse
// proxy with header rewriting, and the environment splice, against an
// in-process upstream so only the gateway's own work is timed.
func BenchmarkQuotePath(b *testing.B) {
	body := `{"mock":true,"quoteId":"bpq_84532_00112233445566778899aabbccddeeff","cryptoAmount":"1234567.89","fiatAmount":"1234567.89","rate":"1234567.89","rail":"sepa_instant","estimatedSettlement":"PT10S","providerFee":"1234567.89","ourFee":"1234567.89","expiresAt":"2026-11-22T05:00:59Z"}`
	// A clock a second ahead at each call keeps the limiter deciding "allowed"
	// while doing all of its work.
	clock := time.Now()
	tick := func() time.Time { clock = clock.Add(time.Second); return clock }
	g := newGatewayWith(b, keySet("bank"), ratelimit.NewLocal(tick), answer(200, "sandbox", body), quiet())
	reqBody := []byte(`{"cryptoCurrency":"USDC","chain":84532,"fiatCurrency":"EUR","country":"DE","cryptoAmount":"100"}`)
	r := httptest.NewRequest("POST", "/v1/bank/payout/quote", nil)
	r.Header.Set("Authorization", "Bearer "+testKey)
	r.Header.Set("Content-Type", "application/json")
	r.Header.Set("X-Request-Id", "bench-1")
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		r.Body = io.NopCloser(bytes.NewReader(reqBody))
		r.ContentLength = int64(len(reqBody))
		w := httptest.NewRecorder()
		g.ServeHTTP(w, r)
		if w.Code != 200 {
			b.Fatalf("status %d %s", w.Code, w.Body)
		}
	}
}

func localLimiter() Limiter { return ratelimit.NewLocal(time.Now) }

// countingConn counts the writes made on a connection to a service.
type countingConn struct {
	net.Conn
	writes *atomic.Int64
}

func (c countingConn) Write(p []byte) (int, error) {
	c.writes.Add(1)
	return c.Conn.Write(p)
}

// A POST reaches its service in one write, header and body together: the
// gateway holds the body in memory, and tells net/http so (a body of any
// other type makes the transport flush the header first: two writes, and
// two reads at the service, per request).
func TestAPostReachesItsServiceInOneWrite(t *testing.T) {
	t.Parallel()
	svc := httptest.NewServer(asService(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("X-Environment", "sandbox")
		fmt.Fprintf(w, `{"got":%q}`, b)
	}))
	defer svc.Close()
	var writes atomic.Int64
	tr := testTransport(t)
	dial := tr.DialContext
	tr.DialContext = func(ctx context.Context, network, addr string) (net.Conn, error) {
		c, err := dial(ctx, network, addr)
		if err != nil {
			return nil, err
		}
		return countingConn{c, &writes}, nil
	}
	g := newGatewayVia(t, svc.URL, tr, quiet())
	body := `{"cryptoCurrency":"USDC","chain":84532,"fiatCurrency":"EUR","country":"DE","cryptoAmount":"100"}`
	for i := 1; i <= 3; i++ {
		w := serveOne(g, "POST", "/v1/bank/payout/quote", body)
		if w.Code != 200 || w.Body.String() != `{"environment":"sandbox","got":`+strconv.Quote(body)+`}` {
			t.Fatalf("%d %s", w.Code, w.Body)
		}
		if got := writes.Load(); got != int64(i) {
			t.Fatalf("%d writes to the service for %d requests", got, i)
		}
	}
}
