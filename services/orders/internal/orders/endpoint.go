package orders

import (
	"context"

	"github.com/go-kit/kit/endpoint"

	"github.com/partnerpay/api/pkg/hostedlink"
	"github.com/partnerpay/api/pkg/kithttp"
)

// Endpoints are the service's operations as go-kit endpoints, each logged
// and measured by the observer under its operation name.
type Endpoints struct {
	Create         endpoint.Endpoint
	Link           endpoint.Endpoint
	Status         endpoint.Endpoint
	SandboxDeposit endpoint.Endpoint
	Return         endpoint.Endpoint
	List           endpoint.Endpoint
}

// MakeEndpoints wraps s.
func MakeEndpoints(s Service, o *kithttp.Observer) Endpoints {
	return Endpoints{
		Create:         o.Op("create_order", kithttp.Endpoint(s.Create)),
		Link:           o.Op("order_link", kithttp.Endpoint(s.Link)),
		Status:         o.Op("order_status", kithttp.Endpoint(s.Status)),
		SandboxDeposit: o.Op("sandbox_order_deposit", kithttp.Endpoint(s.SandboxDeposit)),
		// A list's query (a partner's reference, dates) is never logged.
		List: o.Op("list_orders", kithttp.Endpoint(s.List)),
		Return: o.Op("order_return", func(ctx context.Context, r any) (any, error) {
			return s.Return(ctx, r.(hostedlink.ReturnRequest).State)
		}),
	}
}
