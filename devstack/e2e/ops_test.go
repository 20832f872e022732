package e2e

import (
	"context"
	"encoding/hex"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	coltrace "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/protobuf/proto"

	"github.com/partnerpay/api/devstack"
)

// metricValue finds the sample of name whose labels include want; ok is
// false when there is none. name may be a histogram's _bucket (with an
// "le" label), _count or _sum series.
func metricValue(text, name string, want map[string]string) (float64, bool) {
	parser := expfmt.NewTextParser(model.UTF8Validation)
	families, err := parser.TextToMetricFamilies(strings.NewReader(text))
	if err != nil {
		return 0, false
	}
	base, part := name, ""
	for _, suffix := range []string{"_bucket", "_count", "_sum"} {
		if b, ok := strings.CutSuffix(name, suffix); ok && families[name] == nil && families[b] != nil {
			base, part = b, suffix
		}
	}
	fam := families[base]
	if fam == nil {
		return 0, false
	}
	for _, m := range fam.GetMetric() {
		labels := map[string]string{}
		for _, l := range m.GetLabel() {
			labels[l.GetName()] = l.GetValue()
		}
		match := true
		for k, v := range want {
			if k != "le" && labels[k] != v {
				match = false
			}
		}
		if !match {
			continue
		}
		switch {
		case part == "_count":
			return float64(m.GetHistogram().GetSampleCount()), true
		case part == "_sum":
			return m.GetHistogram().GetSampleSum(), true
		case part == "_bucket":
			for _, b := range m.GetHistogram().GetBucket() {
				if strconv.FormatFloat(b.GetUpperBound(), 'g', -1, 64) == want["le"] {
					return float64(b.GetCumulativeCount()), true
				}
			}
		case m.GetCounter() != nil:
			return m.GetCounter().GetValue(), true
		case m.GetGauge() != nil:
			return m.GetGauge().GetValue(), true
		}
	}
	return 0, false
}

