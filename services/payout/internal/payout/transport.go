package payout

import (
	"log/slog"
	"net/http"

	"github.com/partnerpay/api/pkg/environment"
	"github.com/partnerpay/api/pkg/kithttp"
)

// NewHandler is the service's HTTP API: the routes, the internal token, and
// the X-Environment stamp the gateway checks. idempotent wraps the creating
// routes (payout execution).
func NewHandler(e Endpoints, env environment.Name, internalToken string, idempotent func(http.Handler) http.Handler, log *slog.Logger) http.Handler {
	mux := http.NewServeMux()
	mux.Handle("POST /v1/bank/payout/quote", kithttp.Server(e.Quote, kithttp.Decode[QuoteRequest], log))
	mux.Handle("POST /v1/bank/payout", idempotent(kithttp.Server(e.Execute, kithttp.Decode[ExecuteRequest], log)))
	mux.Handle("GET /v1/config", kithttp.Server(e.Config, kithttp.DecodeCaller, log))
	mux.Handle("GET /v1/currencies", kithttp.Server(e.Currencies, kithttp.DecodeCaller, log))
	mux.Handle("GET /v1/limits", kithttp.Server(e.Limits, kithttp.DecodeCaller, log))
	mux.Handle("GET /v1/countries", kithttp.Server(e.Countries, kithttp.DecodeCaller, log))
	return kithttp.Wrap(mux, env, internalToken)
}
