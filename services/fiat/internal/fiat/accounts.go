package fiat

import (
	"context"
	"errors"
	"fmt"
	"net/mail"
	"strconv"
	"unicode/utf8"

	"github.com/partnerpay/api/pkg/bankprovider"
	"github.com/partnerpay/api/pkg/consentapi"
	"github.com/partnerpay/api/pkg/envelope"
	"github.com/partnerpay/api/pkg/format"
	"github.com/partnerpay/api/pkg/idempotency"
	"github.com/partnerpay/api/pkg/listing"
	"github.com/partnerpay/api/pkg/partner"
)

// AccountRequest is the body of POST /v1/fiat/accounts.
type AccountRequest struct {
	Email         string `json:"email"`
	FullName      string `json:"fullName"`
	Country       string `json:"country"`
	WalletAddress string `json:"walletAddress"`
	Chain         int64  `json:"chain"`
	// Reference is the partner's own id for the user (DESIGN §8).
	Reference *string `json:"reference,omitempty"`
}

// Account is an onboarded user, less environment.
type Account struct {
	AccountID        string `json:"accountId"`
	Status           string `json:"status"`
	ConsentSessionID string `json:"consentSessionId,omitempty"`
	Reference        string `json:"reference,omitempty"`
	CreatedAt        string `json:"createdAt"`
}

func (s *service) CreateAccount(ctx context.Context, caller partner.Caller, req AccountRequest) (Account, error) {
	in, err := s.validateAccount(caller, req)
	if err != nil {
		return Account{}, err
	}
	reference, err := partnerReference(req.Reference, "the user")
	if err != nil {
		return Account{}, err
	}
	// Our new id keys the provider call; with an Idempotency-Key it is the
	// same on every attempt, so even a retry after a crash makes one customer.
	rec := AccountRecord{ID: idempotency.NewID(ctx, accountPrefix), Owner: caller.KeyID, Reference: reference, CreatedAt: s.created()}
	c, err := s.provider.CreateCustomer(ctx, in, "account-"+rec.ID)
	if err != nil {
		return Account{}, bankprovider.ToAPI(err)
	}
	rec.ProviderCustomerID, rec.Status = c.ID, wireStatus(c.Status)
	if c.Status == bankprovider.StatusTermsRequired {
		cs, err := s.consent.Create(ctx, consentapi.CreateSession{Owner: caller.KeyID, AccountID: rec.ID, ProviderCustomerID: c.ID})
		if err != nil {
			return Account{}, fmt.Errorf("create consent session: %w", err)
		}
		rec.ConsentSessionID = cs.ConsentSessionID
	}
	out := account(rec)
	if err := s.store.CreateAccount(ctx, rec, out); err != nil {
		return Account{}, fmt.Errorf("save account: %w", err)
	}
	return out, nil
}

// account is the answer about rec, with its status as last read.
func account(rec AccountRecord) Account {
	a := Account{AccountID: rec.ID, Status: rec.Status, Reference: rec.Reference, CreatedAt: rfc3339(rec.CreatedAt)}
	if a.Status == StatusConsentRequired {
		a.ConsentSessionID = rec.ConsentSessionID
	}
	return a
}

func wireStatus(providerStatus string) string {
	switch providerStatus {
	case bankprovider.StatusTermsRequired:
		return StatusConsentRequired
	case bankprovider.StatusIdentityPending:
		return StatusIdentityPending
	case bankprovider.StatusActive:
		return StatusActive
	}
	return StatusRejected
}

// validateAccount checks the body in order (shape and formats, chain in the
// catalogue, the settlement network, the key's destination chains) and
// returns the provider's form of it: codes upper-cased.
func (s *service) validateAccount(caller partner.Caller, req AccountRequest) (bankprovider.NewCustomer, error) {
	var out bankprovider.NewCustomer
	if req.Email == "" {
		return out, envelope.InvalidRequest("email is required.")
	}
	if a, err := mail.ParseAddress(req.Email); err != nil || a.Address != req.Email || a.Name != "" || len(req.Email) > 254 {
		return out, envelope.InvalidRequest("email must be an email address such as ada@example.com.")
	}
	if n := utf8.RuneCountInString(req.FullName); req.FullName == "" || n > 140 {
		return out, envelope.InvalidRequest("fullName is required: the user's full legal name, at most 140 characters.")
	}
	country, err := format.Country("country", req.Country)
	if err != nil {
		return out, err
	}
	wallet, err := format.EVMAddress("walletAddress", req.WalletAddress)
	if err != nil {
		return out, err
	}
	if err := format.ChainID("chain", req.Chain); err != nil {
		return out, err
	}
	if _, err := s.chains.Find("chain", req.Chain); err != nil {
		return out, err
	}
	if req.Chain != s.chains.Settlement.Chain {
		return out, envelope.InvalidRequest("The on-ramp delivers on chain " + strconv.FormatInt(s.chains.Settlement.Chain, 10) +
			" (" + s.chains.Settlement.Name + "); see settlementNetwork in GET /v1/config.")
	}
	if err := caller.Grants.AllowChain(partner.Destination, req.Chain); err != nil {
		return out, err
	}
	return bankprovider.NewCustomer{Email: req.Email, FullName: req.FullName, Country: country,
		WalletAddress: wallet, Chain: req.Chain}, nil
}

// partnerReference checks the partner's optional reference for what.
func partnerReference(ref *string, what string) (string, error) {
	if ref == nil {
		return "", nil
	}
	if !listing.Reference(*ref) {
		return "", envelope.InvalidRequest("reference, when sent, must be 1 to 64 printable ASCII characters: your own id for " + what + ".")
	}
	return *ref, nil
}

// observed records status, the provider's newest word on rec, when it is
// news, and answers rec with it.
func (s *service) observed(ctx context.Context, rec AccountRecord, status string) (AccountRecord, error) {
	if rec.Status == status {
		return rec, nil
	}
	if err := s.store.SetAccountStatus(ctx, rec.ID, status, s.created()); err != nil {
		return rec, fmt.Errorf("save account status: %w", err)
	}
	rec.Status = status
	return rec, nil
}

// ownedAccount loads an account of the caller's.
func (s *service) ownedAccount(ctx context.Context, caller partner.Caller, id string) (AccountRecord, error) {
	if id == "" {
		return AccountRecord{}, envelope.InvalidRequest("accountId is required.")
	}
	if !validID(accountPrefix, id) {
		return AccountRecord{}, errAccountNotFound
	}
	r, err := s.store.Account(ctx, id)
	if errors.Is(err, ErrNotFound) || (err == nil && r.Owner != caller.KeyID) {
		return AccountRecord{}, errAccountNotFound
	}
	if err != nil {
		return AccountRecord{}, fmt.Errorf("read account: %w", err)
	}
	return r, nil
}