func TestMetricsMoveWithTheRightLabels(t *testing.T) {
	s := startStack(t)
	key := s.issue("acme", "--products", "bank,fiat", "--source-chains", "84532", "--destination-chains", "84532", "--rate", "1000")
	slow := s.issue("slow", "--products", "bank", "--source-chains", "84532", "--rate", "1")
	quote := `{"cryptoCurrency":"USDC","chain":84532,"fiatCurrency":"EUR","country":"DE","cryptoAmount":"10"}`
	quoteOK := map[string]string{"route": "POST /v1/bank/payout/quote", "method": "POST", "code": "200"}

	before, _ := metricValue(s.metrics("gateway"), "partnerapi_http_requests_total", quoteOK)
	s.post("/v1/bank/payout/quote", key, quote)
	s.post("/v1/bank/payout/quote", key, quote)
	s.get("/v1/config", "")                 // 401: missing
	s.get("/v1/config", "pk_malformed")     // 401: malformed
	s.post("/v1/fiat/accounts", slow, "{}") // 403 or 429 on a 1/s key
	s.get("/v1/no-such-thing", key)         // 404
	for range 5 {
		s.get("/v1/limits", slow) // 429s
	}
	decodeOK(t, s.post("/v1/fiat/accounts", key, onboardBody("ada@example.com")))

	gw := s.metrics("gateway")
	after, _ := metricValue(gw, "partnerapi_http_requests_total", quoteOK)
	if after-before != 2 {
		t.Errorf("two quotes moved the gateway's counter by %v", after-before)
	}
	type series struct {
		service, name string
		labels        map[string]string
	}
	for _, c := range []series{
		{"gateway", "partnerapi_http_requests_total", map[string]string{"route": "GET /v1/config", "method": "GET", "code": "401"}},
		{"gateway", "partnerapi_http_requests_total", map[string]string{"route": "unmatched", "method": "GET", "code": "404"}},
		{"gateway", "partnerapi_http_requests_total", map[string]string{"route": "GET /v1/limits", "code": "429"}},
		{"gateway", "partnerapi_http_request_duration_seconds_bucket", map[string]string{"route": "POST /v1/bank/payout/quote", "code": "200", "le": "0.25"}},
		{"gateway", "partnerapi_http_requests_in_flight", nil},
		{"gateway", "partnerapi_gateway_auth_refusals_total", map[string]string{"reason": "missing"}},
		{"gateway", "partnerapi_gateway_auth_refusals_total", map[string]string{"reason": "malformed"}},
		{"gateway", "partnerapi_gateway_ratelimit_decisions_total", map[string]string{"decision": "limited", "store": "redis"}},
		{"gateway", "partnerapi_gateway_ratelimit_decisions_total", map[string]string{"decision": "allowed", "store": "redis"}},
		{"gateway", "partnerapi_gateway_ratelimit_fallback_active", nil},
		{"gateway", "partnerapi_gateway_ratelimit_limited_total", map[string]string{"key_id": "slow"}},
		{"gateway", "partnerapi_gateway_upstream_request_duration_seconds_count", map[string]string{"upstream": "payout", "code": "200"}},
		{"gateway", "partnerapi_gateway_upstream_request_duration_seconds_count", map[string]string{"upstream": "fiat", "code": "200"}},
		{"gateway", "partnerapi_gateway_keys_loaded", nil},
		{"gateway", "partnerapi_gateway_keys_file_valid", nil},
		{"gateway", "partnerapi_build_info", map[string]string{"service": "gateway", "version": "e2e", "revision": "e2e0000"}},
		{"gateway", "partnerapi_environment_info", map[string]string{"service": "gateway", "environment": "sandbox"}},
		{"payout", "partnerapi_http_requests_total", quoteOK},
		{"payout", "partnerapi_payout_operations_total", map[string]string{"operation": "quote", "outcome": "ok"}},
		{"payout", "partnerapi_payout_operation_duration_seconds_count", map[string]string{"operation": "quote"}},
		{"payout", "partnerapi_environment_info", map[string]string{"environment": "sandbox"}},
		{"fiat", "partnerapi_http_requests_total", map[string]string{"route": "POST /v1/fiat/accounts", "code": "200"}},
		{"fiat", "partnerapi_fiat_operations_total", map[string]string{"operation": "create_account", "outcome": "ok"}},
		{"consent", "partnerapi_http_requests_total", map[string]string{"route": "POST /internal/sessions", "code": "200"}},
		{"sandboxbank", "partnerapi_http_requests_total", map[string]string{"route": "POST /v1/customers", "code": "201"}},
		{"sandboxbank", "partnerapi_build_info", map[string]string{"service": "sandboxbank"}},
	} {
		v, ok := metricValue(s.metrics(c.service), c.name, c.labels)
		if !ok {
			t.Errorf("%s: no %s%v", c.service, c.name, c.labels)
			continue
		}
		if strings.HasSuffix(c.name, "_total") && v < 1 {
			t.Errorf("%s: %s%v = %v, want it to have moved", c.service, c.name, c.labels, v)
		}
	}
	if v, _ := metricValue(gw, "partnerapi_gateway_keys_loaded", nil); v != 2 {
		t.Errorf("keys loaded %v, want 2", v)
	}
	// Key ids are labels of the limited counter only (the keys file bounds
	// the set); a key that was never limited reads 0.
	if v, ok := metricValue(gw, "partnerapi_gateway_ratelimit_limited_total", map[string]string{"key_id": "acme"}); !ok || v != 0 {
		t.Errorf("limited_total{key_id=acme} = %v (present %v), want 0", v, ok)
	}
	for _, leak := range []string{"pk_", "/v1/no-such-thing"} {
		if strings.Contains(gw, leak) {
			t.Errorf("a key or a raw path is in the gateway's metrics: %q", leak)
		}
	}
}

// An SRE profiles a binary on its admin address; the public address knows
// nothing of it.
func TestTheProfilerIsOnTheAdminAddressOnly(t *testing.T) {
	s := startStack(t)
	for _, svc := range services {
		resp, err := client.Get("http://" + s.Services[svc].AdminAddr + "/debug/pprof/goroutine?debug=1")
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 || !strings.Contains(string(b), "goroutine profile:") {
			t.Errorf("%s admin /debug/pprof/goroutine: %d %.80q, want the goroutine profile", svc, resp.StatusCode, b)
		}
	}
	for _, path := range []string{"/debug/pprof/", "/debug/pprof/goroutine?debug=1", "/debug/pprof/profile?seconds=1"} {
		r := s.get(path, "")
		if r.Status != 404 || fieldOrder(t, r.Body)[0] != "environment" || strings.Contains(r.Body, "goroutine") {
			t.Errorf("public GET %s: %d %.120s, want the envelope's 404", path, r.Status, r.Body)
		}
	}
	if v, ok := metricValue(s.metrics("gateway"), "partnerapi_log_lines_dropped_total", nil); !ok || v != 0 {
		t.Errorf("log_lines_dropped_total = %v (present %v), want 0 on an idle stack", v, ok)
	}
}

