// Package fiat is the fiat service: onboarding users at the bank provider,
// their virtual accounts (bank details to pay in to), the funding status of
// those accounts, and the sandbox calls that simulate a pay-in and force an
// identity result. Records belong to the key that created them: another
// key's ids answer exactly as unknown ones do.
package fiat

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"math/big"
	"net/http"
	"net/mail"
	"strconv"
	"time"
	"unicode/utf8"

	"github.com/partnerpay/api/pkg/bankprovider"
	"github.com/partnerpay/api/pkg/catalog"
	"github.com/partnerpay/api/pkg/envelope"
	"github.com/partnerpay/api/pkg/environment"
	"github.com/partnerpay/api/pkg/jsonbody"
	"github.com/partnerpay/api/pkg/partner"
)

// Account statuses on the wire.
const (
	StatusConsentRequired = "consent_required"
	StatusIdentityPending = "identity_pending"
	StatusActive          = "active"
	StatusRejected        = "rejected"
)

// Service is what the fiat service does.
type Service interface {
	CreateAccount(ctx context.Context, caller partner.Caller, req AccountRequest) (Account, error)
	CreateVirtualAccount(ctx context.Context, caller partner.Caller, req VirtualAccountRequest) (VirtualAccount, error)
	Status(ctx context.Context, caller partner.Caller, req StatusRequest) (FundingStatus, error)
	SandboxPayin(ctx context.Context, caller partner.Caller, req PayinRequest) (Payin, error)
	SandboxIdentity(ctx context.Context, caller partner.Caller, req IdentityRequest) (Account, error)
}

// AccountRequest is the body of POST /v1/fiat/accounts.
type AccountRequest struct {
	Email         string `json:"email"`
	FullName      string `json:"fullName"`
	Country       string `json:"country"`
	WalletAddress string `json:"walletAddress"`
	Chain         int64  `json:"chain"`
}

// Account is an onboarded user, less environment.
type Account struct {
	AccountID        string `json:"accountId"`
	Status           string `json:"status"`
	ConsentSessionID string `json:"consentSessionId,omitempty"`
}

// VirtualAccountRequest is the body of POST /v1/fiat/virtual-accounts.
type VirtualAccountRequest struct {
	AccountID string `json:"accountId"`
	Currency  string `json:"currency"`
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
}

// BankDetails is where the user sends the bank transfer.
type BankDetails struct {
	IBAN        string `json:"iban"`
	BIC         string `json:"bic"`
	Beneficiary string `json:"beneficiary"`
}

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

// AccountRecord and VirtualAccountRecord are what the store keeps: ids and
// ownership. Personal data stays with the provider.
type AccountRecord struct {
	ID                 string    `json:"id"`
	Owner              string    `json:"owner"`
	ProviderCustomerID string    `json:"providerCustomerId"`
	ConsentSessionID   string    `json:"consentSessionId,omitempty"`
	CreatedAt          time.Time `json:"createdAt"`
}

// VirtualAccountRecord links our id to the provider's.
type VirtualAccountRecord struct {
	ID                string    `json:"id"`
	Owner             string    `json:"owner"`
	AccountID         string    `json:"accountId"`
	ProviderAccountID string    `json:"providerAccountId"`
	Currency          string    `json:"currency"`
	CreatedAt         time.Time `json:"createdAt"`
}

// ErrNotFound is a record the store does not know.
var ErrNotFound = errors.New("not found")

// Store keeps the service's records.
type Store interface {
	SaveAccount(ctx context.Context, r AccountRecord) error
	Account(ctx context.Context, id string) (AccountRecord, error)
	// VirtualAccountFor returns our record for a provider account, creating
	// it with newID if there is none: one id per provider account, ever.
	VirtualAccountFor(ctx context.Context, r VirtualAccountRecord) (VirtualAccountRecord, error)
	VirtualAccount(ctx context.Context, id string) (VirtualAccountRecord, error)
}

// Provider is what the service needs of the bank provider.
type Provider interface {
	CreateCustomer(ctx context.Context, in bankprovider.NewCustomer, idempotencyKey string) (bankprovider.Customer, error)
	Customer(ctx context.Context, id string) (bankprovider.Customer, error)
	ForceIdentity(ctx context.Context, customerID, result string) (bankprovider.Customer, error)
	CreateVirtualAccount(ctx context.Context, customerID, currency string) (bankprovider.VirtualAccount, error)
	Transactions(ctx context.Context, virtualAccountID string) ([]bankprovider.Transaction, error)
	SimulateDeposit(ctx context.Context, in bankprovider.Deposit, idempotencyKey string) (bankprovider.Transaction, error)
}

