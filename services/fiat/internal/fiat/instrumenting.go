package fiat

import (
	"context"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/partnerpay/api/pkg/obs"
	"github.com/partnerpay/api/pkg/partner"
)

// InstrumentingMiddleware counts operations by outcome
// (partnerapi_fiat_operations_total).
func InstrumentingMiddleware(reg prometheus.Registerer) Middleware {
	ops := obs.NewOperations(reg, "fiat")
	return func(next Service) Service { return &instrumenting{next: next, ops: ops} }
}

type instrumenting struct {
	next Service
	ops  *obs.Operations
}

func (m *instrumenting) CreateAccount(ctx context.Context, c partner.Caller, req AccountRequest) (Account, error) {
	out, err := m.next.CreateAccount(ctx, c, req)
	m.ops.Count("create_account", err)
	return out, err
}

func (m *instrumenting) CreateVirtualAccount(ctx context.Context, c partner.Caller, req VirtualAccountRequest) (VirtualAccount, error) {
	out, err := m.next.CreateVirtualAccount(ctx, c, req)
	m.ops.Count("create_virtual_account", err)
	return out, err
}

func (m *instrumenting) Status(ctx context.Context, c partner.Caller, req StatusRequest) (FundingStatus, error) {
	out, err := m.next.Status(ctx, c, req)
	m.ops.Count("status", err)
	return out, err
}

func (m *instrumenting) SandboxPayin(ctx context.Context, c partner.Caller, req PayinRequest) (Payin, error) {
	out, err := m.next.SandboxPayin(ctx, c, req)
	m.ops.Count("sandbox_payin", err)
	return out, err
}

func (m *instrumenting) SandboxIdentity(ctx context.Context, c partner.Caller, req IdentityRequest) (Account, error) {
	out, err := m.next.SandboxIdentity(ctx, c, req)
	m.ops.Count("sandbox_identity", err)
	return out, err
}
