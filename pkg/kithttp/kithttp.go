// Package kithttp is the HTTP transport glue every go-kit service shares: the
// single error encoder that maps *envelope.Error to the wire (and logs
// everything else in full), the JSON response encoder, and the wrapping that
// every service handler gets (environment stamp, internal token, 404s in the
// envelope).
package kithttp

import (
	"context"
	"encoding/json"
	"log/slog"
	"net/http"
	"strconv"
	"time"

	httptransport "github.com/go-kit/kit/transport/http"

	"github.com/partnerpay/api/pkg/envelope"
	"github.com/partnerpay/api/pkg/environment"
	"github.com/partnerpay/api/pkg/obs"
	"github.com/partnerpay/api/pkg/partner"
	"github.com/partnerpay/api/pkg/serve"
)

type requestIDKey struct{}

// RequestID is the X-Request-Id of the request ctx belongs to.
func RequestID(ctx context.Context) string {
	id, _ := ctx.Value(requestIDKey{}).(string)
	return id
}

// ServerOptions are the go-kit server options every endpoint uses.
func ServerOptions(log *slog.Logger) []httptransport.ServerOption {
	return []httptransport.ServerOption{
		httptransport.ServerBefore(func(ctx context.Context, r *http.Request) context.Context {
			return context.WithValue(ctx, requestIDKey{}, r.Header.Get(partner.HeaderRequestID))
		}),
		httptransport.ServerErrorEncoder(ErrorEncoder(log)),
	}
}

// ErrorEncoder writes err as the envelope (without environment: the gateway
// stamps it). An error that is not an *envelope.Error is logged in full and
// answered as 500 internal.
func ErrorEncoder(log *slog.Logger) httptransport.ErrorEncoder {
	return func(ctx context.Context, err error, w http.ResponseWriter) {
		e, known := envelope.From(err)
		if !known {
			log.ErrorContext(ctx, "internal error", "err", err, "request_id", RequestID(ctx), "trace_id", obs.TraceID(ctx))
		}
		w.Header().Set(partner.HeaderErrorCode, e.Code)
		envelope.Write(w, "", e)
	}
}

// EncodeJSON writes a 200 with response as compact JSON.
func EncodeJSON(_ context.Context, w http.ResponseWriter, response any) error {
	return WriteJSON(w, http.StatusOK, response)
}

// WriteJSON writes v as compact JSON with status.
func WriteJSON(w http.ResponseWriter, status int, v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	h := w.Header()
	h.Set("Content-Type", "application/json")
	h.Set("Content-Length", strconv.Itoa(len(b)))
	h.Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	_, err = w.Write(b)
	return err
}

// Wrap is the outside of every service handler: GET /health, the
// X-Environment stamp on every answer, the internal token on everything else,
// and a 404 not_found envelope for anything mux does not route.
func Wrap(mux *http.ServeMux, env environment.Name, token string) http.Handler {
	mux.HandleFunc("GET /health", serve.Health)
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set(partner.HeaderErrorCode, envelope.CodeNotFound)
		envelope.Write(w, "", envelope.NotFound())
	})
	guarded := partner.RequireInternalToken(token, mux, "/health")
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set(environment.Header, string(env))
		guarded.ServeHTTP(w, r)
	})
}

// LogCall writes a service operation's log line: the given attributes, then
// the wire code of err ("" when none), the request id, the trace id and the
// duration since start. Callers pass ids only, never personal data.
func LogCall(ctx context.Context, log *slog.Logger, msg string, err error, start time.Time, attrs ...slog.Attr) {
	attrs = append(attrs,
		slog.String("code", envelope.CodeOf(err)),
		slog.String("request_id", RequestID(ctx)),
		slog.String("trace_id", obs.TraceID(ctx)),
		slog.Float64("duration_ms", float64(time.Since(start).Microseconds())/1000))
	log.LogAttrs(ctx, slog.LevelInfo, msg, attrs...)
}
