package orders

import (
	"github.com/go-kit/kit/endpoint"

	"github.com/partnerpay/api/pkg/kithttp"
)

// Endpoints are the service's operations as go-kit endpoints, each logged
// and measured by the observer under its operation name.
type Endpoints struct {
	Create endpoint.Endpoint
	Status endpoint.Endpoint
}

// MakeEndpoints wraps s.
func MakeEndpoints(s Service, o *kithttp.Observer) Endpoints {
	return Endpoints{
		Create: o.Op("create_order", kithttp.Endpoint(s.Create)),
		Status: o.Op("order_status", kithttp.Endpoint(s.Status)),
	}
}
