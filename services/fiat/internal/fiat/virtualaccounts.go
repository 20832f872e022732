package fiat

import (
	"context"
	"errors"
	"fmt"

	"github.com/partnerpay/api/pkg/bankprovider"
	"github.com/partnerpay/api/pkg/consentapi"
	"github.com/partnerpay/api/pkg/envelope"
	"github.com/partnerpay/api/pkg/format"
	"github.com/partnerpay/api/pkg/idempotency"
	"github.com/partnerpay/api/pkg/lifecycle"
	"github.com/partnerpay/api/pkg/partner"
)

// VirtualAccountRequest is the body of POST /v1/fiat/virtual-accounts.
type VirtualAccountRequest struct {
	AccountID string `json:"accountId"`
	Currency  string `json:"currency"`
	// Reference is the partner's own id for the account; a provider
	// account has one record, so a repeat keeps the first one's.
	Reference *string `json:"reference,omitempty"`
}

// VirtualAccount answers POST /v1/fiat/virtual-accounts: the account's bank
// details (status "active"), or the consent still needed (status
// "consent_required" and consentSessionId only).
type VirtualAccount struct {
	Status           string       `json:"status"`
	ConsentSessionID string       `json:"consentSessionId,omitempty"`
	VirtualAccountID string       `json:"virtualAccountId,omitempty"`
	AccountID        string       `json:"accountId,omitempty"`
	Currency         string       `json:"currency,omitempty"`
	BankDetails      *BankDetails `json:"bankDetails,omitempty"`
	Reference        string       `json:"reference,omitempty"`
	CreatedAt        string       `json:"createdAt,omitempty"`
}

// BankDetails is where the user sends the bank transfer.
type BankDetails struct {
	IBAN        string `json:"iban"`
	BIC         string `json:"bic"`
	Beneficiary string `json:"beneficiary"`
}

func (s *service) CreateVirtualAccount(ctx context.Context, caller partner.Caller, req VirtualAccountRequest) (VirtualAccount, error) {
	currency, err := format.Currency("currency", req.Currency)
	if err != nil {
		return VirtualAccount{}, err
	}
	reference, err := partnerReference(req.Reference, "the virtual account")
	if err != nil {
		return VirtualAccount{}, err
	}
	acc, err := s.ownedAccount(ctx, caller, req.AccountID)
	if err != nil {
		return VirtualAccount{}, err
	}
	va, err := s.provider.CreateVirtualAccount(ctx, acc.ProviderCustomerID, currency)
	switch {
	case bankprovider.IsType(err, bankprovider.TypeTermsRequired):
		if acc, err = s.observed(ctx, acc, StatusConsentRequired); err != nil {
			return VirtualAccount{}, err
		}
		id, err := s.pendingConsent(ctx, caller, acc)
		if err != nil {
			return VirtualAccount{}, err
		}
		return VirtualAccount{Status: lifecycle.VirtualAccountConsentRequired, ConsentSessionID: id}, nil
	case bankprovider.IsType(err, bankprovider.TypeCustomerNotActive):
		c, cerr := s.provider.Customer(ctx, acc.ProviderCustomerID)
		if cerr != nil {
			return VirtualAccount{}, bankprovider.ToAPI(cerr)
		}
		if _, err := s.observed(ctx, acc, wireStatus(c.Status)); err != nil {
			return VirtualAccount{}, err
		}
		msg := "The account's identity check is still pending; ask again shortly."
		if c.Status == bankprovider.StatusRejected {
			msg = "The account was rejected by the bank's identity check; it cannot receive a virtual account."
		}
		return VirtualAccount{}, envelope.New(envelope.CodeAccountNotActive, msg)
	case err != nil:
		return VirtualAccount{}, bankprovider.ToAPI(err)
	}
	// The provider opened an account for the user: the user is active.
	if _, err := s.observed(ctx, acc, StatusActive); err != nil {
		return VirtualAccount{}, err
	}
	out, err := s.store.VirtualAccountFor(ctx, VirtualAccountRecord{ID: idempotency.NewID(ctx, virtualAccountPrefix), Owner: caller.KeyID,
		AccountID: acc.ID, ProviderAccountID: va.ID, Currency: va.Currency, Reference: reference, CreatedAt: s.created()},
		func(rec VirtualAccountRecord) VirtualAccount {
			out := virtualAccount(rec)
			out.BankDetails = &BankDetails{IBAN: va.IBAN, BIC: va.BIC, Beneficiary: va.BeneficiaryName}
			return out
		})
	if err != nil {
		return VirtualAccount{}, fmt.Errorf("save virtual account: %w", err)
	}
	return out, nil
}

// virtualAccount is the answer about rec. The bank details are the
// provider's (their beneficiary is the user's name, which we do not keep):
// the creating call answers them, and answers them again on a repeat.
func virtualAccount(rec VirtualAccountRecord) VirtualAccount {
	return VirtualAccount{Status: lifecycle.VirtualAccountActive, VirtualAccountID: rec.ID, AccountID: rec.AccountID, Currency: rec.Currency,
		Reference: rec.Reference, CreatedAt: rfc3339(rec.CreatedAt)}
}

// pendingConsent is the session the user should go through now: the
// account's own while the user has not come back from it, a new one after.
func (s *service) pendingConsent(ctx context.Context, caller partner.Caller, acc AccountRecord) (string, error) {
	if acc.ConsentSessionID != "" {
		cs, err := s.consent.Get(ctx, caller.KeyID, acc.ConsentSessionID)
		if err != nil {
			return "", fmt.Errorf("consent session state: %w", err)
		}
		if cs.State != consentapi.StateReturned {
			return acc.ConsentSessionID, nil
		}
	}
	cs, err := s.consent.Create(ctx, consentapi.CreateSession{Owner: caller.KeyID, AccountID: acc.ID, ProviderCustomerID: acc.ProviderCustomerID})
	if err != nil {
		return "", fmt.Errorf("create consent session: %w", err)
	}
	if err := s.store.SetConsentSession(ctx, acc.ID, cs.ConsentSessionID); err != nil {
		return "", fmt.Errorf("save account: %w", err)
	}
	return cs.ConsentSessionID, nil
}

func (s *service) ownedVirtualAccount(ctx context.Context, caller partner.Caller, id string) (VirtualAccountRecord, error) {
	if id == "" {
		return VirtualAccountRecord{}, envelope.InvalidRequest("virtualAccountId is required.")
	}
	if !validID(virtualAccountPrefix, id) {
		return VirtualAccountRecord{}, errVANotFound
	}
	r, err := s.store.VirtualAccount(ctx, id)
	if errors.Is(err, ErrNotFound) || (err == nil && r.Owner != caller.KeyID) {
		return VirtualAccountRecord{}, errVANotFound
	}
	if err != nil {
		return VirtualAccountRecord{}, fmt.Errorf("read virtual account: %w", err)
	}
	return r, nil
}
