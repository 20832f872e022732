package edge

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"syscall"
	"testing"
	"time"

	"github.com/go-redis/redis_rate/v10"
	"github.com/redis/go-redis/v9"

	"github.com/partnerpay/api/pkg/obs"
	"github.com/partnerpay/api/pkg/partner"
	"github.com/partnerpay/api/pkg/upstream"
	"github.com/partnerpay/api/services/gateway/internal/apikey"
	"github.com/partnerpay/api/services/gateway/internal/ratelimit"
	"github.com/partnerpay/api/testkit/redistest"
)

// BenchmarkProductionPath is one request through the gateway as a deployment
// runs it, wired as cmd/gateway wires it: obs.Kit's trace handling and
// request metrics around the edge, the request log through serve's
// LogWriter, the Redis limiter (a high-rate key, so it leases), the pooled
// traced transport, and a real upstream over loopback. Only the client's
// connection is missing (a recorder stands in). With and without an OTLP
// exporter (the collector here is a loopback server that drops what it gets).
//
//	cd services/gateway && go test -run '^$' -bench ProductionPath -benchmem ./internal/edge/
func BenchmarkProductionPath(b *testing.B) {
	body := `{"quoteId":"bpq_84532_00112233445566778899aabbccddeeff","cryptoAmount":"100","fiatAmount":"91.3","rate":"0.913","rail":"sepa_instant","estimatedSettlement":"PT10S","providerFee":"0.5","ourFee":"0.2","expiresAt":"2026-11-22T05:00:59Z"}`
	upstream := httptest.NewServer(asService(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		// The headers the payout service answers with (net/http adds Date
		// and Content-Length).
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Cache-Control", "no-store")
		w.Header().Set("X-Environment", "sandbox")
		_, _ = io.WriteString(w, body)
	}))
	defer upstream.Close()
	collector := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "application/x-protobuf")
	}))
	defer collector.Close()
	const sampled, unsampled = "01", "00"
	for _, tc := range []struct{ name, otlp, flags string }{
		{"tracing=off", "", sampled},
		{"tracing=exporting", collector.URL, sampled},
		// The caller's trace is not sampled: our sampler decides all the
		// same (every request by default), so the spans are recorded.
		{"tracing=exporting,unsampled", collector.URL, unsampled},
	} {
		b.Run(tc.name, func(b *testing.B) {
			kit, err := obs.NewKit(context.Background(), "gateway", "sandbox", obs.Config{Endpoint: tc.otlp, SamplerArg: 1})
			if err != nil {
				b.Fatal(err)
			}
			defer kit.Shutdown(context.Background())
			h := productionGateway(b, kit, upstream.URL, testTransport(b))
			reqBody := []byte(`{"cryptoCurrency":"USDC","chain":84532,"fiatCurrency":"EUR","country":"DE","cryptoAmount":"100"}`)
			r := httptest.NewRequest("POST", "/v1/bank/payout/quote", nil)
			r.Header.Set("Authorization", "Bearer "+testKey)
			r.Header.Set("Content-Type", "application/json")
			r.Header.Set("Traceparent", "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-"+tc.flags)
			b.ReportAllocs()
			for b.Loop() {
				r.Body = io.NopCloser(bytes.NewReader(reqBody))
				r.ContentLength = int64(len(reqBody))
				w := httptest.NewRecorder()
				h.ServeHTTP(w, r)
				if w.Code != 200 || !bytes.HasPrefix(w.Body.Bytes(), []byte(`{"environment":"sandbox","quoteId"`)) {
					b.Fatalf("status %d %s", w.Code, w.Body)
				}
			}
		})
	}
}

// productionGateway is the gateway wired as cmd/gateway wires it, in front
// of upstream through transport: kit's trace handling and request metrics,
// the request log through serve's LogWriter, the Redis limiter, and one key
// (testKey) at 100000/s with the bank product.
func productionGateway(tb testing.TB, kit *obs.Kit, upstream string, transport http.RoundTripper) http.Handler {
	tb.Helper()
	return productionGatewayTo(tb, kit, map[string]string{UpstreamPayout: upstream, UpstreamFiat: upstream, UpstreamConsent: upstream,
		UpstreamOrders: upstream}, transport)
}

