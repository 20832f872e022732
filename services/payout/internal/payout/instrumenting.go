package payout

import (
	"context"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/partnerpay/api/pkg/envelope"
	"github.com/partnerpay/api/pkg/obs"
	"github.com/partnerpay/api/pkg/partner"
)

// InstrumentingMiddleware counts quotes by outcome (the wire code, "ok" when
// priced) and times them.
func InstrumentingMiddleware(reg prometheus.Registerer) Middleware {
	quotes := prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: obs.Namespace, Subsystem: "payout", Name: "quotes_total",
		Help: "Bank payout quotes, by outcome (ok or the wire error code).",
	}, []string{"outcome"})
	duration := prometheus.NewHistogram(prometheus.HistogramOpts{
		Namespace: obs.Namespace, Subsystem: "payout", Name: "quote_duration_seconds",
		Help:    "Time to price and store a bank payout quote.",
		Buckets: []float64{.0005, .001, .0025, .005, .01, .025, .05, .1, .25},
	})
	payouts := prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: obs.Namespace, Subsystem: "payout", Name: "executions_total",
		Help: "Bank payout executions, by outcome (ok or the wire error code).",
	}, []string{"outcome"})
	reg.MustRegister(quotes, duration, payouts)
	return func(next Service) Service {
		return &instrumenting{next: next, quotes: quotes, duration: duration, payouts: payouts}
	}
}

type instrumenting struct {
	next     Service
	quotes   *prometheus.CounterVec
	duration prometheus.Histogram
	payouts  *prometheus.CounterVec
}

func outcome(err error) string {
	if code := envelope.CodeOf(err); code != "" {
		return code
	}
	return "ok"
}

func (m *instrumenting) Execute(ctx context.Context, caller partner.Caller, req ExecuteRequest) (Payout, error) {
	p, err := m.next.Execute(ctx, caller, req)
	m.payouts.WithLabelValues(outcome(err)).Inc()
	return p, err
}

func (m *instrumenting) Quote(ctx context.Context, caller partner.Caller, req QuoteRequest) (Quote, error) {
	start := time.Now()
	q, err := m.next.Quote(ctx, caller, req)
	m.quotes.WithLabelValues(outcome(err)).Inc()
	m.duration.Observe(time.Since(start).Seconds())
	return q, err
}

func (m *instrumenting) Config(ctx context.Context, c partner.Caller) Config {
	return m.next.Config(ctx, c)
}
func (m *instrumenting) Currencies(ctx context.Context) Currencies { return m.next.Currencies(ctx) }
func (m *instrumenting) Limits(ctx context.Context) Limits         { return m.next.Limits(ctx) }
func (m *instrumenting) Countries(ctx context.Context) Countries   { return m.next.Countries(ctx) }