// Each binary's healthcheck subcommand probes its own address, run with
// the binary's environment (as its container's HEALTHCHECK runs it: the
// configuration is loaded once, whole, for serving and for the probe).
func TestEveryBinaryHasAHealthcheckSubcommand(t *testing.T) {
	s := startStack(t)
	dead := freeAddrs(t, 1)[0]
	// without is env less the variable name.
	without := func(env []string, name string) []string {
		return slices.DeleteFunc(env, func(kv string) bool { return strings.HasPrefix(kv, name+"=") })
	}
	for _, svc := range services {
		name := strings.ToUpper(svc) + "_ADDR"
		env := without(s.Services[svc].Environ(), name)
		ok := exec.Command(filepath.Join(binDir, svc), "healthcheck")
		ok.Env = append(env, name+"="+s.Services[svc].Addr)
		if out, err := ok.CombinedOutput(); err != nil {
			t.Errorf("%s healthcheck of a healthy service: %v %s", svc, err, out)
		}
		bad := exec.Command(filepath.Join(binDir, svc), "healthcheck")
		bad.Env = append(env, name+"="+dead)
		if out, err := bad.CombinedOutput(); err == nil || !strings.Contains(string(out), "healthcheck") {
			t.Errorf("%s healthcheck of nothing: %v %q, want a failure that says why", svc, err, out)
		}
	}
	// The local stack's registry (devstack.Binaries) says what each binary
	// declares of itself: its default address and its grace.
	for _, b := range devstack.Binaries {
		cmd := exec.Command(filepath.Join(binDir, b.Name), "healthcheck")
		cmd.Env = without(s.Services[b.Name].Environ(), strings.ToUpper(b.Name)+"_ADDR")
		if out, err := cmd.CombinedOutput(); err != nil && !strings.Contains(string(out), b.Addr) {
			t.Errorf("%s healthcheck with no %s_ADDR: %q, want its default address %s", b.Name, strings.ToUpper(b.Name), out, b.Addr)
		}
		want := `"grace":"` + b.Grace.String() + `"`
		if !s.logged(`"msg":"starting","service":"`+b.Name+`"`) || !slices.ContainsFunc(strings.Split(s.logs.String(), "\n"), func(l string) bool {
			return strings.Contains(l, `"msg":"starting","service":"`+b.Name+`"`) && strings.Contains(l, want)
		}) {
			t.Errorf("%s does not start with %s", b.Name, want)
		}
	}
}

// otlpReceiver is a stand-in for the collector: it keeps every span sent to
// POST /v1/traces, with the name of the service that sent it.
type otlpReceiver struct {
	mu    sync.Mutex
	spans []receivedSpan
	addr  string
}

type receivedSpan struct {
	service  string
	resource map[string]string // the resource's string attributes
	span     *tracepb.Span
}

func startReceiver(t *testing.T) *otlpReceiver {
	r := &otlpReceiver{}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	r.addr = ln.Addr().String()
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		body, _ := io.ReadAll(req.Body)
		var in coltrace.ExportTraceServiceRequest
		if err := proto.Unmarshal(body, &in); err != nil {
			http.Error(w, err.Error(), 400)
			return
		}
		r.mu.Lock()
		for _, rs := range in.ResourceSpans {
			res := map[string]string{}
			for _, a := range rs.GetResource().GetAttributes() {
				res[a.Key] = a.GetValue().GetStringValue()
			}
			for _, ss := range rs.ScopeSpans {
				for _, sp := range ss.Spans {
					r.spans = append(r.spans, receivedSpan{service: res["service.name"], resource: res, span: sp})
				}
			}
		}
		r.mu.Unlock()
		out, _ := proto.Marshal(&coltrace.ExportTraceServiceResponse{})
		w.Header().Set("Content-Type", "application/x-protobuf")
		w.Write(out)
	})}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Shutdown(context.Background()) })
	return r
}

func (r *otlpReceiver) trace(id string) []receivedSpan {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []receivedSpan
	for _, s := range r.spans {
		if hex.EncodeToString(s.span.TraceId) == id {
			out = append(out, s)
		}
	}
	return out
}