// productionGatewayTo is productionGateway in front of a service of its
// own for each upstream.
func productionGatewayTo(tb testing.TB, kit *obs.Kit, upstreams map[string]string, transport http.RoundTripper) http.Handler {
	tb.Helper()
	srv := redistest.Start(tb)
	rdb := redis.NewClient(&redis.Options{Addr: srv.Addr, PoolSize: 64})
	tb.Cleanup(func() { rdb.Close() })
	lw := obs.NewLogWriter(io.Discard, obs.LogBuffer)
	tb.Cleanup(func() { lw.Close() })
	log := obs.NewLogger(lw, "gateway")
	metrics := NewMetrics(kit.Registry)
	limiter := ratelimit.New(redis_rate.NewLimiter(rdb), ratelimit.Options{Timeout: 50 * time.Millisecond}, log, metrics)
	targets := map[string]*url.URL{}
	for name, upstream := range upstreams {
		u, err := url.Parse(upstream)
		if err != nil {
			tb.Fatal(err)
		}
		targets[name] = u
	}
	g, err := New(Config{
		Env: "sandbox", Limiter: limiter, Log: log, Metrics: metrics,
		Keys: staticKeys{apikey.NewSet(&apikey.File{Keys: []apikey.Key{{
			ID: "acme", Fingerprint: apikey.Fingerprint(testKey), RatePerSecond: 100000,
			Grants: partner.Grants{Products: []string{"bank"}, Chains: partner.Chains{Source: []int64{84532}}, MaxExecutionUSD: "25000"},
		}}})},
		Upstreams:     targets,
		Transport:     kit.Tracing.Transport(transport),
		InternalToken: "internal-token-0123456789",
	})
	if err != nil {
		tb.Fatal(err)
	}
	return kit.Serve(g)
}

// BenchmarkProxiedRead is a proxied GET (the key's payouts; the service
// answers a small body at once), so the edge's own work weighs most in it
// (the reference reads are the gateway's own, not proxied): through the gateway
// wired for production (as BenchmarkProductionPath), and through a bare
// httputil.ReverseProxy tuned as the gateway's (make loadtest's "bare"), in
// front of the same in-process service, 32 callers at once. cpu-ns/op is
// the process's CPU time per request, the service's share included for
// both.
//
//	cd services/gateway && go test -run '^$' -bench ProxiedRead -benchmem ./internal/edge/
func BenchmarkProxiedRead(b *testing.B) {
	service := httptest.NewServer(asService(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Cache-Control", "no-store")
		w.Header().Set("X-Environment", "sandbox")
		_, _ = io.WriteString(w, `{"data":[],"hasMore":false}`)
	}))
	defer service.Close()
	kit, err := obs.NewKit(context.Background(), "gateway", "sandbox", obs.Config{})
	if err != nil {
		b.Fatal(err)
	}
	defer kit.Shutdown(context.Background())
	target, _ := url.Parse(service.URL)
	bare := &httputil.ReverseProxy{
		Rewrite:    func(pr *httputil.ProxyRequest) { pr.SetURL(target) },
		Transport:  testTransport(b),
		BufferPool: upstream.NewBufferPool(16 << 10),
	}
	for _, tc := range []struct {
		name string
		h    http.Handler
	}{
		{"gateway", productionGateway(b, kit, service.URL, testTransport(b))},
		{"bare", bare},
	} {
		b.Run(tc.name, func(b *testing.B) {
			ctx, cancel := context.WithCancel(context.Background()) // as a server's request has
			defer cancel()
			b.ReportAllocs()
			b.SetParallelism(16)
			cpu := processCPU()
			b.RunParallel(func(pb *testing.PB) {
				r := httptest.NewRequestWithContext(ctx, "GET", "/v1/bank/payouts", nil)
				r.Header.Set("Authorization", "Bearer "+testKey)
				for pb.Next() {
					w := httptest.NewRecorder()
					tc.h.ServeHTTP(w, r)
					if w.Code != 200 {
						b.Errorf("status %d %s", w.Code, w.Body)
						return
					}
				}
			})
			b.ReportMetric(float64((processCPU()-cpu).Nanoseconds())/float64(b.N), "cpu-ns/op")
		})
	}
}

// processCPU is the CPU time this process has used.
func processCPU() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
