package fiat

import (
	"context"
	"encoding/json"
	"fmt"
	"math/big"

	"github.com/partnerpay/api/pkg/bankprovider"
	"github.com/partnerpay/api/pkg/partner"
)

// StatusRequest is the body of POST /v1/fiat/status.
type StatusRequest struct {
	AccountID        string `json:"accountId"`
	VirtualAccountID string `json:"virtualAccountId"`
}

// FundingStatus is the spec's funding status, less environment: the three
// funded fields appear only once funded.
type FundingStatus struct {
	Status          string            `json:"status"`
	Transactions    []json.RawMessage `json:"transactions"`
	DeliveredAmount string            `json:"deliveredAmount,omitempty"`
	DepositedAmount string            `json:"depositedAmount,omitempty"`
	TxHash          string            `json:"txHash,omitempty"`
}

func (s *service) Status(ctx context.Context, caller partner.Caller, req StatusRequest) (FundingStatus, error) {
	va, err := s.ownedVirtualAccount(ctx, caller, req.VirtualAccountID)
	if err != nil {
		return FundingStatus{}, err
	}
	if req.AccountID != "" && req.AccountID != va.AccountID {
		return FundingStatus{}, errVANotFound // this key has no such pair
	}
	txs, err := s.provider.Transactions(ctx, va.ProviderAccountID)
	if err != nil {
		return FundingStatus{}, bankprovider.ToAPI(err)
	}
	out := FundingStatus{Status: "awaiting_deposit", Transactions: make([]json.RawMessage, 0, len(txs))}
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
		out.Status, out.TxHash = "funded", t.TxHash
	}
	if out.Status == "funded" {
		out.DepositedAmount, out.DeliveredAmount = deposited.FloatString(2), delivered.FloatString(2)
	}
	return out, nil
}
