package obs

import (
	"context"
	"log/slog"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/partnerpay/api/pkg/envelope"
)

// Operations measures a service's operations: how many, by outcome ("ok",
// or the wire code of the error; "internal" for anything unexpected), and
// how long each took. Operation names and wire codes are closed sets, so
// nothing a client sends can make a series.
type Operations struct {
	count    *prometheus.CounterVec
	duration *prometheus.HistogramVec
}

// NewOperations registers partnerapi_<subsystem>_operations_total and
// partnerapi_<subsystem>_operation_duration_seconds on reg.
func NewOperations(reg prometheus.Registerer, subsystem string) *Operations {
	o := &Operations{
		count: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: Namespace, Subsystem: subsystem, Name: "operations_total",
			Help: "Operations of the " + subsystem + " service, by operation and outcome (ok or the wire error code).",
		}, []string{"operation", "outcome"}),
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Namespace: Namespace, Subsystem: subsystem, Name: "operation_duration_seconds",
			Help:    "Time an operation of the " + subsystem + " service took, by operation.",
			Buckets: []float64{.0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5},
		}, []string{"operation"}),
	}
	reg.MustRegister(o.count, o.duration)
	return o
}

// Declare makes operation's series exist before its first call (ok count
// and duration at zero), so a dashboard or an alert sees a quiet operation
// as 0, not as no data.
func (o *Operations) Declare(operation string) {
	o.count.WithLabelValues(operation, "ok")
	o.duration.WithLabelValues(operation)
}

// Observe records one operation that ended with err after d.
func (o *Operations) Observe(operation string, err error, d time.Duration) {
	o.count.WithLabelValues(operation, Outcome(err)).Inc()
	o.duration.WithLabelValues(operation).Observe(d.Seconds())
}

// Outcome is the label of an operation's result: "ok" or its wire code.
func Outcome(err error) string {
	if code := envelope.CodeOf(err); code != "" {
		return string(code)
	}
	return "ok"
}

// Loggable is a request or answer that says what of it may be logged: ids
// only, never personal data.
type Loggable interface {
	LogAttrs() []slog.Attr
}

type requestIDKey struct{}

// WithRequestID carries a request's X-Request-Id in ctx, for log lines.
func WithRequestID(ctx context.Context, id string) context.Context {
	return context.WithValue(ctx, requestIDKey{}, id)
}

// RequestID is the X-Request-Id of the request ctx belongs to.
func RequestID(ctx context.Context) string {
	id, _ := ctx.Value(requestIDKey{}).(string)
	return id
}

// LogCall writes an operation's log line: the given attributes, then the
// wire code of err ("" when none), the request id, the trace id and the
// duration since start. Callers pass ids only, never personal data.
func LogCall(ctx context.Context, log *slog.Logger, msg string, err error, start time.Time, attrs ...slog.Attr) {
	attrs = append(attrs,
		slog.String("code", string(envelope.CodeOf(err))),
		slog.String("request_id", RequestID(ctx)),
		slog.String("trace_id", TraceID(ctx)),
		slog.Int64("duration_us", time.Since(start).Microseconds()))
	LogLine(ctx, log, slog.LevelInfo, msg, attrs...)
}

// LogLine is log.LogAttrs without its look-up of the caller (runtime.Callers,
// about a quarter of a request line's cost under load): no handler of ours
// writes the source, so the record carries none.
func LogLine(ctx context.Context, log *slog.Logger, level slog.Level, msg string, attrs ...slog.Attr) {
	h := log.Handler()
	if !h.Enabled(ctx, level) {
		return
	}
	r := slog.NewRecord(time.Now(), level, msg, 0)
	r.AddAttrs(attrs...)
	_ = h.Handle(ctx, r)
}
