package obs

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"strconv"

	"github.com/prometheus/client_golang/prometheus"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	semconv "go.opentelemetry.io/otel/semconv/v1.40.0"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"

	"github.com/partnerpay/api/pkg/config"
	"github.com/partnerpay/api/pkg/environment"
)

// Tracing is a binary's OpenTelemetry set-up, passed to what needs it
// rather than installed globally: W3C trace context in and out of every
// server and client, and spans exported over OTLP when an endpoint is set.
type Tracing struct {
	Provider   trace.TracerProvider
	Propagator propagation.TextMapPropagator
	shutdown   func(context.Context) error
	// recording is false without an exporter: then no span is made at all,
	// and only the caller's trace context is carried: into the request's
	// context (logs' trace_id) and onward.
	recording bool
}

// Config is the tracing part of a binary's configuration (config.Load):
// the standard OpenTelemetry variables, traces-specific ones winning over
// the general ones (the OTLP exporter specification).
type Config struct {
	Endpoint          string         `env:"OTEL_EXPORTER_OTLP_ENDPOINT"`
	TracesEndpoint    string         `env:"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"`
	Headers           config.Private `env:"OTEL_EXPORTER_OTLP_HEADERS"`
	TracesHeaders     config.Private `env:"OTEL_EXPORTER_OTLP_TRACES_HEADERS"`
	Timeout           string         `env:"OTEL_EXPORTER_OTLP_TIMEOUT"` // milliseconds
	TracesTimeout     string         `env:"OTEL_EXPORTER_OTLP_TRACES_TIMEOUT"`
	Compression       string         `env:"OTEL_EXPORTER_OTLP_COMPRESSION"`
	TracesCompression string         `env:"OTEL_EXPORTER_OTLP_TRACES_COMPRESSION"`
	Protocol          string         `env:"OTEL_EXPORTER_OTLP_PROTOCOL"`
	TracesProtocol    string         `env:"OTEL_EXPORTER_OTLP_TRACES_PROTOCOL"`
	// PEM files: the CA the collector's certificate is checked against
	// (instead of the system's), and this process's client certificate and
	// key, for a collector that asks for one (mutual TLS).
	Certificate             string `env:"OTEL_EXPORTER_OTLP_CERTIFICATE"`
	TracesCertificate       string `env:"OTEL_EXPORTER_OTLP_TRACES_CERTIFICATE"`
	ClientCertificate       string `env:"OTEL_EXPORTER_OTLP_CLIENT_CERTIFICATE"`
	TracesClientCertificate string `env:"OTEL_EXPORTER_OTLP_TRACES_CLIENT_CERTIFICATE"`
	ClientKey               string `env:"OTEL_EXPORTER_OTLP_CLIENT_KEY"`
	TracesClientKey         string `env:"OTEL_EXPORTER_OTLP_TRACES_CLIENT_KEY"`
	// The share of traces recorded, 0 to 1.
	SamplerArg float64 `env:"OTEL_TRACES_SAMPLER_ARG, default=1"`
}

// Validate checks the share; the exporter's settings are checked when it
// is built.
func (c Config) Validate() error {
	if c.SamplerArg < 0 || c.SamplerArg > 1 {
		return fmt.Errorf("OTEL_TRACES_SAMPLER_ARG must be a share from 0 to 1, not %v", c.SamplerArg)
	}
	return nil
}

// pick is the traces-specific setting when set, else the general one.
func pick[T ~string](traces, general T) T {
	if traces != "" {
		return traces
	}
	return general
}

