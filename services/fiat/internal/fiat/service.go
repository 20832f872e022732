// Package fiat is the fiat service: onboarding users at the bank provider,
// their virtual accounts (bank details to pay in to), the funding status of
// those accounts, and the sandbox calls that simulate a pay-in and force an
// identity result. Records belong to the key that created them: another
// key's ids answer exactly as unknown ones do.
package fiat

import (
	"context"
	"encoding/json"
	"net/url"
	"time"

	"github.com/partnerpay/api/pkg/bankprovider"
	"github.com/partnerpay/api/pkg/catalog"
	"github.com/partnerpay/api/pkg/consentapi"
	"github.com/partnerpay/api/pkg/envelope"
	"github.com/partnerpay/api/pkg/environment"
	"github.com/partnerpay/api/pkg/format"
	"github.com/partnerpay/api/pkg/lifecycle"
	"github.com/partnerpay/api/pkg/listing"
	"github.com/partnerpay/api/pkg/partner"
)

// Account statuses on the wire.
const (
	StatusConsentRequired = lifecycle.AccountConsentRequired
	StatusIdentityPending = lifecycle.AccountIdentityPending
	StatusActive          = lifecycle.AccountActive
	StatusRejected        = lifecycle.AccountRejected
)

// Service is what the fiat service does.
type Service interface {
	CreateAccount(ctx context.Context, caller partner.Caller, req AccountRequest) (Account, error)
	CreateVirtualAccount(ctx context.Context, caller partner.Caller, req VirtualAccountRequest) (VirtualAccount, error)
	Status(ctx context.Context, caller partner.Caller, req StatusRequest) (FundingStatus, error)
	CreateDeposit(ctx context.Context, caller partner.Caller, req DepositRequest) (Deposit, error)
	SandboxPayin(ctx context.Context, caller partner.Caller, req PayinRequest) (Payin, error)
	SandboxIdentity(ctx context.Context, caller partner.Caller, req IdentityRequest) (Account, error)
	// The lists (DESIGN §8) take their query string, checked here.
	ListAccounts(ctx context.Context, caller partner.Caller, query url.Values) (AccountList, error)
	ListVirtualAccounts(ctx context.Context, caller partner.Caller, query url.Values) (VirtualAccountList, error)
	ListDeposits(ctx context.Context, caller partner.Caller, query url.Values) (DepositList, error)
}

// AccountRecord and VirtualAccountRecord are what the store keeps: ids and
// ownership. Personal data stays with the provider.
type AccountRecord struct {
	ID                 string
	Owner              string
	ProviderCustomerID string
	ConsentSessionID   string
	Status             string // as last read from the provider; "" before it was kept
	Reference          string // the partner's own, never logged
	CreatedAt          time.Time
	StatusAt           time.Time // when its status last changed
}

// VirtualAccountRecord links our id to the provider's.
type VirtualAccountRecord struct {
	ID                string
	Owner             string
	AccountID         string
	ProviderAccountID string
	Currency          string
	Reference         string
	CreatedAt         time.Time
	// Transactions are the provider's raw records of the transfers to it,
	// as the worker last read them; ChangedAt when they last changed.
	Transactions []json.RawMessage
	ChangedAt    time.Time
}

