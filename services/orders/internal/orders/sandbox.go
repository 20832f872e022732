package orders

import (
	"context"

	"github.com/partnerpay/api/pkg/bankprovider"
	"github.com/partnerpay/api/pkg/catalog"
	"github.com/partnerpay/api/pkg/envelope"
	"github.com/partnerpay/api/pkg/environment"
	"github.com/partnerpay/api/pkg/partner"
)

var errNotASell = envelope.InvalidRequest("Only a sell order takes a stablecoin deposit; a buy is paid on the hosted card page (POST /v1/orders/link).")

// SandboxDeposit simulates the user's stablecoin deposit for a sell
// (sandbox only; in production the route does not exist). The provider
// receives it, the order is processing, and the card is credited a few
// seconds later. A repeat answers the order as it stands.
func (s *service) SandboxDeposit(ctx context.Context, caller partner.Caller, req StatusRequest) (OrderStatus, error) {
	if s.env != environment.Sandbox {
		return OrderStatus{}, envelope.NotFound()
	}
	r, err := s.owned(ctx, caller, req.OrderID)
	if err != nil {
		return OrderStatus{}, err
	}
	if r.Direction != catalog.DirectionSell {
		return OrderStatus{}, errNotASell
	}
	if r.ProviderID == "" {
		return OrderStatus{}, errNoProviderOrder
	}
	switch r.Status {
	case StatusAwaitingDeposit:
		po, err := s.provider.SimulateCardDeposit(ctx, r.ProviderID)
		if err != nil {
			return OrderStatus{}, bankprovider.ToAPI(err)
		}
		if r, err = s.advance(ctx, r, po); err != nil {
			return OrderStatus{}, err
		}
	case StatusFailed, StatusExpired:
		return OrderStatus{}, envelope.InvalidRequest("This order is " + r.Status + ": it no longer takes a deposit.")
	}
	return statusOf(r), nil
}