func TestOneTraceSpansGatewayServiceAndProvider(t *testing.T) {
	recv := startReceiver(t)
	s := startStack(t, withEnv("OTEL_EXPORTER_OTLP_ENDPOINT", "http://"+recv.addr), withEnv("OTEL_BSP_SCHEDULE_DELAY", "100"))
	key := s.issue("acme", "--products", "fiat", "--destination-chains", "84532", "--rate", "1000")

	const traceID = "4bf92f3577b34da6a3ce929d0e0e4736"
	const callerSpan = "00f067aa0ba902b7"
	// The caller did not sample its trace: it is our parent all the same,
	// and our sampler (every request, by default) records it.
	r := s.do("POST", "/v1/fiat/accounts", key, onboardBody("ada@example.com"), "traceparent", "00-"+traceID+"-"+callerSpan+"-00")
	if r.Status != 200 {
		t.Fatalf("%d %s", r.Status, r.Body)
	}
	// The gateway's log line carries the trace id.
	if !s.logged(`"route":"POST /v1/fiat/accounts","status":200,"code":"","duration_us":`) || !s.logged(`"trace_id":"`+traceID+`"`) {
		t.Error("the gateway's request line lacks the trace id")
	}

	find := func(spans []receivedSpan, service string, kind tracepb.Span_SpanKind, parent string) *tracepb.Span {
		for _, sp := range spans {
			if sp.service == service && sp.span.Kind == kind && hex.EncodeToString(sp.span.ParentSpanId) == parent {
				return sp.span
			}
		}
		return nil
	}
	var spans []receivedSpan
	var gwServer, gwClient, fiatServer, fiatClient, bankServer *tracepb.Span
	eventually(10*time.Second, func() bool {
		spans = recv.trace(traceID)
		gwServer = find(spans, "gateway", tracepb.Span_SPAN_KIND_SERVER, callerSpan)
		if gwServer != nil {
			gwClient = find(spans, "gateway", tracepb.Span_SPAN_KIND_CLIENT, hex.EncodeToString(gwServer.SpanId))
		}
		if gwClient != nil {
			fiatServer = find(spans, "fiat", tracepb.Span_SPAN_KIND_SERVER, hex.EncodeToString(gwClient.SpanId))
		}
		if fiatServer != nil {
			for _, sp := range spans { // the first provider call: POST /v1/customers
				if sp.service == "fiat" && sp.span.Kind == tracepb.Span_SPAN_KIND_CLIENT && hex.EncodeToString(sp.span.ParentSpanId) == hex.EncodeToString(fiatServer.SpanId) {
					if b := find(spans, "sandboxbank", tracepb.Span_SPAN_KIND_SERVER, hex.EncodeToString(sp.span.SpanId)); b != nil && b.Name == "POST /v1/customers" {
						fiatClient, bankServer = sp.span, b
					}
				}
			}
		}
		return bankServer != nil
	})
	if bankServer == nil {
		var got []string
		for _, sp := range spans {
			got = append(got, sp.service+":"+sp.span.Name+":"+sp.span.Kind.String())
		}
		t.Fatalf("no unbroken chain caller → gateway → fiat → sandboxbank; spans of the trace: %v", got)
	}
	if gwServer.Name != "POST /v1/fiat/accounts" || fiatServer.Name != "POST /v1/fiat/accounts" {
		t.Errorf("server spans are named after the route: gateway %q, fiat %q", gwServer.Name, fiatServer.Name)
	}
	if gwClient.Name != "POST /v1/fiat/accounts" || !strings.HasPrefix(fiatClient.Name, "POST bank provider ") {
		t.Errorf("client spans are named after the route or the provider's operation: gateway %q, fiat %q", gwClient.Name, fiatClient.Name)
	}
	for _, sp := range spans {
		if sp.resource["service.version"] == "" || !strings.Contains(sp.resource["service.instance.id"], "/") {
			t.Errorf("%s's span %q lacks service.version or service.instance.id: %v", sp.service, sp.span.Name, sp.resource)
			break
		}
	}
	if consent := find(spans, "consent", tracepb.Span_SPAN_KIND_SERVER, ""); consent != nil {
		t.Errorf("the consent service's span has no parent: %s", consent.Name)
	}

	// An execution's trace shows where its time went: under payout's
	// server span, the quote book's Redis commands (evalsha), the wait for
	// a connection (pool.acquire) and the payout's one statement (WITH …
	// INSERT, committed on its own: its span holds the commit's wait for
	// the synchronous standby).
	bank := s.issue("bank", "--products", "bank", "--source-chains", "84532", "--rate", "1000")
	q := s.quoteID(bank, eur("100"))
	const execTrace = "6bf92f3577b34da6a3ce929d0e0e4738"
	if r := s.do("POST", executePath, bank, executeBody(q, "DE89370400440532013000"), "traceparent", "00-"+execTrace+"-"+callerSpan+"-01"); r.Status != 200 {
		t.Fatalf("execution: %d %s", r.Status, r.Body)
	}
	var children []string
	eventually(10*time.Second, func() bool {
		spans := recv.trace(execTrace)
		var server *tracepb.Span
		for _, sp := range spans {
			if sp.service == "payout" && sp.span.Kind == tracepb.Span_SPAN_KIND_SERVER {
				server = sp.span
			}
		}
		if server == nil {
			return false
		}
		children = children[:0]
		for _, sp := range spans {
			if sp.service == "payout" && sp.span.Kind == tracepb.Span_SPAN_KIND_CLIENT && string(sp.span.ParentSpanId) == string(server.SpanId) {
				children = append(children, sp.span.Name)
			}
		}
		return slices.Contains(children, "WITH") && slices.Contains(children, "evalsha") && slices.Contains(children, "pool.acquire")
	})
	if !slices.Contains(children, "WITH") || !slices.Contains(children, "evalsha") || !slices.Contains(children, "pool.acquire") {
		t.Errorf("the execution's trace lacks its database or Redis spans under payout's server span: %v", children)
	}

	// Health probes (the gateway asks every service's /health each second)
	// make no span at all, on either side: they were four spans in five,
	// root spans named bare "GET" at the services.
	recv.mu.Lock()
	for _, sp := range recv.spans {
		if strings.Contains(sp.span.Name, "/health") || (sp.service != "gateway" && sp.span.Name == "GET") {
			t.Errorf("a health probe's span: %s %q %v", sp.service, sp.span.Name, sp.span.Kind)
			break
		}
	}
	recv.mu.Unlock()
}

