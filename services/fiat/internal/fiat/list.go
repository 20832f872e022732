package fiat

import (
	"context"
	"net/url"
	"sync"

	"github.com/partnerpay/api/pkg/bankprovider"
	"github.com/partnerpay/api/pkg/lifecycle"
	"github.com/partnerpay/api/pkg/listing"
	"github.com/partnerpay/api/pkg/partner"
)

// The lists' pages (DESIGN §8): each element is the record as its creating
// call answers it, with the partner's reference and its creation time.
type (
	AccountList        = listing.Page[Account]
	VirtualAccountList = listing.Page[VirtualAccount]
	DepositList        = listing.Page[Deposit]
)

func (s *service) lister(name string, statuses ...string) listing.Lister {
	return listing.Lister{Name: name, Statuses: statuses, Secret: s.secret}
}

// ListAccounts answers a page of the caller's accounts, newest first. An
// account whose status can still change (consent_required,
// identity_pending, or none kept yet) is read again from the provider; the
// status filter applies to the status as last kept.
func (s *service) ListAccounts(ctx context.Context, caller partner.Caller, query url.Values) (AccountList, error) {
	l := s.lister("fiat-accounts", StatusConsentRequired, StatusIdentityPending, StatusActive, StatusRejected)
	p, err := l.Parse(query, caller.KeyID)
	if err != nil {
		return AccountList{}, err
	}
	rows, err := s.store.Accounts(ctx, caller.KeyID, p)
	if err != nil {
		return AccountList{}, err
	}
	err = refresh(ctx, shown(rows, p), func(r AccountRecord) bool { return r.Status != StatusActive && r.Status != StatusRejected },
		func(ctx context.Context, r *AccountRecord) error {
			c, err := s.provider.Customer(ctx, r.ProviderCustomerID)
			if err != nil {
				return bankprovider.ToAPI(err)
			}
			*r, err = s.observed(ctx, *r, wireStatus(c.Status))
			return err
		})
	if err != nil {
		return AccountList{}, err
	}
	return listing.Finish(l, caller.KeyID, rows, p.Limit, func(r AccountRecord) listing.Cursor { return listing.Cursor{CreatedAt: r.CreatedAt, ID: r.ID} }, account), nil
}

// ListVirtualAccounts answers a page of the caller's virtual accounts,
// newest first, each as POST /v1/fiat/virtual-accounts answers it but for
// the bank details (the provider's; that call answers them again). Their
// funding is POST /v1/fiat/status's.
func (s *service) ListVirtualAccounts(ctx context.Context, caller partner.Caller, query url.Values) (VirtualAccountList, error) {
	l := s.lister("fiat-virtual-accounts", lifecycle.VirtualAccountActive)
	p, err := l.Parse(query, caller.KeyID)
	if err != nil {
		return VirtualAccountList{}, err
	}
	rows, err := s.store.VirtualAccounts(ctx, caller.KeyID, p)
	if err != nil {
		return VirtualAccountList{}, err
	}
	return listing.Finish(l, caller.KeyID, rows, p.Limit, func(r VirtualAccountRecord) listing.Cursor {
		return listing.Cursor{CreatedAt: r.CreatedAt, ID: r.ID}
	}, virtualAccount), nil
}

// ListDeposits answers a page of the caller's one-off deposits, newest
// first, each as POST /v1/fiat/deposits answers it with its funding: one
// still awaiting its money is read again from the provider. The reference
// filter is the partner's (partnerReference).
func (s *service) ListDeposits(ctx context.Context, caller partner.Caller, query url.Values) (DepositList, error) {
	l := s.lister("fiat-deposits", lifecycle.AwaitingDeposit, lifecycle.Funded)
	p, err := l.Parse(query, caller.KeyID)
	if err != nil {
		return DepositList{}, err
	}
	rows, err := s.store.Deposits(ctx, caller.KeyID, p)
	if err != nil {
		return DepositList{}, err
	}
	err = refresh(ctx, shown(rows, p), func(r DepositRecord) bool { return r.Status != lifecycle.Funded },
		func(ctx context.Context, r *DepositRecord) error {
			txs, err := s.provider.DepositTransactions(ctx, r.ProviderInstructionID)
			if err != nil {
				return bankprovider.ToAPI(err)
			}
			st, err := funding(txs)
			if err != nil || st.Status != lifecycle.Funded {
				return err
			}
			if err := s.store.SetDepositFunded(ctx, r.ID); err != nil {
				return err
			}
			r.Status = lifecycle.Funded
			return nil
		})
	if err != nil {
		return DepositList{}, err
	}
	return listing.Finish(l, caller.KeyID, rows, p.Limit, func(r DepositRecord) listing.Cursor { return listing.Cursor{CreatedAt: r.CreatedAt, ID: r.ID} }, deposit), nil
}

// shown is the rows a page shows: the extra one read past its limit only
// says there are more.
func shown[R any](rows []R, p listing.Params) []R { return rows[:min(len(rows), p.Limit)] }

// refreshers bounds the provider calls one page makes at once.
const refreshers = 8

// refresh runs f on each row of rows that need says may be out of date,
// refreshers at a time; the first error is the answer.
func refresh[R any](ctx context.Context, rows []R, need func(R) bool, f func(context.Context, *R) error) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var (
		wg    sync.WaitGroup
		once  sync.Once
		first error
		slots = make(chan struct{}, refreshers)
	)
	for i := range rows {
		if !need(rows[i]) {
			continue
		}
		slots <- struct{}{}
		wg.Add(1)
		go func(r *R) {
			defer func() { <-slots; wg.Done() }()
			if err := f(ctx, r); err != nil {
				once.Do(func() { first = err; cancel() })
			}
		}(&rows[i])
	}
	wg.Wait()
	return first
}
