package payout

import (
	"context"
	"net/url"
	"time"

	"github.com/partnerpay/api/pkg/lifecycle"
	"github.com/partnerpay/api/pkg/listing"
	"github.com/partnerpay/api/pkg/partner"
)

// PayoutList is a page of payouts, each as POST /v1/bank/payout/status
// answers it.
type PayoutList = listing.Page[PayoutStatus]

var payoutStatuses = []string{lifecycle.PayoutAwaitingDeposit, lifecycle.PayoutProcessing, lifecycle.PayoutCompleted,
	lifecycle.PayoutReturned, lifecycle.PayoutExpired, lifecycle.PayoutFailed}

func (s *service) lister() listing.Lister {
	return listing.Lister{Name: "payouts", Statuses: payoutStatuses, Secret: s.secret}
}

// List answers a page of the caller's payouts, newest first. Each is its
// status as last recorded: a deposit window that closed reads as expired
// (as a status read would make it), but the provider is not asked about
// each payout of a page; POST /v1/bank/payout/status brings one up to date.
func (s *service) List(ctx context.Context, caller partner.Caller, query url.Values) (PayoutList, error) {
	l := s.lister()
	p, err := l.Parse(query, caller.KeyID)
	if err != nil {
		return PayoutList{}, err
	}
	rows, history, err := s.payouts.List(ctx, caller.KeyID, p)
	if err != nil {
		return PayoutList{}, err
	}
	now := s.now().UTC().Truncate(time.Microsecond)
	for i, r := range rows {
		if r.Status == lifecycle.PayoutAwaitingDeposit && !now.Before(r.DepositExpiresAt) {
			if moved, err := s.payouts.Move(ctx, r.ID, Change{From: r.Status, To: lifecycle.PayoutExpired, At: now}); err != nil {
				return PayoutList{}, err
			} else if moved {
				rows[i].Status = lifecycle.PayoutExpired
				history[r.ID] = append(history[r.ID], Move{Status: lifecycle.PayoutExpired, At: now})
			}
		}
	}
	// The cursor is the row's stored creation, to the microsecond.
	return listing.Finish(l, caller.KeyID, rows, p.Limit, func(r StoredPayout) listing.Cursor { return listing.Cursor{CreatedAt: r.CreatedAt, ID: r.ID} },
		func(r StoredPayout) PayoutStatus { return s.status(r, history[r.ID]) }), nil
}
