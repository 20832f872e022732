// Package kithttp is the go-kit shape every service shares: requests that
// carry the caller the gateway vouched for and a strictly decoded body, one
// generic endpoint constructor, the middleware that logs and measures every
// operation the same way, the single error encoder that maps
// *envelope.Error to the wire (and logs everything else in full), and the
// wrapping every service handler gets (environment stamp, internal token,
// 404s in the envelope).
package kithttp

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
	"net/url"
	"strconv"
	"time"

	"github.com/go-kit/kit/endpoint"
	httptransport "github.com/go-kit/kit/transport/http"

	"github.com/partnerpay/api/pkg/database"
	"github.com/partnerpay/api/pkg/envelope"
	"github.com/partnerpay/api/pkg/environment"
	"github.com/partnerpay/api/pkg/jsonbody"
	"github.com/partnerpay/api/pkg/obs"
	"github.com/partnerpay/api/pkg/partner"
	"github.com/partnerpay/api/pkg/serve"
)

// Request is what reaches an endpoint: who calls, and the decoded body.
type Request[T any] struct {
	Caller partner.Caller
	Body   T
}

// KeyID is the calling key's id, for the log line.
func (r Request[T]) KeyID() string { return r.Caller.KeyID }

// LogAttrs are the body's, when it says what of it may be logged.
func (r Request[T]) LogAttrs() []slog.Attr {
	if l, ok := any(r.Body).(obs.Loggable); ok {
		return l.LogAttrs()
	}
	return nil
}

// Decode reads the caller and a JSON body of type T: the decoder of every
// POST route.
func Decode[T any](_ context.Context, r *http.Request) (any, error) {
	caller, err := partner.FromRequest(r)
	if err != nil {
		return nil, err
	}
	var body T
	if err := jsonbody.Decode(r, &body); err != nil {
		return nil, err
	}
	return Request[T]{Caller: caller, Body: body}, nil
}

// DecodeCaller reads only the caller: GET routes that answer per key.
func DecodeCaller(_ context.Context, r *http.Request) (any, error) {
	caller, err := partner.FromRequest(r)
	if err != nil {
		return nil, err
	}
	return Request[struct{}]{Caller: caller}, nil
}

// DecodeQuery reads the caller and the query string of a GET route that
// takes one (the lists); a query that does not parse is 400.
func DecodeQuery(_ context.Context, r *http.Request) (any, error) {
	caller, err := partner.FromRequest(r)
	if err != nil {
		return nil, err
	}
	q, err := url.ParseQuery(r.URL.RawQuery)
	if err != nil {
		return nil, envelope.InvalidRequest("The query string does not parse: encode each parameter's value.")
	}
	return Request[url.Values]{Caller: caller, Body: q}, nil
}

// Endpoint adapts a service method that takes the caller and a body.
func Endpoint[T, R any](f func(context.Context, partner.Caller, T) (R, error)) endpoint.Endpoint {
	return func(ctx context.Context, request any) (any, error) {
		req := request.(Request[T])
		return f(ctx, req.Caller, req.Body)
	}
}

// Observer logs and measures every operation of a service the same way:
// one log line (operation, key id, the ids request and answer allow, code,
// request id, trace id, duration) and the operations metrics.
type Observer struct {
	log *slog.Logger
	ops *obs.Operations
}

// NewObserver returns the observer of a service's operations.
func NewObserver(log *slog.Logger, ops *obs.Operations) *Observer {
	return &Observer{log: log, ops: ops}
}

// Op wraps the endpoint of operation op: logged and measured.
func (o *Observer) Op(op string, e endpoint.Endpoint) endpoint.Endpoint {
	return o.wrap(op, e, true)
}

// Quiet wraps a read the gateway's request line already tells about:
// measured, not logged.
func (o *Observer) Quiet(op string, e endpoint.Endpoint) endpoint.Endpoint {
	return o.wrap(op, e, false)
}

func (o *Observer) wrap(op string, e endpoint.Endpoint, logged bool) endpoint.Endpoint {
	o.ops.Declare(op)
	return func(ctx context.Context, request any) (response any, err error) {
		defer func(start time.Time) {
			o.ops.Observe(op, err, time.Since(start))
			if !logged {
				return
			}
			var attrs []slog.Attr
			if k, ok := request.(interface{ KeyID() string }); ok {
				attrs = append(attrs, slog.String("key_id", k.KeyID()))
			}
			if l, ok := request.(obs.Loggable); ok {
				attrs = appendNew(attrs, l.LogAttrs())
			}
			if l, ok := response.(obs.Loggable); ok && err == nil {
				attrs = appendNew(attrs, l.LogAttrs())
			}
			obs.LogCall(ctx, o.log, op, err, start, attrs...)
		}(time.Now())
		return e(ctx, request)
	}
}

