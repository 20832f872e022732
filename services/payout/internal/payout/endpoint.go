package payout

import (
	"context"

	"github.com/go-kit/kit/endpoint"

	"github.com/partnerpay/api/pkg/partner"
)

// Endpoints are the service's operations as go-kit endpoints.
type Endpoints struct {
	Quote      endpoint.Endpoint
	Execute    endpoint.Endpoint
	Config     endpoint.Endpoint
	Currencies endpoint.Endpoint
	Limits     endpoint.Endpoint
	Countries  endpoint.Endpoint
}

type quoteRequest struct {
	Caller partner.Caller
	Body   QuoteRequest
}

type executeRequest struct {
	Caller partner.Caller
	Body   ExecuteRequest
}

type callerRequest struct{ Caller partner.Caller }

// MakeEndpoints wraps s.
func MakeEndpoints(s Service) Endpoints {
	return Endpoints{
		Quote:      makeQuoteEndpoint(s),
		Execute:    makeExecuteEndpoint(s),
		Config:     makeConfigEndpoint(s),
		Currencies: func(ctx context.Context, _ any) (any, error) { return s.Currencies(ctx), nil },
		Limits:     func(ctx context.Context, _ any) (any, error) { return s.Limits(ctx), nil },
		Countries:  func(ctx context.Context, _ any) (any, error) { return s.Countries(ctx), nil },
	}
}

func makeQuoteEndpoint(s Service) endpoint.Endpoint {
	return func(ctx context.Context, request any) (any, error) {
		req := request.(quoteRequest)
		return s.Quote(ctx, req.Caller, req.Body)
	}
}

func makeExecuteEndpoint(s Service) endpoint.Endpoint {
	return func(ctx context.Context, request any) (any, error) {
		req := request.(executeRequest)
		return s.Execute(ctx, req.Caller, req.Body)
	}
}

func makeConfigEndpoint(s Service) endpoint.Endpoint {
	return func(ctx context.Context, request any) (any, error) {
		return s.Config(ctx, request.(callerRequest).Caller), nil
	}
}
