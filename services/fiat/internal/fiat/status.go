package fiat

import (
	"context"
	"encoding/json"
	"fmt"
	"math/big"

	"github.com/partnerpay/api/pkg/lifecycle"

	"github.com/partnerpay/api/pkg/bankprovider"
	"github.com/partnerpay/api/pkg/envelope"
	"github.com/partnerpay/api/pkg/partner"
)

// StatusRequest is the body of POST /v1/fiat/status: the funding of a
// virtual account or of a one-off deposit (exactly one), optionally with
// the account it belongs to.
type StatusRequest struct {
	AccountID        string `json:"accountId,omitempty"`
	VirtualAccountID string `json:"virtualAccountId,omitempty"`
	DepositID        string `json:"depositId,omitempty"`
}

// FundingStatus is the spec's funding status, less environment: the three
// funded fields appear only once funded. It is the provider's word as the
// worker last read it: a status call never calls the provider.
type FundingStatus struct {
	// The record whose funding it is: one of the two.
	VirtualAccountID string            `json:"virtualAccountId,omitempty"`
	DepositID        string            `json:"depositId,omitempty"`
	Status           string            `json:"status"`
	Transactions     []json.RawMessage `json:"transactions"`
	DeliveredAmount  string            `json:"deliveredAmount,omitempty"`
	DepositedAmount  string            `json:"depositedAmount,omitempty"`
	TxHash           string            `json:"txHash,omitempty"`
}

func (s *service) Status(ctx context.Context, caller partner.Caller, req StatusRequest) (FundingStatus, error) {
	if req.VirtualAccountID != "" && req.DepositID != "" {
		return FundingStatus{}, envelope.InvalidRequest("Send virtualAccountId or depositId, not both.")
	}
	if req.VirtualAccountID == "" && req.DepositID == "" {
		return FundingStatus{}, envelope.InvalidRequest("virtualAccountId or depositId is required.")
	}
	// The account is checked first (DESIGN §4): an unknown accountId is
	// account_not_found whatever the other id.
	if req.AccountID != "" {
		if _, err := s.ownedAccount(ctx, caller, req.AccountID); err != nil {
			return FundingStatus{}, err
		}
	}
	if req.DepositID != "" {
		d, err := s.ownedDeposit(ctx, caller, req.DepositID)
		if err != nil {
			return FundingStatus{}, err
		}
		if req.AccountID != "" && req.AccountID != d.AccountID {
			return FundingStatus{}, errDepositNotFound // this account has no such deposit
		}
		f, err := stored(d.Transactions)
		f.DepositID = d.ID
		return f, err
	}
	va, err := s.ownedVirtualAccount(ctx, caller, req.VirtualAccountID)
	if err != nil {
		return FundingStatus{}, err
	}
	if req.AccountID != "" && req.AccountID != va.AccountID {
		return FundingStatus{}, errVANotFound // this account has no such virtual account
	}
	return fundingOf(va)
}

// fundingOf is virtual account va's funding, as POST /v1/fiat/status
// answers it.
func fundingOf(va VirtualAccountRecord) (FundingStatus, error) {
	f, err := stored(va.Transactions)
	f.VirtualAccountID = va.ID
	return f, err
}

// stored is the funding status of transactions the worker kept.
func stored(raws []json.RawMessage) (FundingStatus, error) {
	txs, err := bankprovider.DecodeTransactions(raws)
	if err != nil {
		return FundingStatus{}, err
	}
	return funding(txs)
}

// funding is the status the provider's transactions add up to: funded once
// a deposit settled, with the sums of what settled and the latest hash.
// Every raw record is passed on, unmatched transfers included.
func funding(txs []bankprovider.Transaction) (FundingStatus, error) {
	out := FundingStatus{Status: lifecycle.AwaitingDeposit, Transactions: make([]json.RawMessage, 0, len(txs))}
	deposited, delivered := new(big.Rat), new(big.Rat)
	for _, t := range txs {
		out.Transactions = append(out.Transactions, t.Raw)
		if t.Type != "deposit" || t.Status != "settled" {
			continue
		}
		a, ok1 := new(big.Rat).SetString(t.Amount)
		d, ok2 := new(big.Rat).SetString(t.DeliveredAmount)
		if !ok1 || !ok2 || t.TxHash == "" {
			return FundingStatus{}, fmt.Errorf("bank provider: settled transaction %s without amounts or hash", t.ID)
		}
		deposited.Add(deposited, a)
		delivered.Add(delivered, d)
		out.Status, out.TxHash = lifecycle.Funded, t.TxHash
	}
	if out.Status == lifecycle.Funded {
		out.DepositedAmount, out.DeliveredAmount = deposited.FloatString(2), delivered.FloatString(2)
	}
	return out, nil
}
