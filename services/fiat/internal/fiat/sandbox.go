package fiat

import (
	"context"

	"github.com/partnerpay/api/pkg/bankprovider"
	"github.com/partnerpay/api/pkg/envelope"
	"github.com/partnerpay/api/pkg/environment"
	"github.com/partnerpay/api/pkg/format"
	"github.com/partnerpay/api/pkg/partner"
)

// PayinRequest is the body of POST /v1/sandbox/payin.
type PayinRequest struct {
	VirtualAccountID string `json:"virtualAccountId"`
	Amount           string `json:"amount"`
	Currency         string `json:"currency"`
}

// Payin is a simulated bank transfer, less environment.
type Payin struct {
	TransactionID    string `json:"transactionId"`
	VirtualAccountID string `json:"virtualAccountId"`
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
	amount, err := format.Amount("amount", req.Amount)
	if err != nil {
		return Payin{}, err
	}
	currency, err := format.Currency("currency", req.Currency)
	if err != nil {
		return Payin{}, err
	}
	va, err := s.ownedVirtualAccount(ctx, caller, req.VirtualAccountID)
	if err != nil {
		return Payin{}, err
	}
	key := newID("payin-")
	t, err := s.provider.SimulateDeposit(ctx, bankprovider.Deposit{VirtualAccountID: va.ProviderAccountID, Amount: amount, Currency: currency}, key)
	if err != nil {
		return Payin{}, bankprovider.ToAPI(err)
	}
	return Payin{TransactionID: t.ID, VirtualAccountID: va.ID, Status: t.Status, Amount: t.Amount, Currency: t.Currency}, nil
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
	return s.account(acc, c.Status), nil
}
