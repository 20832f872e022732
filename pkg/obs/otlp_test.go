package obs

import (
	"compress/gzip"
	"context"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	sdkinstr "go.opentelemetry.io/otel/sdk/instrumentation"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"
	coltrace "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	commonpb "go.opentelemetry.io/proto/otlp/common/v1"
	resourcepb "go.opentelemetry.io/proto/otlp/resource/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/protobuf/encoding/prototext"
	"google.golang.org/protobuf/proto"

	"github.com/partnerpay/api/pkg/config"
)

// The oracle is opentelemetry-proto's own generated code: what the exporter
// writes must decode, field for field, to the message a collector expects.
// What the exporter sends is what the OpenTelemetry protocol says: the
// official types decode it to every field of the spans.
func TestOTLPExportDecodesWithTheOfficialTypes(t *testing.T) {
	t.Parallel()
	tid := trace.TraceID{0x4b, 0xf9, 0x2f, 0x35, 0x77, 0xb3, 0x4d, 0xa6, 0xa3, 0xce, 0x92, 0x9d, 0x0e, 0x0e, 0x47, 0x36}
	ts, _ := trace.ParseTraceState("vendor=x")
	sc := trace.NewSpanContext(trace.SpanContextConfig{TraceID: tid, SpanID: trace.SpanID{1, 2, 3, 4, 5, 6, 7, 8},
		TraceFlags: trace.FlagsSampled, TraceState: ts})
	parent := trace.NewSpanContext(trace.SpanContextConfig{TraceID: tid, SpanID: trace.SpanID{9, 9, 9, 9, 9, 9, 9, 9}, Remote: true})
	ltid := trace.TraceID{7}
	linked := trace.NewSpanContext(trace.SpanContextConfig{TraceID: ltid, SpanID: trace.SpanID{7}})
	res := resource.NewSchemaless(attribute.String("service.name", "gateway"))
	start := time.Unix(1700000000, 123456789)
	scope := sdkinstr.Scope{Name: instrumentation, Version: "1.2.3", SchemaURL: "https://opentelemetry.io/schemas/1.40.0",
		Attributes: attribute.NewSet(attribute.Bool("lean", true))}

	server := tracetest.SpanStub{
		Name: "POST /v1/payout/execute", SpanContext: sc, Parent: parent, SpanKind: trace.SpanKindServer,
		StartTime: start, EndTime: start.Add(1500 * time.Microsecond),
		Attributes: []attribute.KeyValue{
			attribute.String("http.route", "POST /v1/payout/execute"),
			attribute.Int64("http.response.status_code", 500),
			attribute.Int64("negative", -3),
			attribute.Float64("ratio", 0.25),
			attribute.Bool("retried", false),
			attribute.StringSlice("tags", []string{"a", "b"}),
			attribute.Int64Slice("ints", []int64{1, -1}),
			attribute.Float64Slice("floats", []float64{1.5}),
			attribute.BoolSlice("bools", []bool{true}),
			attribute.ByteSlice("raw", []byte{0, 255}),
			attribute.Map("nested", attribute.String("k", "v")),
			attribute.Slice("mixed", attribute.StringValue("s"), attribute.IntValue(2)),
		},
		Events:            []sdktrace.Event{{Name: "retry", Time: start.Add(time.Millisecond), Attributes: []attribute.KeyValue{attribute.Int("attempt", 2)}, DroppedAttributeCount: 1}},
		Links:             []sdktrace.Link{{SpanContext: linked, Attributes: []attribute.KeyValue{attribute.String("why", "batch")}}},
		Status:            sdktrace.Status{Code: codes.Error, Description: "upstream failed"},
		DroppedAttributes: 3, DroppedEvents: 4, DroppedLinks: 5,
		Resource: res, InstrumentationScope: scope,
	}
	client := tracetest.SpanStub{
		Name: "POST", SpanContext: trace.NewSpanContext(trace.SpanContextConfig{TraceID: tid, SpanID: trace.SpanID{2}}),
		Parent: sc, SpanKind: trace.SpanKindClient, StartTime: start, EndTime: start.Add(time.Millisecond),
		Status: sdktrace.Status{Code: codes.Ok}, Resource: res, InstrumentationScope: sdkinstr.Scope{Name: "other"},
	}
	c := newCollector(t)
	e, err := newOTLPExporter(env(map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": c.URL}))
	if err != nil {
		t.Fatal(err)
	}
	defer e.Shutdown(context.Background())
	if err := e.ExportSpans(context.Background(), []sdktrace.ReadOnlySpan{server.Snapshot(), client.Snapshot()}); err != nil {
		t.Fatal(err)
	}
	got := &coltrace.ExportTraceServiceRequest{}
	if err := proto.Unmarshal(c.bodies[0], got); err != nil {
		t.Fatal(err)
	}

	str := func(s string) *commonpb.AnyValue {
		return &commonpb.AnyValue{Value: &commonpb.AnyValue_StringValue{StringValue: s}}
	}
	i64 := func(i int64) *commonpb.AnyValue {
		return &commonpb.AnyValue{Value: &commonpb.AnyValue_IntValue{IntValue: i}}
	}
	array := func(vs ...*commonpb.AnyValue) *commonpb.AnyValue {
		return &commonpb.AnyValue{Value: &commonpb.AnyValue_ArrayValue{ArrayValue: &commonpb.ArrayValue{Values: vs}}}
	}
	kv := func(k string, v *commonpb.AnyValue) *commonpb.KeyValue { return &commonpb.KeyValue{Key: k, Value: v} }
	want := &coltrace.ExportTraceServiceRequest{ResourceSpans: []*tracepb.ResourceSpans{{
		Resource: &resourcepb.Resource{Attributes: []*commonpb.KeyValue{kv("service.name", str("gateway"))}},
		ScopeSpans: []*tracepb.ScopeSpans{{
			Scope: &commonpb.InstrumentationScope{Name: instrumentation, Version: "1.2.3",
				Attributes: []*commonpb.KeyValue{kv("lean", &commonpb.AnyValue{Value: &commonpb.AnyValue_BoolValue{BoolValue: true}})}},
			SchemaUrl: "https://opentelemetry.io/schemas/1.40.0",
			Spans: []*tracepb.Span{{
				TraceId: tid[:], SpanId: []byte{1, 2, 3, 4, 5, 6, 7, 8}, TraceState: "vendor=x",
				ParentSpanId: []byte{9, 9, 9, 9, 9, 9, 9, 9},
				Flags:        0x01 | 0x100 | 0x200, // sampled; the parent's remoteness known, and remote
				Name:         "POST /v1/payout/execute", Kind: tracepb.Span_SPAN_KIND_SERVER,
				StartTimeUnixNano: uint64(start.UnixNano()), EndTimeUnixNano: uint64(start.Add(1500 * time.Microsecond).UnixNano()),
				Attributes: []*commonpb.KeyValue{
					kv("http.route", str("POST /v1/payout/execute")),
					kv("http.response.status_code", i64(500)),
					kv("negative", i64(-3)),
					kv("ratio", &commonpb.AnyValue{Value: &commonpb.AnyValue_DoubleValue{DoubleValue: 0.25}}),
					kv("retried", &commonpb.AnyValue{Value: &commonpb.AnyValue_BoolValue{BoolValue: false}}),
					kv("tags", array(str("a"), str("b"))),
					kv("ints", array(i64(1), i64(-1))),
					kv("floats", array(&commonpb.AnyValue{Value: &commonpb.AnyValue_DoubleValue{DoubleValue: 1.5}})),
					kv("bools", array(&commonpb.AnyValue{Value: &commonpb.AnyValue_BoolValue{BoolValue: true}})),
					kv("raw", &commonpb.AnyValue{Value: &commonpb.AnyValue_BytesValue{BytesValue: []byte{0, 255}}}),
					kv("nested", &commonpb.AnyValue{Value: &commonpb.AnyValue_KvlistValue{KvlistValue: &commonpb.KeyValueList{
						Values: []*commonpb.KeyValue{kv("k", str("v"))}}}}),
					kv("mixed", array(str("s"), i64(2))),
				},
				DroppedAttributesCount: 3,
				Events: []*tracepb.Span_Event{{Name: "retry", TimeUnixNano: uint64(start.Add(time.Millisecond).UnixNano()),
					Attributes: []*commonpb.KeyValue{kv("attempt", i64(2))}, DroppedAttributesCount: 1}},
				DroppedEventsCount: 4,
				Links: []*tracepb.Span_Link{{TraceId: ltid[:], SpanId: []byte{7, 0, 0, 0, 0, 0, 0, 0},
					Attributes: []*commonpb.KeyValue{kv("why", str("batch"))}, Flags: 0x100}},
				DroppedLinksCount: 5,
				Status:            &tracepb.Status{Code: tracepb.Status_STATUS_CODE_ERROR, Message: "upstream failed"},
			}},
		}, {
			Scope: &commonpb.InstrumentationScope{Name: "other"},
			Spans: []*tracepb.Span{{
				TraceId: tid[:], SpanId: []byte{2, 0, 0, 0, 0, 0, 0, 0}, ParentSpanId: []byte{1, 2, 3, 4, 5, 6, 7, 8},
				Flags: 0x100, Name: "POST", Kind: tracepb.Span_SPAN_KIND_CLIENT,
				StartTimeUnixNano: uint64(start.UnixNano()), EndTimeUnixNano: uint64(start.Add(time.Millisecond).UnixNano()),
				Status: &tracepb.Status{Code: tracepb.Status_STATUS_CODE_OK},
			}},
		}},
	}}}
	if !proto.Equal(got, want) {
		t.Errorf("decoded:\n%s\nwant:\n%s", prototext.Format(got), prototext.Format(want))
	}
}

// collector is a stand-in OTLP/HTTP receiver: it answers with the statuses
// it is given, in turn, then 200, and keeps each request.
type collector struct {
	*httptest.Server
	mu       sync.Mutex
	answers  []int
	requests []*http.Request
	bodies   [][]byte
}

func newCollector(t *testing.T, answers ...int) *collector {
	c := &collector{answers: answers}
	c.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var body io.Reader = r.Body
		if r.Header.Get("Content-Encoding") == "gzip" {
			zr, err := gzip.NewReader(r.Body)
			if err != nil {
				t.Error(err)
				return
			}
			body = zr
		}
		b, _ := io.ReadAll(body)
		c.mu.Lock()
		c.requests, c.bodies = append(c.requests, r), append(c.bodies, b)
		status := 200
		if len(c.answers) > 0 {
			status, c.answers = c.answers[0], c.answers[1:]
		}
		c.mu.Unlock()
		if status == 429 {
			w.Header().Set("Retry-After", "0")
		}
		w.WriteHeader(status)
	}))
	t.Cleanup(c.Close)
	return c
}

