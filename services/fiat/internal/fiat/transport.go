package fiat

import (
	"log/slog"
	"net/http"

	"github.com/partnerpay/api/pkg/environment"
	"github.com/partnerpay/api/pkg/kithttp"
)

// NewHandler is the service's HTTP API. idempotent wraps the creating routes
// (accounts, virtual accounts, one-off deposits, sandbox pay-ins). The sandbox routes exist
// only in sandbox.
func NewHandler(e Endpoints, env environment.Name, internalToken string, idempotent func(http.Handler) http.Handler, log *slog.Logger) http.Handler {
	mux := http.NewServeMux()
	mux.Handle("POST /v1/fiat/accounts", idempotent(kithttp.Server(e.CreateAccount, kithttp.Decode[AccountRequest], log)))
	mux.Handle("POST /v1/fiat/virtual-accounts", idempotent(kithttp.Server(e.CreateVirtualAccount, kithttp.Decode[VirtualAccountRequest], log)))
	mux.Handle("POST /v1/fiat/deposits", idempotent(kithttp.Server(e.CreateDeposit, kithttp.Decode[DepositRequest], log)))
	mux.Handle("POST /v1/fiat/status", kithttp.Server(e.Status, kithttp.Decode[StatusRequest], log))
	if env == environment.Sandbox {
		mux.Handle("POST /v1/sandbox/payin", idempotent(kithttp.Server(e.SandboxPayin, kithttp.Decode[PayinRequest], log)))
		mux.Handle("POST /v1/sandbox/identity", kithttp.Server(e.SandboxIdentity, kithttp.Decode[IdentityRequest], log))
	}
	return kithttp.Wrap(mux, env, internalToken)
}
