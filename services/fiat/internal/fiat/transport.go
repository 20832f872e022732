package fiat

import (
	"log/slog"
	"net/http"

	"github.com/partnerpay/api/pkg/environment"
	"github.com/partnerpay/api/pkg/kithttp"
)

// Routes adds the service's routes to mux. idempotent wraps the creating
// routes (accounts, virtual accounts, one-off deposits, sandbox pay-ins).
// The sandbox routes exist only in sandbox.
func Routes(mux *http.ServeMux, e Endpoints, env environment.Name, idempotent func(http.Handler) http.Handler, log *slog.Logger) {
	mux.Handle("POST /v1/fiat/accounts", idempotent(kithttp.Server(e.CreateAccount, kithttp.Decode[AccountRequest], log)))
	mux.Handle("POST /v1/fiat/virtual-accounts", idempotent(kithttp.Server(e.CreateVirtualAccount, kithttp.Decode[VirtualAccountRequest], log)))
	mux.Handle("POST /v1/fiat/deposits", idempotent(kithttp.Server(e.CreateDeposit, kithttp.Decode[DepositRequest], log)))
	mux.Handle("POST /v1/fiat/status", kithttp.Server(e.Status, kithttp.Decode[StatusRequest], log))
	mux.Handle("GET /v1/fiat/accounts", kithttp.Server(e.ListAccounts, kithttp.DecodeQuery, log))
	mux.Handle("GET /v1/fiat/virtual-accounts", kithttp.Server(e.ListVirtualAccounts, kithttp.DecodeQuery, log))
	mux.Handle("GET /v1/fiat/deposits", kithttp.Server(e.ListDeposits, kithttp.DecodeQuery, log))
	if env == environment.Sandbox {
		mux.Handle("POST /v1/sandbox/payin", idempotent(kithttp.Server(e.SandboxPayin, kithttp.Decode[PayinRequest], log)))
		mux.Handle("POST /v1/sandbox/identity", kithttp.Server(e.SandboxIdentity, kithttp.Decode[IdentityRequest], log))
	}
}
