package obs

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"go.opentelemetry.io/otel/codes"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"
)

// hop is a server that, like the gateway and the services, calls the next
// hop with a traced client.
func hop(t *testing.T, tr *Tracing, pattern string, next string) *httptest.Server {
	mux := http.NewServeMux()
	client := &http.Client{Transport: tr.Transport(http.DefaultTransport)}
	mux.HandleFunc(pattern, func(w http.ResponseWriter, r *http.Request) {
		if next != "" {
			req, _ := http.NewRequestWithContext(r.Context(), http.MethodGet, next, nil)
			resp, err := client.Do(req)
			if err != nil {
				t.Error(err)
				return
			}
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
		}
		w.Write([]byte(`{}`))
	})
	m := NewHTTPMetrics(prometheus.NewRegistry())
	return httptest.NewServer(tr.Handler(m.Middleware(mux), "test"))
}

func TestOneTraceSpansEveryHop(t *testing.T) {
	t.Parallel()
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	tr := NewTracingWith(tp)

	provider := hop(t, tr, "GET /v1/customers/{id}", "")
	defer provider.Close()
	service := hop(t, tr, "GET /v1/fiat/accounts", provider.URL+"/v1/customers/cus_1")
	defer service.Close()
	gateway := hop(t, tr, "/", service.URL+"/v1/fiat/accounts")
	defer gateway.Close()

	// The partner's own trace: the gateway continues it.
	parent := "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
	req, _ := http.NewRequest(http.MethodGet, gateway.URL+"/v1/fiat/accounts", nil)
	req.Header.Set("traceparent", parent)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()

	spans := rec.Ended()
	byName := map[string]sdktrace.ReadOnlySpan{}
	for _, s := range spans {
		byName[s.Name()] = s
	}
	if len(spans) != 5 {
		names := []string{}
		for _, s := range spans {
			names = append(names, s.Name()+"/"+s.SpanKind().String())
		}
		t.Fatalf("want 5 spans (3 servers, 2 clients), got %v", names)
	}
	var servers, clients []sdktrace.ReadOnlySpan
	for _, s := range spans {
		if s.SpanContext().TraceID().String() != "0af7651916cd43dd8448eb211c80319c" {
			t.Errorf("span %s is in trace %s, not the caller's", s.Name(), s.SpanContext().TraceID())
		}
		switch s.SpanKind() {
		case trace.SpanKindServer:
			servers = append(servers, s)
		case trace.SpanKindClient:
			clients = append(clients, s)
		}
	}
	id := func(s sdktrace.ReadOnlySpan) trace.SpanID { return s.SpanContext().SpanID() }
	find := func(list []sdktrace.ReadOnlySpan, parent trace.SpanID) sdktrace.ReadOnlySpan {
		for _, s := range list {
			if s.Parent().SpanID() == parent {
				return s
			}
		}
		t.Fatalf("no span whose parent is %s", parent)
		return nil
	}
	// gateway server ← caller; gateway client ← gateway server; service server ← gateway client; …
	gwServer := find(servers, trace.SpanID{0xb7, 0xad, 0x6b, 0x71, 0x69, 0x20, 0x33, 0x31})
	gwClient := find(clients, id(gwServer))
	svcServer := find(servers, id(gwClient))
	svcClient := find(clients, id(svcServer))
	provServer := find(servers, id(svcClient))
	if svcServer.Name() != "GET /v1/fiat/accounts" {
		t.Errorf("service span name %q", svcServer.Name())
	}
	if provServer.Name() != "GET /v1/customers/{id}" {
		t.Errorf("spans are named after the route template: %q", provServer.Name())
	}
}

func TestTracingIsOffWithoutAnEndpoint(t *testing.T) {
	t.Parallel()
	tr, err := NewTracing(context.Background(), "test", "sandbox", Config{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	// Trace context still flows through a no-op provider.
	var seen string
	h := tr.Handler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { seen = TraceID(r.Context()) }), "test")
	r := httptest.NewRequest("GET", "/", nil)
	r.Header.Set("traceparent", "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01")
	h.ServeHTTP(httptest.NewRecorder(), r)
	if seen != "0af7651916cd43dd8448eb211c80319c" {
		t.Errorf("the caller's trace id did not reach the handler: %q", seen)
	}
	if err := tr.Shutdown(context.Background()); err != nil {
		t.Error(err)
	}
}

// TestWithoutAnExporterTheContextStillTravels: a service with no exporter
// makes no span, yet its outgoing calls carry the caller's trace onward.
func TestWithoutAnExporterTheContextStillTravels(t *testing.T) {
	t.Parallel()
	tr, _ := NewTracing(context.Background(), "test", "sandbox", Config{}, nil)
	h, onward := callsOnward(t, tr)
	const caller = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
	r := httptest.NewRequest("GET", "/", nil)
	r.Header.Set("traceparent", caller)
	h.ServeHTTP(httptest.NewRecorder(), r)
	if *onward != caller {
		t.Errorf("the call onward carried %q, want the caller's %q", *onward, caller)
	}
	*onward = "unset"
	h.ServeHTTP(httptest.NewRecorder(), httptest.NewRequest("GET", "/", nil))
	if *onward != "" {
		t.Errorf("a request without trace context sent %q onward", *onward)
	}
}

