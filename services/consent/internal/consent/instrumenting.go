package consent

import (
	"context"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/partnerpay/api/pkg/envelope"
	"github.com/partnerpay/api/pkg/obs"
	"github.com/partnerpay/api/pkg/partner"
)

// InstrumentingMiddleware counts operations by outcome.
func InstrumentingMiddleware(reg prometheus.Registerer) Middleware {
	ops := prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: obs.Namespace, Subsystem: "consent", Name: "operations_total",
		Help: "Consent operations, by operation and outcome (ok or the wire error code).",
	}, []string{"operation", "outcome"})
	reg.MustRegister(ops)
	return func(next Service) Service { return &instrumenting{next: next, ops: ops} }
}

type instrumenting struct {
	next Service
	ops  *prometheus.CounterVec
}

func (m *instrumenting) count(op string, err error) {
	outcome := "ok"
	if err != nil {
		e, _ := envelope.From(err)
		outcome = e.Code
	}
	m.ops.WithLabelValues(op, outcome).Inc()
}

func (m *instrumenting) CreateSession(ctx context.Context, owner, accountID, customerID string) (string, error) {
	id, err := m.next.CreateSession(ctx, owner, accountID, customerID)
	m.count("create_session", err)
	return id, err
}

func (m *instrumenting) Link(ctx context.Context, c partner.Caller, req LinkRequest) (Link, error) {
	out, err := m.next.Link(ctx, c, req)
	m.count("link", err)
	return out, err
}

func (m *instrumenting) Status(ctx context.Context, c partner.Caller, req StatusRequest) (Status, error) {
	out, err := m.next.Status(ctx, c, req)
	m.count("status", err)
	return out, err
}

func (m *instrumenting) Return(ctx context.Context, state, result string) (Returned, error) {
	out, err := m.next.Return(ctx, state, result)
	m.count("return", err)
	return out, err
}
