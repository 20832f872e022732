package fiat

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/partnerpay/api/pkg/bankprovider"
	"github.com/partnerpay/api/pkg/envelope"
	"github.com/partnerpay/api/pkg/format"
	"github.com/partnerpay/api/pkg/idempotency"
	"github.com/partnerpay/api/pkg/lifecycle"
	"github.com/partnerpay/api/pkg/listing"
	"github.com/partnerpay/api/pkg/partner"
)

// DepositRequest is the body of POST /v1/fiat/deposits: a one-off deposit.
type DepositRequest struct {
	AccountID string `json:"accountId"`
	Currency  string `json:"currency"`
	Amount    string `json:"amount"`
	// PartnerReference is the partner's own id for the deposit (DESIGN
	// §8); on a deposit, reference is what the user types on the transfer.
	PartnerReference *string `json:"partnerReference,omitempty"`
}

// Deposit answers POST /v1/fiat/deposits: pay exactly amount, with
// reference, to bankDetails before expiresAt.
type Deposit struct {
	DepositID        string      `json:"depositId"`
	AccountID        string      `json:"accountId"`
	Status           string      `json:"status"`
	Amount           string      `json:"amount"`
	Currency         string      `json:"currency"`
	BankDetails      BankDetails `json:"bankDetails"`
	Reference        string      `json:"reference"`
	ExpiresAt        string      `json:"expiresAt"`
	PartnerReference string      `json:"partnerReference,omitempty"`
	CreatedAt        string      `json:"createdAt"`
}

// DepositRecord links our deposit id to the provider's instruction, and
// keeps the instruction (the collection account's details, none of it
// personal) and its funding as last read.
type DepositRecord struct {
	ID                    string
	Owner                 string
	AccountID             string
	ProviderInstructionID string
	Status                string
	Amount                string
	Currency              string
	BankDetails           BankDetails
	TransferReference     string
	ExpiresAt             time.Time
	Reference             string // the partner's own, never logged
	CreatedAt             time.Time
	// Transactions are the provider's raw records of the transfers sent
	// for it, as the worker last read them; ChangedAt when they last
	// changed.
	Transactions []json.RawMessage
	ChangedAt    time.Time
}

var (
	errDepositNotFound = envelope.New(envelope.CodeDepositNotFound, "No deposit with this depositId exists for this key.")
	errNotActive       = envelope.New(envelope.CodeAccountNotActive,
		"The account is not active: the user must accept the bank's terms and pass its identity check first (see the account's status).")
)

func (s *service) CreateDeposit(ctx context.Context, caller partner.Caller, req DepositRequest) (Deposit, error) {
	currency, err := format.Currency("currency", req.Currency)
	if err != nil {
		return Deposit{}, err
	}
	amount, err := format.Amount("amount", req.Amount)
	if err != nil {
		return Deposit{}, err
	}
	if req.PartnerReference != nil && !listing.Reference(*req.PartnerReference) {
		return Deposit{}, envelope.InvalidRequest("partnerReference, when sent, must be 1 to 64 printable ASCII characters: your own id for the deposit.")
	}
	acc, err := s.ownedAccount(ctx, caller, req.AccountID)
	if err != nil {
		return Deposit{}, err
	}
	// Our new id keys the provider call: a retry of this call (with an
	// Idempotency-Key, the same id) cannot make a second instruction.
	rec := DepositRecord{ID: idempotency.NewID(ctx, depositPrefix), Owner: caller.KeyID, AccountID: acc.ID, CreatedAt: s.created()}
	if req.PartnerReference != nil {
		rec.Reference = *req.PartnerReference
	}
	d, err := s.provider.CreateDepositInstruction(ctx, acc.ProviderCustomerID,
		bankprovider.NewDepositInstruction{Currency: currency, Amount: amount}, "deposit-"+rec.ID)
	switch {
	case bankprovider.IsType(err, bankprovider.TypeTermsRequired), bankprovider.IsType(err, bankprovider.TypeCustomerNotActive):
		return Deposit{}, errNotActive
	case err != nil:
		return Deposit{}, bankprovider.ToAPI(err)
	}
	expires, err := time.Parse(time.RFC3339, d.ExpiresAt)
	if err != nil {
		return Deposit{}, fmt.Errorf("bank provider: deposit instruction %s expires at %q", d.ID, d.ExpiresAt)
	}
	rec.ProviderInstructionID, rec.Status, rec.Amount, rec.Currency = d.ID, lifecycle.AwaitingDeposit, d.Amount, d.Currency
	rec.BankDetails = BankDetails{IBAN: d.IBAN, BIC: d.BIC, Beneficiary: d.BeneficiaryName}
	rec.TransferReference, rec.ExpiresAt = d.Reference, expires.UTC()
	out := deposit(rec)
	if err := s.store.CreateDeposit(ctx, rec, out); err != nil {
		return Deposit{}, fmt.Errorf("save deposit: %w", err)
	}
	return out, nil
}

// deposit is the answer about rec.
func deposit(rec DepositRecord) Deposit {
	return Deposit{DepositID: rec.ID, AccountID: rec.AccountID, Status: rec.Status, Amount: rec.Amount, Currency: rec.Currency,
		BankDetails: rec.BankDetails, Reference: rec.TransferReference, ExpiresAt: rfc3339(rec.ExpiresAt),
		PartnerReference: rec.Reference, CreatedAt: rfc3339(rec.CreatedAt)}
}

// ownedDeposit loads a deposit of the caller's; another key's, and an id of
// the wrong shape, answer as unknown.
func (s *service) ownedDeposit(ctx context.Context, caller partner.Caller, id string) (DepositRecord, error) {
	if !validID(depositPrefix, id) {
		return DepositRecord{}, errDepositNotFound
	}
	r, err := s.store.Deposit(ctx, id)
	if errors.Is(err, ErrNotFound) || (err == nil && r.Owner != caller.KeyID) {
		return DepositRecord{}, errDepositNotFound
	}
	if err != nil {
		return DepositRecord{}, fmt.Errorf("read deposit: %w", err)
	}
	return r, nil
}