// NewTracing exports spans over OTLP/HTTP when cfg has an endpoint
// (OTEL_EXPORTER_OTLP_ENDPOINT or OTEL_EXPORTER_OTLP_TRACES_ENDPOINT).
// Otherwise nothing is recorded or exported, and nothing is logged, but
// trace context still passes through, so a caller's trace continues
// downstream. reg, when not nil, gets the count of spans exported and
// dropped.
//
// What is recorded is our decision, never the caller's: a partner's
// traceparent is the parent of our spans (its trace id is in our logs), but
// its sampled flag decides nothing. Every binary samples the share
// OTEL_TRACES_SAMPLER_ARG (0 to 1; default 1, every request) by trace id,
// whatever a remote parent says, so the gateway and the services it calls
// take the same decision for the same trace; spans within a process follow
// their parent.
func NewTracing(ctx context.Context, service string, env environment.Name, cfg Config, reg prometheus.Registerer) (*Tracing, error) {
	t := &Tracing{
		Provider:   noop.NewTracerProvider(),
		Propagator: propagation.TraceContext{},
		shutdown:   func(context.Context) error { return nil },
	}
	if cfg.Endpoint == "" && cfg.TracesEndpoint == "" {
		return t, nil
	}
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	exp, err := newOTLPExporter(cfg)
	if err != nil {
		return nil, err
	}
	if reg != nil {
		exp.counts = newSpanCounts(reg)
	}
	version, _ := buildVersion()
	host, _ := os.Hostname()
	res := resource.NewSchemaless(
		attribute.String("service.name", service),
		attribute.String("service.namespace", Namespace),
		attribute.String("service.version", version),
		// The pod (or host) and process: which replica made the span.
		attribute.String("service.instance.id", host+"/"+strconv.Itoa(os.Getpid())),
		attribute.String("deployment.environment.name", string(env)),
	)
	tp := sdktrace.NewTracerProvider(sdktrace.WithBatcher(exp), sdktrace.WithResource(res), sdktrace.WithSampler(OwnSampler(cfg.SamplerArg)))
	t.Provider, t.shutdown, t.recording = tp, tp.Shutdown, true
	return t, nil
}

// OwnSampler records the share of traces given, chosen by trace id: a span
// with a remote parent (a partner's traceparent, or one of our services
// calling another) is sampled by its trace id whatever the parent's flag,
// a span with a local parent follows it.
func OwnSampler(share float64) sdktrace.Sampler {
	own := sdktrace.TraceIDRatioBased(share)
	return sdktrace.ParentBased(own, sdktrace.WithRemoteParentSampled(own), sdktrace.WithRemoteParentNotSampled(own))
}

// Recording says whether spans are made at all (an exporter is set).
func (t *Tracing) Recording() bool { return t.recording }

// NewTracingWith uses an existing provider (tests record spans in memory).
func NewTracingWith(tp trace.TracerProvider) *Tracing {
	return &Tracing{Provider: tp, Propagator: propagation.TraceContext{}, shutdown: func(context.Context) error { return nil }, recording: true}
}

// Handler starts a server span for each request, continuing the caller's
// trace. Once the request is routed, the span is named after the route
// template ("POST /v1/fiat/accounts"), never the raw path.
//
// The span is ours, not otelhttp's: otelhttp wraps the body and the writer
// and builds a dozen attributes per request, which cost the gateway about
// 27 µs a request even for spans that are never recorded
// (BenchmarkProductionPath). We keep the attributes an operator searches by.
func (t *Tracing) Handler(h http.Handler, service string) http.Handler {
	if !t.recording {
		return carryContext(h, t.Propagator)
	}
	tracer := t.Provider.Tracer(instrumentation, trace.WithSchemaURL(semconv.SchemaURL))
	untraced := carryContext(h, t.Propagator)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if isHealth(r) {
			untraced.ServeHTTP(w, r)
			return
		}
		ctx := t.Propagator.Extract(r.Context(), propagation.HeaderCarrier(r.Header))
		ctx, span := tracer.Start(ctx, Method(r.Method), trace.WithSpanKind(trace.SpanKindServer))
		defer span.End()
		if !span.IsRecording() {
			h.ServeHTTP(w, r.WithContext(ctx))
			return
		}
		sw := &StatusWriter{ResponseWriter: w}
		r = r.WithContext(ctx)
		h.ServeHTTP(sw, r) // the router sets r.Pattern
		status := sw.Status()
		attrs := []attribute.KeyValue{
			semconv.HTTPRequestMethodKey.String(Method(r.Method)),
			semconv.HTTPResponseStatusCode(status),
		}
		if r.Pattern != "" {
			span.SetName(r.Pattern)
			attrs = append(attrs, semconv.HTTPRoute(r.Pattern))
		}
		span.SetAttributes(attrs...)
		if status >= 500 {
			span.SetStatus(codes.Error, "")
		}
	})
}

// Transport starts a client span for each outgoing call and sends the trace
// context along. The span ends when the answer's header has arrived.
func (t *Tracing) Transport(rt http.RoundTripper) http.RoundTripper {
	if !t.recording {
		return injectContext{next: rt, p: t.Propagator}
	}
	return clientSpans{next: rt, p: t.Propagator, tracer: t.Provider.Tracer(instrumentation, trace.WithSchemaURL(semconv.SchemaURL))}
}