// TestSpansCarryWhatAnOperatorSearchesBy: the route, method and status on
// the server span, the status on the client span, and errors marked.
func TestSpansCarryWhatAnOperatorSearchesBy(t *testing.T) {
	t.Parallel()
	rec := tracetest.NewSpanRecorder()
	tr := NewTracingWith(sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec)))
	downstream := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusBadGateway)
	}))
	defer downstream.Close()
	client := &http.Client{Transport: tr.Transport(http.DefaultTransport)}
	mux := http.NewServeMux()
	mux.HandleFunc("POST /v1/things/{id}", func(w http.ResponseWriter, r *http.Request) {
		req, _ := http.NewRequestWithContext(r.Context(), "GET", downstream.URL+"/x", nil)
		if resp, err := client.Do(req); err == nil {
			resp.Body.Close()
		}
		w.WriteHeader(http.StatusServiceUnavailable)
	})
	tr.Handler(mux, "test").ServeHTTP(httptest.NewRecorder(), httptest.NewRequest("POST", "/v1/things/th_1", nil))

	got := map[trace.SpanKind]sdktrace.ReadOnlySpan{}
	for _, s := range rec.Ended() {
		got[s.SpanKind()] = s
	}
	attrs := func(s sdktrace.ReadOnlySpan) map[string]string {
		out := map[string]string{}
		for _, a := range s.Attributes() {
			out[string(a.Key)] = a.Value.String()
		}
		return out
	}
	server, client2 := got[trace.SpanKindServer], got[trace.SpanKindClient]
	if server == nil || client2 == nil {
		t.Fatalf("spans: %v", rec.Ended())
	}
	if a := attrs(server); server.Name() != "POST /v1/things/{id}" || a["http.route"] != "POST /v1/things/{id}" ||
		a["http.request.method"] != "POST" || a["http.response.status_code"] != "503" || server.Status().Code != codes.Error {
		t.Errorf("server span %q %v %v", server.Name(), a, server.Status())
	}
	if a := attrs(client2); client2.Name() != "GET" || a["http.response.status_code"] != "502" || a["url.path"] != "/x" ||
		client2.Status().Code != codes.Error || client2.Parent().SpanID() != server.SpanContext().SpanID() {
		t.Errorf("client span %q %v %v", client2.Name(), a, client2.Status())
	}
}

// TestOurSamplerDecidesNotTheCaller: a partner's traceparent is the parent
// of our spans, but its sampled flag decides nothing: with our share at 1
// an unsampled caller's request is recorded in its trace and sent onward
// sampled; with our share at 0 a sampled caller's is not recorded and goes
// onward unsampled.
func TestOurSamplerDecidesNotTheCaller(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		share          float64
		caller, onward string
		spans          int
	}{
		{1, "-00", "-01", 2},
		{1, "-01", "-01", 2},
		{0, "-01", "-00", 0},
		{0, "-00", "-00", 0},
	} {
		rec := tracetest.NewSpanRecorder()
		tr := NewTracingWith(sdktrace.NewTracerProvider(sdktrace.WithSampler(OwnSampler(tc.share)), sdktrace.WithSpanProcessor(rec)))
		h, onward := callsOnward(t, tr)
		r := httptest.NewRequest("GET", "/", nil)
		r.Header.Set("traceparent", "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331"+tc.caller)
		h.ServeHTTP(httptest.NewRecorder(), r)
		if n := len(rec.Ended()); n != tc.spans {
			t.Errorf("share %v, caller %s: %d spans recorded, want %d", tc.share, tc.caller, n, tc.spans)
		}
		for _, s := range rec.Ended() {
			if s.SpanContext().TraceID().String() != "0af7651916cd43dd8448eb211c80319c" {
				t.Errorf("share %v, caller %s: span %s is not in the caller's trace", tc.share, tc.caller, s.Name())
			}
		}
		if !strings.HasPrefix(*onward, "00-0af7651916cd43dd8448eb211c80319c-") || !strings.HasSuffix(*onward, tc.onward) {
			t.Errorf("share %v, caller %s: onward traceparent %q, want the caller's trace, %s", tc.share, tc.caller, *onward, tc.onward)
		}
	}
}

// TestClientSpansNameTheirCall: a proxied request's span is named after the
// route it matched; a call named by its caller after that name (never a
// path with ids in it).
func TestClientSpansNameTheirCall(t *testing.T) {
	t.Parallel()
	rec := tracetest.NewSpanRecorder()
	tr := NewTracingWith(sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec)))
	downstream := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}))
	defer downstream.Close()
	client := &http.Client{Transport: tr.Transport(http.DefaultTransport)}
	proxied, _ := http.NewRequest("POST", downstream.URL+"/v1/bank/payout/quote", nil)
	proxied.Pattern = "POST /v1/bank/payout/quote"
	named, _ := http.NewRequestWithContext(ClientSpanName(context.Background(), "bank provider get_customer"), "GET", downstream.URL+"/v1/customers/cus_123", nil)
	for _, req := range []*http.Request{proxied, named} {
		resp, err := client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
	}
	var names []string
	for _, s := range rec.Ended() {
		names = append(names, s.Name())
	}
	if strings.Join(names, ", ") != "POST /v1/bank/payout/quote, GET bank provider get_customer" {
		t.Errorf("client spans %q", names)
	}
}

// callsOnward is a traced service whose every request makes one traced call
// to a downstream server; onward is the traceparent that call carried.
func callsOnward(t *testing.T, tr *Tracing) (h http.Handler, onward *string) {
	onward = new(string)
	downstream := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		*onward = r.Header.Get("traceparent")
	}))
	t.Cleanup(downstream.Close)
	client := &http.Client{Transport: tr.Transport(http.DefaultTransport)}
	h = tr.Handler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		req, _ := http.NewRequestWithContext(r.Context(), "GET", downstream.URL, nil)
		if resp, err := client.Do(req); err == nil {
			resp.Body.Close()
		}
	}), "test")
	return h, onward
}
