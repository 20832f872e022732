package edge

import (
	"io"
	"maps"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/partnerpay/api/pkg/upstream"
	"github.com/partnerpay/api/services/gateway/internal/apikey"
)

// TestLimitedKeysAreTheKeysFilesKeys: who is being limited is a series per
// key id, and a key removed from the file takes its series with it, so the
// label set is never larger than the keys file.
func TestLimitedKeysAreTheKeysFilesKeys(t *testing.T) {
	t.Parallel()
	reg := prometheus.NewPedanticRegistry()
	m := NewMetrics(reg)
	m.limited("acme")
	m.limited("acme")
	m.limited("globex")

	want := func(body string) {
		t.Helper()
		head := "# HELP partnerapi_gateway_ratelimit_limited_total Requests refused with 429 rate_limited, by key id (a key of the keys file).\n" +
			"# TYPE partnerapi_gateway_ratelimit_limited_total counter\n"
		if body == "" {
			head = ""
		}
		if err := testutil.GatherAndCompare(reg, strings.NewReader(head+body), "partnerapi_gateway_ratelimit_limited_total"); err != nil {
			t.Error(err)
		}
	}
	want("partnerapi_gateway_ratelimit_limited_total{key_id=\"acme\"} 2\n" +
		"partnerapi_gateway_ratelimit_limited_total{key_id=\"globex\"} 1\n")

	m.KeysLoaded(apikey.NewSet(&apikey.File{Keys: []apikey.Key{{ID: "acme", Fingerprint: apikey.Fingerprint(testKey), RatePerSecond: 1}}}))
	want("partnerapi_gateway_ratelimit_limited_total{key_id=\"acme\"} 2\n")

	m.KeysLoaded(apikey.NewSet(&apikey.File{}))
	want("")
	if v := testutil.ToFloat64(m.keysLoaded); v != 0 {
		t.Errorf("keys_loaded = %v after an empty file, want 0", v)
	}
}

// TestA429CountsItsKey: the edge counts the refused key, not the others.
func TestA429CountsItsKey(t *testing.T) {
	t.Parallel()
	keys := keySet("bank")
	keys.set = apikey.NewSet(&apikey.File{Keys: []apikey.Key{{
		ID: "acme", Fingerprint: apikey.Fingerprint(testKey), RatePerSecond: 1,
	}}})
	reg := prometheus.NewPedanticRegistry()
	g := newGateway(t, keys, answer(200, "sandbox", `{"ok":true}`), quiet())
	g.metrics = NewMetrics(reg)
	codes := []int{}
	for range 3 {
		codes = append(codes, serveOne(g, "GET", "/v1/config", "").Code)
	}
	if codes[0] != 200 || codes[1] != 429 || codes[2] != 429 {
		t.Fatalf("three calls on a 1/s key = %v, want 200 429 429", codes)
	}
	if v := testutil.ToFloat64(g.metrics.limitedKeys.WithLabelValues("acme")); v != 2 {
		t.Errorf("limited_total{key_id=acme} = %v, want 2", v)
	}
}

