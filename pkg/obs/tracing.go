package obs

import (
	"context"
	"net/http"

	"go.opentelemetry.io/contrib/instrumentation/net/http/otelhttp"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"

	"github.com/partnerpay/api/pkg/environment"
)

// Tracing is a binary's OpenTelemetry set-up, passed to what needs it
// rather than installed globally: W3C trace context in and out of every
// server and client, and spans exported over OTLP when an endpoint is set.
type Tracing struct {
	Provider   trace.TracerProvider
	Propagator propagation.TextMapPropagator
	shutdown   func(context.Context) error
}

// NewTracing exports spans over OTLP/HTTP when OTEL_EXPORTER_OTLP_ENDPOINT
// (or OTEL_EXPORTER_OTLP_TRACES_ENDPOINT) is set. Otherwise nothing is
// recorded or exported, and nothing is logged, but trace context still
// passes through, so a caller's trace continues downstream.
func NewTracing(ctx context.Context, service string, env environment.Name, getenv func(string) string) (*Tracing, error) {
	t := &Tracing{
		Provider:   noop.NewTracerProvider(),
		Propagator: propagation.TraceContext{},
		shutdown:   func(context.Context) error { return nil },
	}
	if getenv("OTEL_EXPORTER_OTLP_ENDPOINT") == "" && getenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT") == "" {
		return t, nil
	}
	exp, err := otlptracehttp.New(ctx) // reads the OTEL_EXPORTER_OTLP_* variables
	if err != nil {
		return nil, err
	}
	res := resource.NewSchemaless(
		attribute.String("service.name", service),
		attribute.String("service.namespace", Namespace),
		attribute.String("deployment.environment.name", string(env)),
	)
	tp := sdktrace.NewTracerProvider(sdktrace.WithBatcher(exp), sdktrace.WithResource(res))
	t.Provider, t.shutdown = tp, tp.Shutdown
	return t, nil
}

// NewTracingWith uses an existing provider (tests record spans in memory).
func NewTracingWith(tp trace.TracerProvider) *Tracing {
	return &Tracing{Provider: tp, Propagator: propagation.TraceContext{}, shutdown: func(context.Context) error { return nil }}
}

// Handler starts a server span for each request, continuing the caller's
// trace. Once the request is routed, the span is named after the route
// template ("POST /v1/fiat/accounts"), never the raw path.
func (t *Tracing) Handler(h http.Handler, service string) http.Handler {
	return otelhttp.NewHandler(h, service,
		otelhttp.WithTracerProvider(t.Provider),
		otelhttp.WithPropagators(t.Propagator),
		otelhttp.WithSpanNameFormatter(func(_ string, r *http.Request) string {
			if r.Pattern != "" {
				return r.Pattern
			}
			return Method(r.Method)
		}),
	)
}

// Transport starts a client span for each outgoing call and sends the trace
// context along.
func (t *Tracing) Transport(rt http.RoundTripper) http.RoundTripper {
	return otelhttp.NewTransport(rt,
		otelhttp.WithTracerProvider(t.Provider),
		otelhttp.WithPropagators(t.Propagator),
	)
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
