package fiat

import (
	"context"
	"log/slog"
	"net/http"

	"github.com/go-kit/kit/endpoint"
	httptransport "github.com/go-kit/kit/transport/http"

	"github.com/partnerpay/api/pkg/environment"
	"github.com/partnerpay/api/pkg/jsonbody"
	"github.com/partnerpay/api/pkg/kithttp"
	"github.com/partnerpay/api/pkg/partner"
)

// NewHandler is the service's HTTP API. idempotent wraps the creating routes
// (accounts, virtual accounts, sandbox pay-ins). The sandbox routes exist
// only in sandbox.
func NewHandler(e Endpoints, env environment.Name, internalToken string, idempotent func(http.Handler) http.Handler, log *slog.Logger) http.Handler {
	opts := kithttp.ServerOptions(log)
	server := func(ep endpoint.Endpoint, dec httptransport.DecodeRequestFunc) http.Handler {
		return httptransport.NewServer(ep, dec, kithttp.EncodeJSON, opts...)
	}
	mux := http.NewServeMux()
	mux.Handle("POST /v1/fiat/accounts", idempotent(server(e.CreateAccount, decode[AccountRequest])))
	mux.Handle("POST /v1/fiat/virtual-accounts", idempotent(server(e.CreateVirtualAccount, decode[VirtualAccountRequest])))
	mux.Handle("POST /v1/fiat/status", server(e.Status, decode[StatusRequest]))
	if env == environment.Sandbox {
		mux.Handle("POST /v1/sandbox/payin", idempotent(server(e.SandboxPayin, decode[PayinRequest])))
		mux.Handle("POST /v1/sandbox/identity", server(e.SandboxIdentity, decode[IdentityRequest]))
	}
	return kithttp.Wrap(mux, env, internalToken)
}

func decode[T any](_ context.Context, r *http.Request) (any, error) {
	caller, err := partner.FromRequest(r)
	if err != nil {
		return nil, err
	}
	var body T
	if err := jsonbody.Decode(r, &body); err != nil {
		return nil, err
	}
	return request[T]{Caller: caller, Body: body}, nil
}