// appendNew appends the attributes of more whose keys attrs lacks: an
// answer that names what its request named (a status's payout id) is
// logged once, as JSON keys must be.
func appendNew(attrs, more []slog.Attr) []slog.Attr {
	n := len(attrs)
next:
	for _, a := range more {
		for _, b := range attrs[:n] {
			if a.Key == b.Key {
				continue next
			}
		}
		attrs = append(attrs, a)
	}
	return attrs
}

// ServerOptions are the go-kit server options every endpoint uses.
func ServerOptions(log *slog.Logger) []httptransport.ServerOption {
	return []httptransport.ServerOption{
		httptransport.ServerBefore(CarryRequestID),
		httptransport.ServerErrorEncoder(ErrorEncoder(log)),
	}
}

// CarryRequestID puts the gateway's request id (X-Request-Id) in the
// context for the log lines of the call: a go-kit ServerBefore.
func CarryRequestID(ctx context.Context, r *http.Request) context.Context {
	return obs.WithRequestID(ctx, r.Header.Get(partner.HeaderRequestID))
}

// Server is a go-kit server for one route, with the shared options and the
// JSON encoder.
func Server(e endpoint.Endpoint, dec httptransport.DecodeRequestFunc, log *slog.Logger) http.Handler {
	return httptransport.NewServer(e, dec, EncodeJSON, ServerOptions(log)...)
}

// ErrorEncoder writes err as the envelope (without environment: the gateway
// stamps it). An error that is not an *envelope.Error is logged in full and
// answered as 500 internal, but for a write whose outcome is not known yet
// (database.ErrOutcomeUnknown: its commit goes on) or a row read back that
// is not yet confirmed on the standby (database.ErrNotConfirmed): those are
// 409 idempotency_in_progress with Retry-After, never 500 (which says
// nothing was made) and never 200 (DESIGN §6). When the caller has gone
// (the gateway gave up on the request), there is nobody to answer and
// nothing went wrong here: one info line, no write. A creating request runs
// on past its caller, within its own time limit: when that ends, it is
// still answered.
func ErrorEncoder(log *slog.Logger) httptransport.ErrorEncoder {
	return func(ctx context.Context, err error, w http.ResponseWriter) {
		if errors.Is(ctx.Err(), context.Canceled) {
			log.InfoContext(ctx, "request abandoned by the caller", "request_id", obs.RequestID(ctx), "trace_id", obs.TraceID(ctx))
			return
		}
		if database.IsOutcomeUnknown(err) || errors.Is(err, database.ErrNotConfirmed) {
			log.WarnContext(ctx, "answered as in progress: not yet confirmed on a synchronous standby", "err", err,
				"request_id", obs.RequestID(ctx), "trace_id", obs.TraceID(ctx))
			WriteError(w, InDoubt)
			return
		}
		e, known := envelope.From(err)
		if !known {
			log.ErrorContext(ctx, "internal error", "err", err, "request_id", obs.RequestID(ctx), "trace_id", obs.TraceID(ctx))
		}
		WriteError(w, e)
	}
}

// InDoubt answers a request whose outcome is not known yet: its write
// commits (or not) on its own, and the same request, retried, learns which.
var InDoubt = envelope.New(envelope.CodeIdempotencyInProgress,
	"This request's outcome is not known yet: it is being recorded. Retry the same request (with the same Idempotency-Key, if it had one) shortly; it will not be carried out twice.")

// WriteError answers e without environment, telling the gateway its code.
// A 409 idempotency_in_progress says when to retry.
func WriteError(w http.ResponseWriter, e *envelope.Error) {
	w.Header().Set(partner.HeaderErrorCode, string(e.Code))
	if e.Code == envelope.CodeIdempotencyInProgress {
		w.Header().Set("Retry-After", "1")
	}
	envelope.Write(w, "", e)
}

// EncodeJSON writes a 200 with response as compact JSON. A failed write
// means the caller has gone: there is nothing to answer it with, so it is
// not an error (go-kit would otherwise write a second, error answer).
func EncodeJSON(_ context.Context, w http.ResponseWriter, response any) error {
	b, err := envelope.JSON(response)
	if err != nil {
		return err
	}
	writeBody(w, http.StatusOK, b)
	return nil
}

func writeBody(w http.ResponseWriter, status int, b []byte) {
	h := w.Header()
	h.Set("Content-Type", "application/json")
	h.Set("Content-Length", strconv.Itoa(len(b)))
	h.Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	_, _ = w.Write(b)
}

// Wrap is the outside of every service handler: GET /health, the
// X-Environment stamp and the gateway's call id on every answer, the
// internal token on everything else, and a 404 not_found envelope for
// anything mux does not route.
func Wrap(mux *http.ServeMux, env environment.Name, token string) http.Handler {
	mux.HandleFunc("GET /health", serve.Health)
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		WriteError(w, envelope.NotFound())
	})
	guarded := partner.RequireInternalToken(token, mux, "/health")
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h := w.Header()
		h.Set(environment.Header, string(env))
		if id := r.Header[partner.HeaderCallID]; len(id) == 1 {
			h[partner.HeaderCallID] = id
		}
		guarded.ServeHTTP(w, r)
	})
}
