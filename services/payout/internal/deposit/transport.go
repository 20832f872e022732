package deposit

import (
	"log/slog"
	"net/http"

	"github.com/partnerpay/api/pkg/kithttp"
)

// Routes adds the deposit quote's routes to mux (the payout service's).
func Routes(mux *http.ServeMux, e Endpoints, log *slog.Logger) {
	mux.Handle("POST /v1/deposit/quote", kithttp.Server(e.Quote, kithttp.Decode[QuoteRequest], log))
}