// TestWithoutAnExporterTheTraceIDStillReachesEveryLog: no exporter, no span
// made anywhere, yet a caller's traceparent reaches the service and its log
// line, and the gateway's.
func TestWithoutAnExporterTheTraceIDStillReachesEveryLog(t *testing.T) {
	s := startStack(t)
	key := s.issue("acme", "--products", "fiat", "--destination-chains", "84532", "--rate", "1000")
	const traceID = "5bf92f3577b34da6a3ce929d0e0e4737"
	r := s.do("POST", "/v1/fiat/accounts", key, onboardBody("ada@example.com"), "traceparent", "00-"+traceID+"-00f067aa0ba902b7-01")
	if r.Status != 200 {
		t.Fatalf("%d %s", r.Status, r.Body)
	}
	for _, want := range []string{
		`"route":"POST /v1/fiat/accounts","status":200,"code":"","duration_us":`,
		`"msg":"create_account","service":"fiat"`,
	} {
		found := eventually(3*time.Second, func() bool {
			for _, line := range strings.Split(s.logs.String(), "\n") {
				if strings.Contains(line, want) && strings.Contains(line, `"trace_id":"`+traceID+`"`) {
					return true
				}
			}
			return false
		})
		if !found {
			t.Errorf("no log line with %s and the caller's trace id", want)
		}
	}
	// The gateway's line for a service that did not answer carries it too.
	s.Services["fiat"].Stop()
	const failedTrace = "6bf92f3577b34da6a3ce929d0e0e4738"
	if r := s.do("POST", "/v1/fiat/accounts", key, onboardBody("bea@example.com"), "traceparent", "00-"+failedTrace+"-00f067aa0ba902b7-01"); r.Status != 500 {
		t.Fatalf("with fiat stopped: %d %s", r.Status, r.Body)
	}
	if !eventually(3*time.Second, func() bool {
		for _, line := range strings.Split(s.logs.String(), "\n") {
			if strings.Contains(line, `"msg":"upstream failed`) && strings.Contains(line, `"trace_id":"`+failedTrace+`"`) {
				return true
			}
		}
		return false
	}) {
		t.Error("the gateway's upstream failed line lacks the caller's trace id")
	}
}

// TestAnUnreachableCollectorIsLoggedNotFatal: spans that cannot be exported
// cost the partner nothing, and the operator reads why in the JSON log, not
// as a stray plain line.
func TestAnUnreachableCollectorIsLoggedNotFatal(t *testing.T) {
	dead := freeAddrs(t, 1)[0]
	s := startStack(t, withEnv("OTEL_EXPORTER_OTLP_ENDPOINT", "http://"+dead),
		withEnv("OTEL_BSP_SCHEDULE_DELAY", "100"), withEnv("OTEL_EXPORTER_OTLP_TIMEOUT", "300"))
	key := s.issue("acme", "--products", "bank", "--source-chains", "84532", "--rate", "1000")
	if r := s.get("/v1/config", key); r.Status != 200 {
		t.Fatalf("%d %s", r.Status, r.Body)
	}
	if !s.logged(`"msg":"tracing error","service":"gateway","error":`) {
		t.Fatal("the gateway did not log that its spans could not be exported")
	}
	for _, line := range strings.Split(s.logs.String(), "\n") {
		if _, rest, ok := strings.Cut(line, "| "); ok && strings.Contains(rest, "traces export") && !json.Valid([]byte(rest)) {
			t.Errorf("a plain line in the log: %q", line)
		}
	}
}
