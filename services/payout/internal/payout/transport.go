package payout

import (
	"log/slog"
	"net/http"

	"github.com/partnerpay/api/pkg/kithttp"
)

// Routes adds the payout service's routes to mux. idempotent wraps the
// creating routes (payout execution, and the sandbox deposit that moves one).
func Routes(mux *http.ServeMux, e Endpoints, idempotent func(http.Handler) http.Handler, log *slog.Logger) {
	mux.Handle("POST /v1/bank/payout/quote", kithttp.Server(e.Quote, kithttp.Decode[QuoteRequest], log))
	mux.Handle("POST /v1/bank/payout", idempotent(kithttp.Server(e.Execute, kithttp.Decode[ExecuteRequest], log)))
	mux.Handle("POST /v1/bank/payout/status", kithttp.Server(e.Status, kithttp.Decode[StatusRequest], log))
	mux.Handle("GET /v1/bank/payouts", kithttp.Server(e.List, kithttp.DecodeQuery, log))
	mux.Handle("POST /v1/sandbox/payouts/deposit", idempotent(kithttp.Server(e.SandboxDeposit, kithttp.Decode[DepositRequest], log)))
}
