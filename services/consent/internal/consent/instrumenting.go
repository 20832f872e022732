package consent

import (
	"context"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/partnerpay/api/pkg/obs"
	"github.com/partnerpay/api/pkg/partner"
)

// InstrumentingMiddleware counts operations by outcome
// (partnerapi_consent_operations_total).
func InstrumentingMiddleware(reg prometheus.Registerer) Middleware {
	ops := obs.NewOperations(reg, "consent")
	return func(next Service) Service { return &instrumenting{next: next, ops: ops} }
}

type instrumenting struct {
	next Service
	ops  *obs.Operations
}

func (m *instrumenting) CreateSession(ctx context.Context, owner, accountID, customerID string) (string, error) {
	id, err := m.next.CreateSession(ctx, owner, accountID, customerID)
	m.ops.Count("create_session", err)
	return id, err
}

func (m *instrumenting) Link(ctx context.Context, c partner.Caller, req LinkRequest) (Link, error) {
	out, err := m.next.Link(ctx, c, req)
	m.ops.Count("link", err)
	return out, err
}

func (m *instrumenting) Status(ctx context.Context, c partner.Caller, req StatusRequest) (Status, error) {
	out, err := m.next.Status(ctx, c, req)
	m.ops.Count("status", err)
	return out, err
}

func (m *instrumenting) Return(ctx context.Context, state, result string) (Returned, error) {
	out, err := m.next.Return(ctx, state, result)
	m.ops.Count("return", err)
	return out, err
}
