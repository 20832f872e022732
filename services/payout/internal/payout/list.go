package payout

import (
	"context"
	"net/url"

	"github.com/partnerpay/api/pkg/lifecycle"
	"github.com/partnerpay/api/pkg/listing"
	"github.com/partnerpay/api/pkg/partner"
	"github.com/partnerpay/api/services/payout/internal/record"
)

// PayoutList is a page of payouts, each as POST /v1/bank/payout/status
// answers it.
type PayoutList = listing.Page[PayoutStatus]

var payoutStatuses = []string{lifecycle.PayoutAwaitingDeposit, lifecycle.PayoutProcessing, lifecycle.PayoutCompleted,
	lifecycle.PayoutReturned, lifecycle.PayoutExpired, lifecycle.PayoutFailed}

func (s *service) lister() listing.Lister {
	return listing.Lister{Name: "payouts", Statuses: payoutStatuses, Secret: s.secret}
}

// List answers a page of the caller's payouts, newest first, each as its
// status call answers it, from the system of record alone: the worker
// keeps every payout where the provider and its deposit window put it.
func (s *service) List(ctx context.Context, caller partner.Caller, query url.Values) (PayoutList, error) {
	l := s.lister()
	p, err := l.Parse(query, caller.KeyID)
	if err != nil {
		return PayoutList{}, err
	}
	rows, err := s.payouts.List(ctx, caller.KeyID, p)
	if err != nil {
		return PayoutList{}, err
	}
	// The cursor is the row's stored creation, to the microsecond.
	return listing.Finish(l, caller.KeyID, p, rows, func(r record.Record) listing.Cursor { return listing.Cursor{CreatedAt: r.CreatedAt, ID: r.ID} },
		s.view.Status), nil
}
