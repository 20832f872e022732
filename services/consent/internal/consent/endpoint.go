package consent

import (
	"context"

	"github.com/go-kit/kit/endpoint"

	"github.com/partnerpay/api/pkg/consentapi"
	"github.com/partnerpay/api/pkg/hostedlink"
	"github.com/partnerpay/api/pkg/kithttp"
)

// Endpoints are the service's operations as go-kit endpoints, each logged
// and measured by the observer under its operation name.
type Endpoints struct {
	CreateSession endpoint.Endpoint
	Session       endpoint.Endpoint
	Link          endpoint.Endpoint
	Status        endpoint.Endpoint
	Return        endpoint.Endpoint
}

// sessionRequest is the internal read of one session for its owner.
type sessionRequest struct{ Owner, ID string }

// MakeEndpoints wraps s.
func MakeEndpoints(s Service, o *kithttp.Observer) Endpoints {
	return Endpoints{
		CreateSession: o.Op("create_session", func(ctx context.Context, r any) (any, error) {
			return s.CreateSession(ctx, r.(consentapi.CreateSession))
		}),
		Session: o.Quiet("session", func(ctx context.Context, r any) (any, error) {
			req := r.(sessionRequest)
			return s.Session(ctx, req.Owner, req.ID)
		}),
		Link:   o.Op("link", kithttp.Endpoint(s.Link)),
		Status: o.Op("status", kithttp.Endpoint(s.Status)),
		Return: o.Op("return", func(ctx context.Context, r any) (any, error) {
			req := r.(hostedlink.ReturnRequest)
			return s.Return(ctx, req.State)
		}),
	}
}
