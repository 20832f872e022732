package fiat

import (
	"context"
	"net/url"

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

// ListAccounts answers a page of the caller's accounts, newest first, each
// with the status the worker last read from the provider.
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
	return listing.Finish(l, caller.KeyID, p, rows, func(r AccountRecord) listing.Cursor { return listing.Cursor{CreatedAt: r.CreatedAt, ID: r.ID} }, account), nil
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
	return listing.Finish(l, caller.KeyID, p, rows, func(r VirtualAccountRecord) listing.Cursor {
		return listing.Cursor{CreatedAt: r.CreatedAt, ID: r.ID}
	}, virtualAccount), nil
}

// ListDeposits answers a page of the caller's one-off deposits, newest
// first, each as POST /v1/fiat/deposits answers it with its funding as the
// worker last read it. The reference filter is the partner's
// (partnerReference).
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
	return listing.Finish(l, caller.KeyID, p, rows, func(r DepositRecord) listing.Cursor { return listing.Cursor{CreatedAt: r.CreatedAt, ID: r.ID} }, deposit), nil
}