const instrumentation = "github.com/partnerpay/api/pkg/obs"

// isHealth: a health probe (the gateway asks each service's GET /health
// every second, a load balancer the gateway's) is neither a span of its
// own nor a trace: probes were four spans in five, and said nothing.
func isHealth(r *http.Request) bool {
	return r.URL.Path == "/health" && r.Method == http.MethodGet
}

type clientSpans struct {
	next   http.RoundTripper
	p      propagation.TextMapPropagator
	tracer trace.Tracer
}

// ClientSpanName names the client span of the calls made with ctx (an
// operation of a provider's API, say): ids in a URL path must not name a
// span.
func ClientSpanName(ctx context.Context, name string) context.Context {
	return context.WithValue(ctx, clientSpanKey{}, name)
}

type clientSpanKey struct{}

// clientSpanName is a client span's name: the route a proxied request
// matched (the gateway's forward: its outgoing request is a clone of the
// partner's, Pattern included), else the caller's name for the call, else
// the method alone.
func clientSpanName(r *http.Request) string {
	if r.Pattern != "" {
		return r.Pattern
	}
	if name, ok := r.Context().Value(clientSpanKey{}).(string); ok {
		return Method(r.Method) + " " + name
	}
	return Method(r.Method)
}

func (c clientSpans) RoundTrip(r *http.Request) (*http.Response, error) {
	if isHealth(r) {
		return c.next.RoundTrip(r)
	}
	ctx, span := c.tracer.Start(r.Context(), clientSpanName(r), trace.WithSpanKind(trace.SpanKindClient))
	defer span.End()
	r = r.Clone(ctx) // a RoundTripper must not change its request
	c.p.Inject(ctx, propagation.HeaderCarrier(r.Header))
	resp, err := c.next.RoundTrip(r)
	if !span.IsRecording() {
		return resp, err
	}
	span.SetAttributes(
		semconv.HTTPRequestMethodKey.String(Method(r.Method)),
		semconv.ServerAddress(r.URL.Hostname()),
		semconv.URLPath(r.URL.Path),
	)
	if err != nil {
		span.SetAttributes(semconv.ErrorType(err))
		span.SetStatus(codes.Error, "")
		return resp, err
	}
	span.SetAttributes(semconv.HTTPResponseStatusCode(resp.StatusCode))
	if resp.StatusCode >= 400 {
		span.SetStatus(codes.Error, "")
	}
	return resp, nil
}

// carryContext puts a caller's trace context into the request's context,
// when there is one; nothing is recorded.
func carryContext(h http.Handler, p propagation.TextMapPropagator) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if len(r.Header["Traceparent"]) > 0 {
			r = r.WithContext(p.Extract(r.Context(), propagation.HeaderCarrier(r.Header)))
		}
		h.ServeHTTP(w, r)
	})
}

// injectContext sends the trace context of the request's context along,
// unless the request already carries one (a proxied request keeps its
// caller's header).
type injectContext struct {
	next http.RoundTripper
	p    propagation.TextMapPropagator
}

func (i injectContext) RoundTrip(r *http.Request) (*http.Response, error) {
	if len(r.Header["Traceparent"]) == 0 {
		r = i.inject(r)
	}
	return i.next.RoundTrip(r)
}

// inject is r with the trace context of its context, if it has one (a
// copy: a RoundTripper must not change its request). Out of line, so its
// locals are not on the stack of a caller waiting for the answer.
//
//go:noinline
func (i injectContext) inject(r *http.Request) *http.Request {
	if !trace.SpanContextFromContext(r.Context()).IsValid() {
		return r
	}
	r = r.Clone(r.Context())
	i.p.Inject(r.Context(), propagation.HeaderCarrier(r.Header))
	return r
}

// Shutdown flushes spans not yet exported.
func (t *Tracing) Shutdown(ctx context.Context) error { return t.shutdown(ctx) }

// TraceID is the trace id of ctx's span, "" when there is none: for logs.
func TraceID(ctx context.Context) string {
	sc := trace.SpanContextFromContext(ctx)
	if !sc.HasTraceID() {
		return ""
	}
	return sc.TraceID().String()
}
