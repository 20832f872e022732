package events

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
	"net/url"
	"strconv"

	httptransport "github.com/go-kit/kit/transport/http"

	"github.com/partnerpay/api/pkg/database"
	"github.com/partnerpay/api/pkg/envelope"
	"github.com/partnerpay/api/pkg/feedwire"
	"github.com/partnerpay/api/pkg/kithttp"
	"github.com/partnerpay/api/pkg/partner"
)

// A service's part of GET /v1/events, which only the gateway calls: the
// gateway checks the partner's query and cursor, asks each service for a
// page after the service's place (after=), and merges the pages.

// MaxLimit is the most events a page holds.
const MaxLimit = 100

// Route adds GET /v1/events, this service's feed, to mux: measured as the
// operation "events", not logged (the gateway's request line is). A page
// is rendered (pkg/feedwire) when the request accepts it, JSON otherwise.
func (f Feed) Route(mux *http.ServeMux, db *database.DB, o *kithttp.Observer, log *slog.Logger) {
	h := handler{f, db}
	mux.Handle("GET /v1/events", httptransport.NewServer(o.Quiet("events", kithttp.Endpoint(h.page)), kithttp.DecodeQuery, encodePage,
		append(kithttp.ServerOptions(log), httptransport.ServerBefore(acceptRendered))...))
}

type renderedKey struct{}

// acceptRendered notes whether the request asks for a rendered page.
func acceptRendered(ctx context.Context, r *http.Request) context.Context {
	return context.WithValue(ctx, renderedKey{}, r.Header.Get("Accept") == feedwire.ContentType)
}

// encodePage writes a page rendered, when asked so, or as JSON.
func encodePage(ctx context.Context, w http.ResponseWriter, response any) error {
	p, ok := response.(Page)
	if rendered, _ := ctx.Value(renderedKey{}).(bool); !ok || !rendered {
		return kithttp.EncodeJSON(ctx, w, response)
	}
	b, err := p.Render()
	if err != nil {
		return err
	}
	h := w.Header()
	h.Set("Content-Type", feedwire.ContentType)
	h.Set("Content-Length", strconv.Itoa(len(b)))
	h.Set("Cache-Control", "no-store")
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write(b)
	return nil
}

type handler struct {
	feed Feed
	db   *database.DB
}

// ErrCursorExpired is the answer to a place retention has deleted past.
var ErrCursorExpired = envelope.New(envelope.CodeCursorExpired,
	"This cursor is older than the feed's 30-day retention: events after it were deleted. Start again without startingAfter, and reconcile with the lists.")

func (h handler) page(ctx context.Context, caller partner.Caller, q url.Values) (Page, error) {
	var query Query
	var err error
	if query.After, err = strconv.ParseInt(q.Get("after"), 10, 64); err != nil || query.After < 0 {
		return Page{}, envelope.InvalidRequest("after must be a place in the feed.")
	}
	if query.Limit, err = strconv.Atoi(q.Get("limit")); err != nil || query.Limit < 1 || query.Limit > MaxLimit {
		return Page{}, envelope.InvalidRequest("limit must be a whole number from 1 to 100.")
	}
	query.Type, query.ObjectID = q.Get("type"), q.Get("objectId")
	if len(query.Type) > 64 || len(query.ObjectID) > 64 {
		return Page{}, envelope.InvalidRequest("type and objectId are at most 64 characters.")
	}
	p, err := h.feed.Read(ctx, h.db, caller.KeyID, query)
	if errors.Is(err, ErrExpired) {
		return Page{}, ErrCursorExpired
	}
	return p, err
}
