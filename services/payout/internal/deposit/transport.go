package deposit

import (
	"log/slog"
	"net/http"

	"github.com/partnerpay/api/pkg/kithttp"
)

// Routes adds the deposit quote's routes to mux (the payout service's).
// idempotent wraps the quote: every request opens a new quote, and a retry
// that must not carries an Idempotency-Key.
func Routes(mux *http.ServeMux, e Endpoints, idempotent func(http.Handler) http.Handler, log *slog.Logger) {
	mux.Handle("POST /v1/deposit/quote", idempotent(kithttp.Server(e.Quote, kithttp.Decode[QuoteRequest], log)))
}
