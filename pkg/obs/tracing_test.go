package obs

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
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

// A call whose caller leaves before the answer (its timeout, or the
// gateway's) is a failure in the service's own metrics and spans: counted
// 499, whatever the handler then wrote, and its span an error; a call
// answered before its caller left is counted as written.
func TestACallTheCallerLeftIsAFailure(t *testing.T) {
	t.Parallel()
	rec := tracetest.NewSpanRecorder()
	tr := NewTracingWith(sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec)))
	reg := prometheus.NewPedanticRegistry()
	m := NewHTTPMetrics(reg)
	left := make(chan struct{})
	mux := http.NewServeMux()
	mux.HandleFunc("POST /v1/slow", func(w http.ResponseWriter, r *http.Request) {
		<-r.Context().Done() // the caller is gone; the work goes on, and "succeeds"
		close(left)
		w.Write([]byte(`{}`))
	})
	mux.HandleFunc("POST /v1/fast", func(w http.ResponseWriter, r *http.Request) { w.Write([]byte(`{}`)) })
	srv := httptest.NewServer(tr.Handler(m.Middleware(mux), "test"))
	defer srv.Close()

	ctx, cancel := context.WithCancel(context.Background())
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, srv.URL+"/v1/slow", nil)
	done := make(chan error, 1)
	go func() {
		resp, err := http.DefaultClient.Do(req)
		if err == nil {
			resp.Body.Close()
		}
		done <- err
	}()
	// The caller gives up once the call is in (in flight).
	for testutil.ToFloat64(m.inFlight) == 0 {
		time.Sleep(time.Millisecond)
	}
	cancel()
	if err := <-done; err == nil {
		t.Fatal("the caller that left got an answer")
	}
	<-left
	if resp, err := http.Post(srv.URL+"/v1/fast", "application/json", nil); err != nil {
		t.Fatal(err)
	} else {
		resp.Body.Close()
	}
	// The metric and the span are written as the handler returns.
	var gone, ok float64
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(5 * time.Millisecond) {
		gone = testutil.ToFloat64(m.requests.WithLabelValues("POST /v1/slow", "POST", "499"))
		ok = testutil.ToFloat64(m.requests.WithLabelValues("POST /v1/fast", "POST", "200"))
		if gone == 1 && len(rec.Ended()) == 2 {
			break
		}
	}
	if gone != 1 || ok != 1 || testutil.ToFloat64(m.requests.WithLabelValues("POST /v1/slow", "POST", "200")) != 0 {
		t.Errorf("counted: left %v as 499, fast %v as 200; want 1 and 1, and no 200 for the call whose caller left", gone, ok)
	}
	for _, s := range rec.Ended() {
		wantError := s.Name() == "POST /v1/slow"
		if (s.Status().Code == codes.Error) != wantError {
			t.Errorf("span %s: status %v, want an error %v", s.Name(), s.Status(), wantError)
		}
	}
}
