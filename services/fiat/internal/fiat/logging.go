package fiat

import (
	"context"
	"log/slog"
	"time"

	"github.com/partnerpay/api/pkg/kithttp"
	"github.com/partnerpay/api/pkg/partner"
)

// Middleware decorates a Service.
type Middleware func(Service) Service

// LoggingMiddleware logs each operation with key id, record ids and outcome.
// Never an email, a name, a wallet, an IBAN or an amount: personal data
// stays out of logs.
func LoggingMiddleware(log *slog.Logger) Middleware {
	return func(next Service) Service { return &logging{next: next, log: log} }
}

type logging struct {
	next Service
	log  *slog.Logger
}

func (l *logging) line(ctx context.Context, op string, c partner.Caller, err error, start time.Time, attrs ...slog.Attr) {
	kithttp.LogCall(ctx, l.log, op, err, start, append(attrs, slog.String("key_id", c.KeyID))...)
}

func (l *logging) CreateAccount(ctx context.Context, c partner.Caller, req AccountRequest) (out Account, err error) {
	defer func(start time.Time) {
		l.line(ctx, "account", c, err, start, slog.String("account_id", out.AccountID), slog.String("status", out.Status))
	}(time.Now())
	return l.next.CreateAccount(ctx, c, req)
}

func (l *logging) CreateVirtualAccount(ctx context.Context, c partner.Caller, req VirtualAccountRequest) (out VirtualAccount, err error) {
	defer func(start time.Time) {
		l.line(ctx, "virtual account", c, err, start, slog.String("account_id", req.AccountID),
			slog.String("virtual_account_id", out.VirtualAccountID), slog.String("status", out.Status))
	}(time.Now())
	return l.next.CreateVirtualAccount(ctx, c, req)
}

func (l *logging) Status(ctx context.Context, c partner.Caller, req StatusRequest) (out FundingStatus, err error) {
	defer func(start time.Time) {
		l.line(ctx, "funding status", c, err, start, slog.String("virtual_account_id", req.VirtualAccountID), slog.String("status", out.Status))
	}(time.Now())
	return l.next.Status(ctx, c, req)
}

func (l *logging) SandboxPayin(ctx context.Context, c partner.Caller, req PayinRequest) (out Payin, err error) {
	defer func(start time.Time) {
		l.line(ctx, "sandbox payin", c, err, start, slog.String("virtual_account_id", req.VirtualAccountID), slog.String("transaction_id", out.TransactionID))
	}(time.Now())
	return l.next.SandboxPayin(ctx, c, req)
}

func (l *logging) SandboxIdentity(ctx context.Context, c partner.Caller, req IdentityRequest) (out Account, err error) {
	defer func(start time.Time) {
		l.line(ctx, "sandbox identity", c, err, start, slog.String("account_id", req.AccountID), slog.String("status", out.Status))
	}(time.Now())
	return l.next.SandboxIdentity(ctx, c, req)
}
