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
	Hold           endpoint.Endpoint
	Status         endpoint.Endpoint
	SandboxDeposit endpoint.Endpoint
	SandboxExpire  endpoint.Endpoint
	RefundAddress  endpoint.Endpoint
	Validate       endpoint.Endpoint
	List           endpoint.Endpoint
}

// MakeEndpoints wraps s.
func MakeEndpoints(s Service, o *kithttp.Observer) Endpoints {
	return Endpoints{
		Quote:   o.Op("quote", kithttp.Endpoint(s.Quote)),
		Execute: o.Op("payout", kithttp.Endpoint(s.Execute)),
		// Part of an execution, before its claim: not an operation of its own.
		Hold: kithttp.Endpoint(func(ctx context.Context, caller partner.Caller, req ExecuteRequest) (struct{}, error) {
			s.Hold(ctx, caller, req)
			return struct{}{}, nil
		}),
		Status: o.Op("payout_status", kithttp.Endpoint(s.Status)),
		// A sandbox deposit moves a payout: logged like the rest.
		SandboxDeposit: o.Op("sandbox_payout_deposit", kithttp.Endpoint(s.SandboxDeposit)),
		SandboxExpire:  o.Op("sandbox_payout_expire", kithttp.Endpoint(s.SandboxExpire)),
		RefundAddress:  o.Op("payout_refund_address", kithttp.Endpoint(s.SetRefundAddress)),
		Validate:       o.Op("payout_validate", kithttp.Endpoint(s.Validate)),
		// A list's query (a partner's reference, dates) is never logged:
		// the line says the operation, key and code only.
		List: o.Op("list_payouts", kithttp.Endpoint(s.List)),
	}
}