// env is the tracing configuration a binary given vars would load.
func env(vars map[string]string) Config {
	var c Config
	if err := config.Load(func(k string) string { return vars[k] }, &c); err != nil {
		panic(err)
	}
	return c
}

func oneSpan() []sdktrace.ReadOnlySpan {
	return []sdktrace.ReadOnlySpan{tracetest.SpanStub{Name: "GET /v1/config",
		SpanContext: trace.NewSpanContext(trace.SpanContextConfig{TraceID: trace.TraceID{1}, SpanID: trace.SpanID{1}})}.Snapshot()}
}

func TestOTLPExporterPostsToTheCollectorAsConfigured(t *testing.T) {
	t.Parallel()
	c := newCollector(t)
	e, err := newOTLPExporter(env(map[string]string{
		"OTEL_EXPORTER_OTLP_ENDPOINT":    c.URL + "/", // a base: /v1/traces is added
		"OTEL_EXPORTER_OTLP_HEADERS":     "api-key=s%3Dcret, X-Tenant = acme",
		"OTEL_EXPORTER_OTLP_COMPRESSION": "gzip",
		"OTEL_EXPORTER_OTLP_PROTOCOL":    "http/protobuf",
	}))
	if err != nil {
		t.Fatal(err)
	}
	defer e.Shutdown(context.Background())
	if err := e.ExportSpans(context.Background(), oneSpan()); err != nil {
		t.Fatal(err)
	}
	r := c.requests[0]
	if r.Method != "POST" || r.URL.Path != "/v1/traces" || r.Header.Get("Content-Type") != "application/x-protobuf" ||
		r.Header.Get("Content-Encoding") != "gzip" || r.Header.Get("Api-Key") != "s=cret" || r.Header.Get("X-Tenant") != "acme" {
		t.Errorf("%s %s %v", r.Method, r.URL.Path, r.Header)
	}
	var got coltrace.ExportTraceServiceRequest
	if err := proto.Unmarshal(c.bodies[0], &got); err != nil || got.ResourceSpans[0].ScopeSpans[0].Spans[0].Name != "GET /v1/config" {
		t.Errorf("%v %s", err, prototext.Format(&got))
	}

	// The traces endpoint is taken as it is, and wins.
	c2 := newCollector(t)
	e2, err := newOTLPExporter(env(map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": c.URL, "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": c2.URL + "/custom"}))
	if err != nil {
		t.Fatal(err)
	}
	if err := e2.ExportSpans(context.Background(), oneSpan()); err != nil || len(c2.requests) != 1 || c2.requests[0].URL.Path != "/custom" ||
		c2.requests[0].Header.Get("Content-Encoding") != "" {
		t.Errorf("%v %v", err, c2.requests)
	}
}

func TestOTLPExporterRetriesOnlyWhatMaySucceedLater(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		answers  []int
		requests int
		err      string
	}{
		{[]int{503, 429, 502}, 4, ""},        // busy, then accepted
		{[]int{400}, 1, "400 Bad Request"},   // a batch it refuses is refused again: no retry
		{[]int{401, 200}, 1, "Unauthorized"}, // wrong headers stay wrong
	} {
		c := newCollector(t, tc.answers...)
		u := strings.Replace(c.URL, "http://", "http://user:hunter2@", 1)
		e, err := newOTLPExporter(env(map[string]string{"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": u}))
		if err != nil {
			t.Fatal(err)
		}
		err = e.ExportSpans(context.Background(), oneSpan())
		if len(c.requests) != tc.requests || (tc.err == "") != (err == nil) || (err != nil && !strings.Contains(err.Error(), tc.err)) {
			t.Errorf("answers %v: %d requests, error %v", tc.answers, len(c.requests), err)
		}
		if err != nil && strings.Contains(err.Error(), "hunter2") {
			t.Errorf("the error shows the endpoint's password: %v", err)
		}
	}
}

func TestOTLPExporterGivesUpWithinItsTimeout(t *testing.T) {
	t.Parallel()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	dead := ln.Addr().String()
	ln.Close() // nothing listens: every try is refused
	e, err := newOTLPExporter(env(map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://" + dead, "OTEL_EXPORTER_OTLP_TIMEOUT": "300"}))
	if err != nil {
		t.Fatal(err)
	}
	reg := prometheus.NewPedanticRegistry()
	e.counts = newSpanCounts(reg)
	start := time.Now()
	err = e.ExportSpans(context.Background(), oneSpan())
	if err == nil || !strings.Contains(err.Error(), "traces export to http://"+dead+"/v1/traces") || time.Since(start) > 5*time.Second {
		t.Errorf("after %v: %v", time.Since(start), err)
	}
	// The spans given up on are counted: the operator sees traces with holes.
	if err := testutil.GatherAndCompare(reg, strings.NewReader(`# HELP partnerapi_trace_spans_dropped_total Spans given up on: their export failed after its retries (the collector unreachable, refusing or too slow).
# TYPE partnerapi_trace_spans_dropped_total counter
partnerapi_trace_spans_dropped_total 1
# HELP partnerapi_trace_spans_exported_total Spans sent to the OTLP collector.
# TYPE partnerapi_trace_spans_exported_total counter
partnerapi_trace_spans_exported_total 0
`)); err != nil {
		t.Error(err)
	}
	e.Shutdown(context.Background())
	if err := e.ExportSpans(context.Background(), oneSpan()); err == nil {
		t.Error("a shut-down exporter still exports")
	}
}

func TestOTLPExporterRefusesAMisconfiguration(t *testing.T) {
	t.Parallel()
	for _, vars := range []map[string]string{
		{"OTEL_EXPORTER_OTLP_ENDPOINT": "collector:4318"}, // no scheme
		{"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "grpc://collector:4317"},
		{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://c:4318", "OTEL_EXPORTER_OTLP_TIMEOUT": "10s"},
		{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://c:4318", "OTEL_EXPORTER_OTLP_COMPRESSION": "zstd"},
		{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://c:4317", "OTEL_EXPORTER_OTLP_PROTOCOL": "grpc"},
		{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://c:4318", "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL": "http/json"},
		{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://c:4318", "OTEL_EXPORTER_OTLP_HEADERS": "authorization"},
		{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://c:4318", "OTEL_EXPORTER_OTLP_TRACES_HEADERS": "authorization=Bearer%zzsecret"},
	} {
		_, err := newOTLPExporter(env(vars))
		if err == nil {
			t.Errorf("%v: accepted", vars)
		} else if strings.Contains(err.Error(), "secret") {
			t.Errorf("the error repeats a header's value: %v", err)
		}
	}
}
