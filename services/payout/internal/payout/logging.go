package payout

import (
	"context"
	"log/slog"
	"time"

	"github.com/partnerpay/api/pkg/kithttp"
	"github.com/partnerpay/api/pkg/partner"
)

// Middleware decorates a Service.
type Middleware func(Service) Service

// LoggingMiddleware logs each quote: key id, chain, outcome and duration.
// Reference reads are not logged; the gateway's line covers them.
func LoggingMiddleware(log *slog.Logger) Middleware {
	return func(next Service) Service { return &logging{next: next, log: log} }
}

type logging struct {
	next Service
	log  *slog.Logger
}

func (l *logging) Quote(ctx context.Context, caller partner.Caller, req QuoteRequest) (q Quote, err error) {
	defer func(start time.Time) {
		kithttp.LogCall(ctx, l.log, "quote", err, start,
			slog.String("key_id", caller.KeyID), slog.Int64("chain", req.Chain), slog.String("rail", q.Rail))
	}(time.Now())
	return l.next.Quote(ctx, caller, req)
}

// Execute logs key id, quote id, payout id and outcome; never the
// beneficiary, which is personal data.
func (l *logging) Execute(ctx context.Context, caller partner.Caller, req ExecuteRequest) (p Payout, err error) {
	defer func(start time.Time) {
		kithttp.LogCall(ctx, l.log, "payout", err, start,
			slog.String("key_id", caller.KeyID), slog.String("quote_id", req.QuoteID), slog.String("payout_id", p.PayoutID))
	}(time.Now())
	return l.next.Execute(ctx, caller, req)
}

func (l *logging) Config(ctx context.Context, c partner.Caller) Config { return l.next.Config(ctx, c) }
func (l *logging) Currencies(ctx context.Context) Currencies           { return l.next.Currencies(ctx) }
func (l *logging) Limits(ctx context.Context) Limits                   { return l.next.Limits(ctx) }
func (l *logging) Countries(ctx context.Context) Countries             { return l.next.Countries(ctx) }
