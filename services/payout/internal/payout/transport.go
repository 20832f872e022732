package payout

import (
	"context"
	"log/slog"
	"net/http"
	"net/url"

	"github.com/partnerpay/api/pkg/envelope"
	"github.com/partnerpay/api/pkg/kithttp"
	"github.com/partnerpay/api/pkg/partner"
)

// Routes adds the payout service's routes to mux. idempotent wraps the
// creating routes (payout execution, and the sandbox deposit that moves one).
func Routes(mux *http.ServeMux, e Endpoints, idempotent func(http.Handler) http.Handler, log *slog.Logger) {
	mux.Handle("POST /v1/bank/payout/quote", kithttp.Server(e.Quote, kithttp.Decode[QuoteRequest], log))
	mux.Handle("POST /v1/bank/payout", idempotent(kithttp.Server(e.Execute, kithttp.Decode[ExecuteRequest], log)))
	mux.Handle("POST /v1/bank/payout/status", kithttp.Server(e.Status, kithttp.Decode[StatusRequest], log))
	mux.Handle("GET /v1/bank/payouts", kithttp.Server(e.List, decodeList, log))
	mux.Handle("POST /v1/sandbox/payouts/deposit", idempotent(kithttp.Server(e.SandboxDeposit, kithttp.Decode[DepositRequest], log)))
}

// decodeList reads the caller and the list's query string; a query that
// does not parse is 400.
func decodeList(_ context.Context, r *http.Request) (any, error) {
	caller, err := partner.FromRequest(r)
	if err != nil {
		return nil, err
	}
	q, err := url.ParseQuery(r.URL.RawQuery)
	if err != nil {
		return nil, envelope.InvalidRequest("The query string does not parse: encode each parameter's value.")
	}
	return kithttp.Request[ListRequest]{Caller: caller, Body: ListRequest{Query: q}}, nil
}
