package payout

import (
	"context"

	"github.com/go-kit/kit/endpoint"

	"github.com/partnerpay/api/pkg/kithttp"
	"github.com/partnerpay/api/pkg/partner"
)

// Endpoints are the service's operations as go-kit endpoints, each logged
// and measured by the observer under its operation name.
type Endpoints struct {
	Quote          endpoint.Endpoint
	Execute        endpoint.Endpoint
	Config         endpoint.Endpoint
	Currencies     endpoint.Endpoint
	Limits         endpoint.Endpoint
	Countries      endpoint.Endpoint
	Rates          endpoint.Endpoint
	PaymentMethods endpoint.Endpoint
	Statuses       endpoint.Endpoint
}

// MakeEndpoints wraps s. The reference reads are measured but not logged:
// the gateway's request line says all there is to say about them.
func MakeEndpoints(s Service, o *kithttp.Observer) Endpoints {
	return Endpoints{
		Quote:   o.Op("quote", kithttp.Endpoint(s.Quote)),
		Execute: o.Op("payout", kithttp.Endpoint(s.Execute)),
		Config: o.Quiet("config", kithttp.Endpoint(func(ctx context.Context, c partner.Caller, _ struct{}) (Config, error) {
			return s.Config(ctx, c), nil
		})),
		Currencies:     o.Quiet("currencies", read(s.Currencies)),
		Limits:         o.Quiet("limits", read(s.Limits)),
		Countries:      o.Quiet("countries", read(s.Countries)),
		Rates:          o.Quiet("rates", read(s.Rates)),
		PaymentMethods: o.Quiet("payment_methods", read(s.PaymentMethods)),
		Statuses:       o.Quiet("statuses", read(s.Statuses)),
	}
}

// read adapts a reference list, which needs no caller and cannot fail.
func read[R any](f func(context.Context) R) endpoint.Endpoint {
	return func(ctx context.Context, _ any) (any, error) { return f(ctx), nil }
}
