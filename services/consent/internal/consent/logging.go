package consent

import (
	"context"
	"log/slog"
	"time"

	"github.com/partnerpay/api/pkg/kithttp"
	"github.com/partnerpay/api/pkg/partner"
)

// Middleware decorates a Service.
type Middleware func(Service) Service

// LoggingMiddleware logs each operation with ids and outcome, never a link
// (it is a bearer capability) or a state.
func LoggingMiddleware(log *slog.Logger) Middleware {
	return func(next Service) Service { return &logging{next: next, log: log} }
}

type logging struct {
	next Service
	log  *slog.Logger
}

func (l *logging) line(ctx context.Context, op, keyID, sessionID string, err error, start time.Time) {
	kithttp.LogCall(ctx, l.log, op, err, start, slog.String("key_id", keyID), slog.String("consent_session_id", sessionID))
}

func (l *logging) CreateSession(ctx context.Context, owner, accountID, customerID string) (id string, err error) {
	defer func(start time.Time) { l.line(ctx, "consent session created", owner, id, err, start) }(time.Now())
	return l.next.CreateSession(ctx, owner, accountID, customerID)
}

func (l *logging) Link(ctx context.Context, c partner.Caller, req LinkRequest) (out Link, err error) {
	defer func(start time.Time) { l.line(ctx, "consent link", c.KeyID, req.ConsentSessionID, err, start) }(time.Now())
	return l.next.Link(ctx, c, req)
}

func (l *logging) Status(ctx context.Context, c partner.Caller, req StatusRequest) (out Status, err error) {
	defer func(start time.Time) { l.line(ctx, "consent status", c.KeyID, req.ConsentSessionID, err, start) }(time.Now())
	return l.next.Status(ctx, c, req)
}

func (l *logging) Return(ctx context.Context, state, result string) (out Returned, err error) {
	defer func(start time.Time) { l.line(ctx, "consent return", "", out.SessionID, err, start) }(time.Now())
	return l.next.Return(ctx, state, result)
}
