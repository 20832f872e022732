package orders

import (
	"context"
	"net/url"

	"github.com/partnerpay/api/pkg/listing"
	"github.com/partnerpay/api/pkg/partner"
)

// OrderList is a page of orders, each as POST /v1/orders/status answers it.
type OrderList = listing.Page[OrderStatus]

var orderStatuses = []string{StatusAwaitingPayment, StatusAwaitingDeposit, StatusProcessing, StatusCompleted, StatusFailed, StatusExpired}

func (s *service) lister() listing.Lister {
	return listing.Lister{Name: "orders", Statuses: orderStatuses, Secret: s.links.Signer.Secret}
}

// List answers a page of the caller's orders, newest first, each with its
// status as last recorded (POST /v1/orders/status reads one back from the
// card provider; a page does not call the provider for each of its orders).
func (s *service) List(ctx context.Context, caller partner.Caller, query url.Values) (OrderList, error) {
	l := s.lister()
	p, err := l.Parse(query, caller.KeyID)
	if err != nil {
		return OrderList{}, err
	}
	rows, err := s.store.List(ctx, caller.KeyID, p)
	if err != nil {
		return OrderList{}, err
	}
	return listing.Finish(l, caller.KeyID, p, rows, func(r Record) listing.Cursor { return listing.Cursor{CreatedAt: r.CreatedAt, ID: r.ID} }, statusOf), nil
}