// Store keeps the service's records (DBStore in production).
type Store interface {
	CreateAccount(ctx context.Context, r AccountRecord, answer Account) error
	Account(ctx context.Context, id string) (AccountRecord, error)
	SetConsentSession(ctx context.Context, accountID, sessionID string) error
	// SetAccountStatus keeps the provider's newest word on an account,
	// read at at.
	SetAccountStatus(ctx context.Context, accountID, status string, at time.Time) error
	// CheckSoon has the worker ask about a record (an account, a virtual
	// account or a deposit, by id) at at: something just happened to it.
	CheckSoon(ctx context.Context, id string, at time.Time) error
	// The worker's rounds: the records due at now, each given what work
	// makes of it, in one transaction.
	DueAccounts(ctx context.Context, now, until time.Time, limit int, work func(ctx context.Context, due []AccountRecord) []Check, failed Failed) (int, error)
	DueVirtualAccounts(ctx context.Context, now, until time.Time, limit int, work func(ctx context.Context, due []VirtualAccountRecord) []Check, failed Failed) (int, error)
	DueDeposits(ctx context.Context, now, until time.Time, limit int, work func(ctx context.Context, due []DepositRecord) []Check, failed Failed) (int, error)
	// VirtualAccountFor records our id for a provider account, unless it
	// has one: one id per provider account, ever. answer makes the
	// request's answer from the record.
	VirtualAccountFor(ctx context.Context, r VirtualAccountRecord, answer func(VirtualAccountRecord) VirtualAccount) (VirtualAccount, error)
	VirtualAccount(ctx context.Context, id string) (VirtualAccountRecord, error)
	CreateDeposit(ctx context.Context, r DepositRecord, answer Deposit) error
	Deposit(ctx context.Context, id string) (DepositRecord, error)
	// The lists read a page of the key's records, newest first (Limit+1
	// at most: the extra one says there are more), confirmed on the
	// standby.
	Accounts(ctx context.Context, keyID string, p listing.Params) ([]AccountRecord, error)
	VirtualAccounts(ctx context.Context, keyID string, p listing.Params) ([]VirtualAccountRecord, error)
	Deposits(ctx context.Context, keyID string, p listing.Params) ([]DepositRecord, error)
}

// Provider is what the service needs of the bank provider.
type Provider interface {
	CreateCustomer(ctx context.Context, in bankprovider.NewCustomer, idempotencyKey string) (bankprovider.Customer, error)
	Customer(ctx context.Context, id string) (bankprovider.Customer, error)
	ForceIdentity(ctx context.Context, customerID, result string) (bankprovider.Customer, error)
	CreateVirtualAccount(ctx context.Context, customerID, currency string) (bankprovider.VirtualAccount, error)
	Transactions(ctx context.Context, virtualAccountID string) ([]bankprovider.Transaction, error)
	CreateDepositInstruction(ctx context.Context, customerID string, in bankprovider.NewDepositInstruction, idempotencyKey string) (bankprovider.DepositInstruction, error)
	DepositTransactions(ctx context.Context, instructionID string) ([]bankprovider.Transaction, error)
	SimulateDeposit(ctx context.Context, in bankprovider.Deposit, idempotencyKey string) (bankprovider.Transaction, error)
}

// Consent is what the service needs of the consent service: its internal
// API (consentapi.Client).
type Consent interface {
	Create(ctx context.Context, in consentapi.CreateSession) (consentapi.Session, error)
	Get(ctx context.Context, owner, id string) (consentapi.Session, error)
}

type service struct {
	env      environment.Name
	chains   *catalog.Chains
	store    Store
	provider Provider
	consent  Consent
	now      func() time.Time
	secret   []byte // signs the lists' cursors
}

var _ Service = (*service)(nil)

// NewService returns the fiat service; secret signs its lists' cursors.
func NewService(env environment.Name, store Store, provider Provider, consent Consent, now func() time.Time, secret []byte) Service {
	return &service{env: env, chains: catalog.ChainsFor(env), store: store, provider: provider, consent: consent, now: now, secret: secret}
}

// created is the creation time a new record gets, to the microsecond that
// the store keeps (and the lists' cursors carry).
func (s *service) created() time.Time { return s.now().UTC().Truncate(time.Microsecond) }

func rfc3339(t time.Time) string { return t.UTC().Format(time.RFC3339) }

var (
	errAccountNotFound = envelope.New(envelope.CodeAccountNotFound, "No account with this accountId exists for this key.")
	errVANotFound      = envelope.New(envelope.CodeVirtualAccountNotFound, "No virtual account with this virtualAccountId exists for this key.")
)

// The prefixes of the ids the service issues (format.NewID); an id without
// its prefix and shape answers as unknown without a lookup.
const (
	accountPrefix        = "acc_"
	virtualAccountPrefix = "va_"
	depositPrefix        = "dep_"
)

func validID(prefix, s string) bool { return format.ValidID(prefix, s) }
