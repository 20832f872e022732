package payout

import (
	"context"
	"log/slog"
	"net/http"

	httptransport "github.com/go-kit/kit/transport/http"

	"github.com/partnerpay/api/pkg/environment"
	"github.com/partnerpay/api/pkg/jsonbody"
	"github.com/partnerpay/api/pkg/kithttp"
	"github.com/partnerpay/api/pkg/partner"
)

// NewHandler is the service's HTTP API: the routes, the internal token, and
// the X-Environment stamp the gateway checks. idempotent wraps the creating
// routes (payout execution).
func NewHandler(e Endpoints, env environment.Name, internalToken string, idempotent func(http.Handler) http.Handler, log *slog.Logger) http.Handler {
	opts := kithttp.ServerOptions(log)
	mux := http.NewServeMux()
	mux.Handle("POST /v1/bank/payout/quote", httptransport.NewServer(e.Quote, decodeQuote, kithttp.EncodeJSON, opts...))
	mux.Handle("POST /v1/bank/payout", idempotent(httptransport.NewServer(e.Execute, decodeExecute, kithttp.EncodeJSON, opts...)))
	mux.Handle("GET /v1/config", httptransport.NewServer(e.Config, decodeCaller, kithttp.EncodeJSON, opts...))
	mux.Handle("GET /v1/currencies", httptransport.NewServer(e.Currencies, decodeNothing, kithttp.EncodeJSON, opts...))
	mux.Handle("GET /v1/limits", httptransport.NewServer(e.Limits, decodeNothing, kithttp.EncodeJSON, opts...))
	mux.Handle("GET /v1/countries", httptransport.NewServer(e.Countries, decodeNothing, kithttp.EncodeJSON, opts...))
	return kithttp.Wrap(mux, env, internalToken)
}

func decodeQuote(_ context.Context, r *http.Request) (any, error) {
	caller, err := partner.FromRequest(r)
	if err != nil {
		return nil, err
	}
	var body QuoteRequest
	if err := jsonbody.Decode(r, &body); err != nil {
		return nil, err
	}
	return quoteRequest{Caller: caller, Body: body}, nil
}

func decodeExecute(_ context.Context, r *http.Request) (any, error) {
	caller, err := partner.FromRequest(r)
	if err != nil {
		return nil, err
	}
	var body ExecuteRequest
	if err := jsonbody.Decode(r, &body); err != nil {
		return nil, err
	}
	return executeRequest{Caller: caller, Body: body}, nil
}

func decodeCaller(_ context.Context, r *http.Request) (any, error) {
	caller, err := partner.FromRequest(r)
	if err != nil {
		return nil, err
	}
	return callerRequest{Caller: caller}, nil
}

func decodeNothing(context.Context, *http.Request) (any, error) { return nil, nil }
