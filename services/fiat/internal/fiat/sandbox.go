package fiat

import (
	"context"

	"github.com/partnerpay/api/pkg/bankprovider"
	"github.com/partnerpay/api/pkg/envelope"
	"github.com/partnerpay/api/pkg/environment"
	"github.com/partnerpay/api/pkg/format"
	"github.com/partnerpay/api/pkg/idempotency"
	"github.com/partnerpay/api/pkg/partner"
)

// PayinRequest is the body of POST /v1/sandbox/payin: a transfer into a
// virtual account, or for a one-off deposit with the reference the user
// typed (exactly one of the two).
type PayinRequest struct {
	VirtualAccountID string `json:"virtualAccountId,omitempty"`
	DepositID        string `json:"depositId,omitempty"`
	Amount           string `json:"amount"`
	Currency         string `json:"currency"`
	Reference        string `json:"reference,omitempty"`
}

// Payin is a simulated bank transfer, less environment. A transfer for a
// one-off deposit that does not match it (amount, reference, expiry) is
// "unmatched" and never settles.
type Payin struct {
	TransactionID    string `json:"transactionId"`
	VirtualAccountID string `json:"virtualAccountId,omitempty"`
	DepositID        string `json:"depositId,omitempty"`
	Status           string `json:"status"`
	Amount           string `json:"amount"`
	Currency         string `json:"currency"`
}

// IdentityRequest is the body of POST /v1/sandbox/identity.
type IdentityRequest struct {
	AccountID string `json:"accountId"`
	Result    string `json:"result"`
}

// sandboxOnly refuses the simulation calls outside sandbox as if they did
// not exist, which in production they do not.
func (s *service) sandboxOnly() error {
	if s.env != environment.Sandbox {
		return envelope.NotFound()
	}
	return nil
}

func (s *service) SandboxPayin(ctx context.Context, caller partner.Caller, req PayinRequest) (Payin, error) {
	if err := s.sandboxOnly(); err != nil {
		return Payin{}, err
	}
	if (req.VirtualAccountID == "") == (req.DepositID == "") {
		return Payin{}, envelope.InvalidRequest("Send exactly one of virtualAccountId and depositId.")
	}
	amount, err := format.Amount("amount", req.Amount)
	if err != nil {
		return Payin{}, err
	}
	currency, err := format.Currency("currency", req.Currency)
	if err != nil {
		return Payin{}, err
	}
	in := bankprovider.Deposit{Amount: amount, Currency: currency}
	out := Payin{VirtualAccountID: req.VirtualAccountID, DepositID: req.DepositID}
	if req.DepositID != "" {
		if req.Reference == "" {
			return Payin{}, envelope.InvalidRequest("reference is required with depositId: the reference the user types in the transfer.")
		}
		if len(req.Reference) > 140 {
			return Payin{}, envelope.InvalidRequest("reference must be at most 140 characters.")
		}
		d, err := s.ownedDeposit(ctx, caller, req.DepositID)
		if err != nil {
			return Payin{}, err
		}
		in.DepositInstructionID, in.Reference = d.ProviderInstructionID, req.Reference
	} else {
		va, err := s.ownedVirtualAccount(ctx, caller, req.VirtualAccountID)
		if err != nil {
			return Payin{}, err
		}
		in.VirtualAccountID = va.ProviderAccountID
	}
	t, err := s.provider.SimulateDeposit(ctx, in, idempotency.NewID(ctx, "payin-"))
	if err != nil {
		return Payin{}, bankprovider.ToAPI(err)
	}
	// The worker asks the provider about the account at once: the funding
	// status has the transfer within a round, and its settlement soon after.
	if err := s.store.CheckSoon(ctx, out.VirtualAccountID+out.DepositID, s.created()); err != nil {
		return Payin{}, err
	}
	out.TransactionID, out.Status, out.Amount, out.Currency = t.ID, t.Status, t.Amount, t.Currency
	return out, nil
}

func (s *service) SandboxIdentity(ctx context.Context, caller partner.Caller, req IdentityRequest) (Account, error) {
	if err := s.sandboxOnly(); err != nil {
		return Account{}, err
	}
	if req.Result != "approved" && req.Result != "rejected" {
		return Account{}, envelope.InvalidRequest(`result must be "approved" or "rejected".`)
	}
	acc, err := s.ownedAccount(ctx, caller, req.AccountID)
	if err != nil {
		return Account{}, err
	}
	c, err := s.provider.ForceIdentity(ctx, acc.ProviderCustomerID, req.Result)
	if err != nil {
		return Account{}, bankprovider.ToAPI(err)
	}
	if acc, err = s.observed(ctx, acc, wireStatus(c.Status)); err != nil {
		return Account{}, err
	}
	return account(acc), nil
}
