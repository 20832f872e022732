package deposit

import (
	"github.com/go-kit/kit/endpoint"

	"github.com/partnerpay/api/pkg/kithttp"
)

// Endpoints are the deposit quote's operations as go-kit endpoints.
type Endpoints struct {
	Quote endpoint.Endpoint
}

// MakeEndpoints wraps s; the observer logs and measures each operation.
func MakeEndpoints(s Service, o *kithttp.Observer) Endpoints {
	return Endpoints{Quote: o.Op("deposit_quote", kithttp.Endpoint(s.Quote))}
}