// TestOpenedConnectionsAreCountedByUpstream: a new connection counts for
// its upstream, a reused one does not, and every upstream reads 0 first.
func TestOpenedConnectionsAreCountedByUpstream(t *testing.T) {
	t.Parallel()
	u := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "{}") }))
	defer u.Close()
	reg := prometheus.NewPedanticRegistry()
	m := NewMetrics(reg)
	payout, _ := url.Parse(u.URL)
	fiat, _ := url.Parse("http://fiat.internal") // port 80
	tr, err := upstream.Transport(upstream.Options{Dialed: m.UpstreamDialed(map[string]*url.URL{UpstreamPayout: payout, UpstreamFiat: fiat})})
	if err != nil {
		t.Fatal(err)
	}
	for range 3 {
		resp, err := (&http.Client{Transport: tr}).Get(payout.String() + "/v1/config")
		if err != nil {
			t.Fatal(err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
	}
	const head = "# HELP partnerapi_gateway_upstream_connections_opened_total Connections the gateway opened to an upstream. Pooled connections carry request after request: a rate near the request rate means they are not reused.\n" +
		"# TYPE partnerapi_gateway_upstream_connections_opened_total counter\n"
	if err := testutil.GatherAndCompare(reg, strings.NewReader(head+
		"partnerapi_gateway_upstream_connections_opened_total{upstream=\"fiat\"} 0\n"+
		"partnerapi_gateway_upstream_connections_opened_total{upstream=\"payout\"} 1\n"),
		"partnerapi_gateway_upstream_connections_opened_total"); err != nil {
		t.Error(err)
	}
}

// TestUpstreamCallsAreTimedByCode: every answer is observed once under its
// upstream and status code; a call that failed is not (the error counter
// has it).
func TestUpstreamCallsAreTimedByCode(t *testing.T) {
	t.Parallel()
	reg := prometheus.NewPedanticRegistry()
	m := NewMetrics(reg)
	codes := map[string]int{"/ok": 200, "/missing": 404, "/down": 503}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(codes[r.URL.Path])
	}))
	defer srv.Close()
	rt := m.instrumentUpstream(UpstreamPayout, testTransport(t))
	for _, path := range []string{"/ok", "/ok", "/missing", "/down", "/missing"} {
		if _, err := send(t, rt, "GET", srv.URL+path); err != nil {
			t.Fatal(err)
		}
	}
	srv.Close()
	if _, err := send(t, rt, "GET", srv.URL+"/ok"); err == nil {
		t.Fatal("a call to a closed server succeeded")
	}
	counts := map[string]uint64{}
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != "partnerapi_gateway_upstream_request_duration_seconds" {
			continue
		}
		for _, s := range mf.GetMetric() {
			labels := ""
			for _, l := range s.GetLabel() {
				labels += l.GetName() + "=" + l.GetValue() + " "
			}
			counts[labels] = s.GetHistogram().GetSampleCount()
		}
	}
	want := map[string]uint64{"code=200 upstream=payout ": 2, "code=404 upstream=payout ": 2, "code=503 upstream=payout ": 1}
	if !maps.Equal(counts, want) {
		t.Errorf("duration series %v, want %v", counts, want)
	}
}

// An upstream's answer of a code seen before is timed without looking its
// series up again: no label hashing, no allocation.
func TestAnUpstreamCodeSeenBeforeIsTimedWithoutAllocating(t *testing.T) {
	// Not parallel: testing.AllocsPerRun refuses to run in a parallel test.
	rt := NewMetrics(prometheus.NewPedanticRegistry()).instrumentUpstream(UpstreamPayout, testTransport(t)).(*timed)
	for _, code := range []int{200, 404, 503} {
		rt.observe(code, time.Millisecond)
		if n := testing.AllocsPerRun(100, func() { rt.observe(code, time.Millisecond) }); n != 0 {
			t.Errorf("timing a %d again allocates %v times", code, n)
		}
	}
}

// send makes one request through rt and reads its answer whole.
func send(t *testing.T, rt http.RoundTripper, method, url string) (string, error) {
	t.Helper()
	req, err := http.NewRequest(method, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := rt.RoundTrip(req)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return string(b), err
}

// TestEveryRouteNamesItsService: the alert rules join a failing route to the
// service behind it (to hold its page back while that service's own page is
// firing); every route, keyed or public, has exactly one such series.
func TestEveryRouteNamesItsService(t *testing.T) {
	t.Parallel()
	reg := prometheus.NewPedanticRegistry()
	m := NewMetrics(reg)
	g, err := New(Config{Env: "sandbox", Keys: keySet("bank"), Limiter: localLimiter(), Upstreams: upstreams(), Transport: testTransport(t),
		InternalToken: "internal-token-0123456789", Log: quiet(), Metrics: m})
	if err != nil {
		t.Fatal(err)
	}
	defer g.Close()
	if n := testutil.CollectAndCount(m.routeUpstream); n != len(Routes)+len(Public) {
		t.Errorf("%d route series, want one per route (%d)", n, len(Routes)+len(Public))
	}
	for _, r := range []struct{ route, upstream string }{
		{"POST /v1/bank/payout", "payout"}, {"GET /v1/config", "gateway"}, {"POST /v1/fiat/status", "fiat"}, {"POST /v1/fiat/consent/link", "consent"}, {"GET /consent/return", "consent"},
	} {
		if v := testutil.ToFloat64(m.routeUpstream.WithLabelValues(r.route, r.upstream)); v != 1 {
			t.Errorf("route_upstream_info{route=%q,upstream=%q} = %v, want 1", r.route, r.upstream, v)
		}
	}
}
