package consent

import (
	"context"

	"github.com/go-kit/kit/endpoint"

	"github.com/partnerpay/api/pkg/partner"
)

// Endpoints are the service's operations as go-kit endpoints.
type Endpoints struct {
	CreateSession endpoint.Endpoint
	Link          endpoint.Endpoint
	Status        endpoint.Endpoint
}

type createSessionRequest struct {
	Owner              string `json:"owner"`
	AccountID          string `json:"accountId"`
	ProviderCustomerID string `json:"providerCustomerId"`
}

type createSessionResponse struct {
	ConsentSessionID string `json:"consentSessionId"`
}

type linkRequest struct {
	Caller partner.Caller
	Body   LinkRequest
}

type statusRequest struct {
	Caller partner.Caller
	Body   StatusRequest
}

// MakeEndpoints wraps s.
func MakeEndpoints(s Service) Endpoints {
	return Endpoints{
		CreateSession: func(ctx context.Context, request any) (any, error) {
			req := request.(createSessionRequest)
			id, err := s.CreateSession(ctx, req.Owner, req.AccountID, req.ProviderCustomerID)
			return createSessionResponse{ConsentSessionID: id}, err
		},
		Link: func(ctx context.Context, request any) (any, error) {
			req := request.(linkRequest)
			return s.Link(ctx, req.Caller, req.Body)
		},
		Status: func(ctx context.Context, request any) (any, error) {
			req := request.(statusRequest)
			return s.Status(ctx, req.Caller, req.Body)
		},
	}
}
