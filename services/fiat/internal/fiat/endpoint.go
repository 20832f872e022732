package fiat

import (
	"context"

	"github.com/go-kit/kit/endpoint"

	"github.com/partnerpay/api/pkg/partner"
)

// Endpoints are the service's operations as go-kit endpoints.
type Endpoints struct {
	CreateAccount        endpoint.Endpoint
	CreateVirtualAccount endpoint.Endpoint
	Status               endpoint.Endpoint
	SandboxPayin         endpoint.Endpoint
	SandboxIdentity      endpoint.Endpoint
}

// request carries the caller and a decoded body to an endpoint.
type request[T any] struct {
	Caller partner.Caller
	Body   T
}

func makeEndpoint[T, R any](f func(context.Context, partner.Caller, T) (R, error)) endpoint.Endpoint {
	return func(ctx context.Context, r any) (any, error) {
		req := r.(request[T])
		return f(ctx, req.Caller, req.Body)
	}
}

// MakeEndpoints wraps s.
func MakeEndpoints(s Service) Endpoints {
	return Endpoints{
		CreateAccount:        makeEndpoint(s.CreateAccount),
		CreateVirtualAccount: makeEndpoint(s.CreateVirtualAccount),
		Status:               makeEndpoint(s.Status),
		SandboxPayin:         makeEndpoint(s.SandboxPayin),
		SandboxIdentity:      makeEndpoint(s.SandboxIdentity),
	}
}