// Consent is what the service needs of the consent service.
type Consent interface {
	CreateSession(ctx context.Context, owner, accountID, providerCustomerID string) (string, error)
	// Returned reports whether the user already came back from the session's page.
	Returned(ctx context.Context, caller partner.Caller, sessionID string) (bool, error)
}

type service struct {
	env      environment.Name
	chains   *catalog.Chains
	store    Store
	provider Provider
	consent  Consent
	now      func() time.Time
}

var _ Service = (*service)(nil)

// NewService returns the fiat service.
func NewService(env environment.Name, store Store, provider Provider, consent Consent, now func() time.Time) Service {
	return &service{env: env, chains: catalog.ChainsFor(env), store: store, provider: provider, consent: consent, now: now}
}

var (
	errAccountNotFound = envelope.New(http.StatusNotFound, envelope.CodeAccountNotFound, "No account with this accountId exists for this key.")
	errVANotFound      = envelope.New(http.StatusNotFound, envelope.CodeVirtualAccountNotFound, "No virtual account with this virtualAccountId exists for this key.")
)

func newID(prefix string) string {
	var b [12]byte
	_, _ = rand.Read(b[:])
	return prefix + hex.EncodeToString(b[:])
}

func (s *service) CreateAccount(ctx context.Context, caller partner.Caller, req AccountRequest) (Account, error) {
	in, err := s.validateAccount(caller, req)
	if err != nil {
		return Account{}, err
	}
	rec := AccountRecord{ID: newID("acc_"), Owner: caller.KeyID, CreatedAt: s.now().UTC()}
	// Our new id keys the provider call, so the client's retries of it are safe.
	c, err := s.provider.CreateCustomer(ctx, in, "account-"+rec.ID)
	if err != nil {
		return Account{}, bankprovider.ToAPI(err)
	}
	rec.ProviderCustomerID = c.ID
	if c.Status == bankprovider.StatusTermsRequired {
		if rec.ConsentSessionID, err = s.consent.CreateSession(ctx, caller.KeyID, rec.ID, c.ID); err != nil {
			return Account{}, fmt.Errorf("create consent session: %w", err)
		}
	}
	if err := s.store.SaveAccount(ctx, rec); err != nil {
		return Account{}, fmt.Errorf("save account: %w", err)
	}
	return s.account(rec, c.Status), nil
}

func (s *service) account(rec AccountRecord, providerStatus string) Account {
	a := Account{AccountID: rec.ID, Status: wireStatus(providerStatus)}
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
	country, ok := catalog.CanonicalCountry(req.Country)
	if !ok {
		return out, envelope.InvalidRequest("country must be a known ISO 3166-1 alpha-2 country code.")
	}
	if req.WalletAddress == "" {
		return out, envelope.InvalidRequest("walletAddress is required: the 0x address the stablecoins are delivered to.")
	}
	if !ValidWallet(req.WalletAddress) {
		return out, envelope.InvalidRequest("walletAddress must be 0x followed by 40 hex digits, with a valid EIP-55 checksum if it is mixed-case.")
	}
	if req.Chain == 0 {
		return out, envelope.InvalidRequest("chain is required: a positive integer chain id.")
	}
	if !jsonbody.ValidChainID(req.Chain) {
		return out, envelope.InvalidRequest("chain must be a positive integer no greater than 9007199254740991.")
	}
	chain := strconv.FormatInt(req.Chain, 10)
	if _, ok := s.chains.Chain(req.Chain); !ok {
		return out, envelope.InvalidRequest("chain " + chain + " is not in this deployment's catalogue; see GET /v1/currencies.")
	}
	if req.Chain != s.chains.Settlement.Chain {
		return out, envelope.InvalidRequest("The on-ramp delivers on chain " + strconv.FormatInt(s.chains.Settlement.Chain, 10) +
			" (" + s.chains.Settlement.Name + "); see settlementNetwork in GET /v1/config.")
	}
	if !caller.Grants.DestinationAllowed(req.Chain) {
		return out, envelope.New(http.StatusForbidden, envelope.CodeChainNotAllowed, "This key is not enabled for chain "+chain+" as a destination.")
	}
	return bankprovider.NewCustomer{Email: req.Email, FullName: req.FullName, Country: country,
		WalletAddress: req.WalletAddress, Chain: req.Chain}, nil
}

