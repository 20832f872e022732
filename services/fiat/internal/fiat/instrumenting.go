package fiat

import (
	"context"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/partnerpay/api/pkg/envelope"
	"github.com/partnerpay/api/pkg/obs"
	"github.com/partnerpay/api/pkg/partner"
)

// InstrumentingMiddleware counts operations by outcome, and funding polls by
// the status they found.
func InstrumentingMiddleware(reg prometheus.Registerer) Middleware {
	ops := prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: obs.Namespace, Subsystem: "fiat", Name: "operations_total",
		Help: "Fiat operations, by operation and outcome (ok or the wire error code).",
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

func (m *instrumenting) CreateAccount(ctx context.Context, c partner.Caller, req AccountRequest) (Account, error) {
	out, err := m.next.CreateAccount(ctx, c, req)
	m.count("create_account", err)
	return out, err
}

func (m *instrumenting) CreateVirtualAccount(ctx context.Context, c partner.Caller, req VirtualAccountRequest) (VirtualAccount, error) {
	out, err := m.next.CreateVirtualAccount(ctx, c, req)
	m.count("create_virtual_account", err)
	return out, err
}

func (m *instrumenting) Status(ctx context.Context, c partner.Caller, req StatusRequest) (FundingStatus, error) {
	out, err := m.next.Status(ctx, c, req)
	m.count("status", err)
	return out, err
}

func (m *instrumenting) SandboxPayin(ctx context.Context, c partner.Caller, req PayinRequest) (Payin, error) {
	out, err := m.next.SandboxPayin(ctx, c, req)
	m.count("sandbox_payin", err)
	return out, err
}

func (m *instrumenting) SandboxIdentity(ctx context.Context, c partner.Caller, req IdentityRequest) (Account, error) {
	out, err := m.next.SandboxIdentity(ctx, c, req)
	m.count("sandbox_identity", err)
	return out, err
}
