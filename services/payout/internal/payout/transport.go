package payout

import (
	"context"
	"log/slog"
	"net/http"

	"github.com/go-kit/kit/endpoint"

	"github.com/partnerpay/api/pkg/idempotency"
	"github.com/partnerpay/api/pkg/kithttp"
)

// Routes adds the payout service's routes to mux. idempotent wraps the
// creating routes (quotes, payout execution, and the sandbox deposit that
// makes refunds and moves a payout); the refund address and the sandbox
// expiry are idempotent by their own rules (the same address again answers
// the payout; an expired payout cannot be expired twice).
func Routes(mux *http.ServeMux, e Endpoints, idempotent func(http.Handler) http.Handler, log *slog.Logger) {
	mux.Handle("POST /v1/bank/payout/quote", idempotent(kithttp.Server(e.Quote, kithttp.Decode[QuoteRequest], log)))
	mux.Handle("POST /v1/bank/payout", idempotent(holding{kithttp.Server(e.Execute, kithttp.Decode[ExecuteRequest], log), e.Hold}))
	mux.Handle("POST /v1/bank/payout/validate", kithttp.Server(e.Validate, kithttp.Decode[ValidateRequest], log))
	mux.Handle("POST /v1/bank/payout/status", kithttp.Server(e.Status, kithttp.Decode[StatusRequest], log))
	mux.Handle("GET /v1/bank/payouts", kithttp.Server(e.List, kithttp.DecodeQuery, log))
	mux.Handle("POST /v1/bank/payout/refund-address", kithttp.Server(e.RefundAddress, kithttp.Decode[RefundAddressRequest], log))
	mux.Handle("POST /v1/sandbox/payouts/deposit", idempotent(kithttp.Server(e.SandboxDeposit, kithttp.Decode[DepositRequest], log)))
	mux.Handle("POST /v1/sandbox/payouts/expire", kithttp.Server(e.SandboxExpire, kithttp.Decode[StatusRequest], log))
}

// holding is the execution route: before a keyed execution claims its
// Idempotency-Key, its quote is bound to its beneficiary (Service.Hold).
type holding struct {
	http.Handler
	hold endpoint.Endpoint
}

var _ idempotency.Holder = holding{}

// Hold decodes the execution as the route does; a body the route would
// refuse holds nothing. The context it returns carries what the hold
// learned of the quote, for the execution after the claim (withHeld).
func (h holding) Hold(r *http.Request) context.Context {
	ctx := withHeld(r.Context())
	req, err := kithttp.Decode[ExecuteRequest](ctx, r)
	if err != nil {
		return ctx
	}
	_, _ = h.hold(ctx, req)
	return ctx
}