// ownedAccount loads an account of the caller's.
func (s *service) ownedAccount(ctx context.Context, caller partner.Caller, id string) (AccountRecord, error) {
	if id == "" {
		return AccountRecord{}, envelope.InvalidRequest("accountId is required.")
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

func (s *service) CreateVirtualAccount(ctx context.Context, caller partner.Caller, req VirtualAccountRequest) (VirtualAccount, error) {
	if req.Currency == "" {
		return VirtualAccount{}, envelope.InvalidRequest("currency is required: an ISO 4217 code, EUR in sandbox.")
	}
	currency, ok := catalog.CanonicalCurrency(req.Currency)
	if !ok {
		return VirtualAccount{}, envelope.InvalidRequest("currency must be an ISO 4217 code of three letters.")
	}
	acc, err := s.ownedAccount(ctx, caller, req.AccountID)
	if err != nil {
		return VirtualAccount{}, err
	}
	va, err := s.provider.CreateVirtualAccount(ctx, acc.ProviderCustomerID, currency)
	switch {
	case bankprovider.IsType(err, bankprovider.TypeTermsRequired):
		id, err := s.pendingConsent(ctx, caller, acc)
		if err != nil {
			return VirtualAccount{}, err
		}
		return VirtualAccount{Status: StatusConsentRequired, ConsentSessionID: id}, nil
	case bankprovider.IsType(err, bankprovider.TypeCustomerNotActive):
		c, cerr := s.provider.Customer(ctx, acc.ProviderCustomerID)
		if cerr != nil {
			return VirtualAccount{}, bankprovider.ToAPI(cerr)
		}
		msg := "The account's identity check is still pending; ask again shortly."
		if c.Status == bankprovider.StatusRejected {
			msg = "The account was rejected by the bank's identity check; it cannot receive a virtual account."
		}
		return VirtualAccount{}, envelope.New(http.StatusConflict, envelope.CodeAccountNotActive, msg)
	case err != nil:
		return VirtualAccount{}, bankprovider.ToAPI(err)
	}
	rec, err := s.store.VirtualAccountFor(ctx, VirtualAccountRecord{ID: newID("va_"), Owner: caller.KeyID,
		AccountID: acc.ID, ProviderAccountID: va.ID, Currency: va.Currency, CreatedAt: s.now().UTC()})
	if err != nil {
		return VirtualAccount{}, fmt.Errorf("save virtual account: %w", err)
	}
	return VirtualAccount{Status: StatusActive, VirtualAccountID: rec.ID, AccountID: acc.ID, Currency: va.Currency,
		BankDetails: &BankDetails{IBAN: va.IBAN, BIC: va.BIC, Beneficiary: va.BeneficiaryName}}, nil
}

// pendingConsent is the session the user should go through now: the
// account's own while the user has not come back from it, a new one after.
func (s *service) pendingConsent(ctx context.Context, caller partner.Caller, acc AccountRecord) (string, error) {
	if acc.ConsentSessionID != "" {
		returned, err := s.consent.Returned(ctx, caller, acc.ConsentSessionID)
		if err != nil {
			return "", fmt.Errorf("consent session state: %w", err)
		}
		if !returned {
			return acc.ConsentSessionID, nil
		}
	}
	id, err := s.consent.CreateSession(ctx, caller.KeyID, acc.ID, acc.ProviderCustomerID)
	if err != nil {
		return "", fmt.Errorf("create consent session: %w", err)
	}
	acc.ConsentSessionID = id
	if err := s.store.SaveAccount(ctx, acc); err != nil {
		return "", fmt.Errorf("save account: %w", err)
	}
	return id, nil
}

func (s *service) ownedVirtualAccount(ctx context.Context, caller partner.Caller, id string) (VirtualAccountRecord, error) {
	if id == "" {
		return VirtualAccountRecord{}, envelope.InvalidRequest("virtualAccountId is required.")
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
	amount, ok := jsonbody.CanonicalDecimal(req.Amount)
	if !ok || amount == "0" {
		return Payin{}, envelope.InvalidRequest(`amount must be a decimal string in major units greater than zero, such as "100.50".`)
	}
	if req.Currency == "" {
		return Payin{}, envelope.InvalidRequest("currency is required: EUR in sandbox.")
	}
	currency, ok := catalog.CanonicalCurrency(req.Currency)
	if !ok {
		return Payin{}, envelope.InvalidRequest("currency must be an ISO 4217 code of three letters.")
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
