package payout

import (
	"log/slog"
	"net/http"

	"github.com/partnerpay/api/pkg/kithttp"
)

// Routes adds the payout service's routes to mux. idempotent wraps the
// creating routes (payout execution).
func Routes(mux *http.ServeMux, e Endpoints, idempotent func(http.Handler) http.Handler, log *slog.Logger) {
	mux.Handle("POST /v1/bank/payout/quote", kithttp.Server(e.Quote, kithttp.Decode[QuoteRequest], log))
	mux.Handle("POST /v1/bank/payout", idempotent(kithttp.Server(e.Execute, kithttp.Decode[ExecuteRequest], log)))
	mux.Handle("GET /v1/config", kithttp.Server(e.Config, kithttp.DecodeCaller, log))
	mux.Handle("GET /v1/currencies", kithttp.Server(e.Currencies, kithttp.DecodeCaller, log))
	mux.Handle("GET /v1/limits", kithttp.Server(e.Limits, kithttp.DecodeCaller, log))
	mux.Handle("GET /v1/countries", kithttp.Server(e.Countries, kithttp.DecodeCaller, log))
	mux.Handle("GET /v1/rates", kithttp.Server(e.Rates, kithttp.DecodeCaller, log))
	mux.Handle("GET /v1/payment-methods", kithttp.Server(e.PaymentMethods, kithttp.DecodeCaller, log))
	mux.Handle("GET /v1/statuses", kithttp.Server(e.Statuses, kithttp.DecodeCaller, log))
}
