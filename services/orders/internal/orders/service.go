// Package orders is the card on- and off-ramp (DESIGN §7): a partner's user
// buys stablecoins with a card or Apple Pay, or sells them and has the card
// credited, through the card provider's hosted page. Card numbers, expiry
// and CVC are typed on that page only: nothing here ever sees them.
//
// This is the service (no HTTP): creating an order, with the contract's
// checks in order, and opening it at the card provider; minting the hosted
// card page link; the browser's return; its status, read back from the
// provider and moved only forward; and a sell's sandbox deposit.
package orders

import (
	"context"
	"errors"
	"log/slog"
	"net/url"
	"time"

	"github.com/partnerpay/api/pkg/bankprovider"
	"github.com/partnerpay/api/pkg/catalog"
	"github.com/partnerpay/api/pkg/envelope"
	"github.com/partnerpay/api/pkg/environment"
	"github.com/partnerpay/api/pkg/format"
	"github.com/partnerpay/api/pkg/hostedlink"
	"github.com/partnerpay/api/pkg/lifecycle"
	"github.com/partnerpay/api/pkg/listing"
	"github.com/partnerpay/api/pkg/partner"
)

// Service is the card order API.
type Service interface {
	Create(ctx context.Context, caller partner.Caller, req CreateRequest) (Order, error)
	Link(ctx context.Context, caller partner.Caller, req LinkRequest) (Link, error)
	Status(ctx context.Context, caller partner.Caller, req StatusRequest) (OrderStatus, error)
	SandboxDeposit(ctx context.Context, caller partner.Caller, req StatusRequest) (OrderStatus, error)
	// List answers GET /v1/orders: its query string, checked here.
	List(ctx context.Context, caller partner.Caller, query url.Values) (OrderList, error)
	// Return handles the browser coming back from the hosted card page
	// with the state its link carried.
	Return(ctx context.Context, state string) (Returned, error)
}

// The statuses of an order (GET /v1/statuses): a buy awaits payment, a
// sell awaits the user's stablecoin deposit; then processing, then
// completed or failed; an unpaid order expires. The last three are final.
const (
	StatusAwaitingPayment = lifecycle.OrderAwaitingPayment
	StatusAwaitingDeposit = lifecycle.OrderAwaitingDeposit
	StatusProcessing      = lifecycle.OrderProcessing
	StatusCompleted       = lifecycle.OrderCompleted
	StatusFailed          = lifecycle.OrderFailed
	StatusExpired         = lifecycle.OrderExpired
)

// Final reports whether status is final.
func Final(status string) bool {
	return status == StatusCompleted || status == StatusFailed || status == StatusExpired
}

// awaiting reports whether an order in status still waits for its payment
// or deposit: the only statuses that expire.
func awaiting(status string) bool {
	return status == StatusAwaitingPayment || status == StatusAwaitingDeposit
}

// Record is an order as the store keeps it.
type Record struct {
	ID             string
	Owner          string
	Direction      string
	Status         string
	CryptoCurrency string
	Chain          int64
	FiatCurrency   string
	Country        string
	CryptoAmount   string // exactly one of the two amounts, as the partner sent it
	FiatAmount     string
	WalletAddress  string
	DepositAddress string // a sell's: where the user sends the stablecoins
	ProviderID     string // the order at the card provider
	PaymentMethod  string
	TxHash         string
	FailureReason  string
	Reference      string // the partner's own, never logged
	ExpiresAt      time.Time
	CreatedAt      time.Time
	StatusAt       time.Time // when its status last changed
}

// Store keeps orders (DBStore in production).
type Store interface {
	// Create writes r and keeps answer with it (idempotency.Answer).
	Create(ctx context.Context, r Record, answer Order) error
	Get(ctx context.Context, id string) (Record, error)
	// List reads a page of the key's orders, newest first (Limit+1 at most).
	List(ctx context.Context, keyID string, p listing.Params) ([]Record, error)
	// Advance moves an order forward to p at at, if p is forward of where
	// it stands, and answers the order as it now is.
	Advance(ctx context.Context, id string, p Progress, at time.Time) (Record, error)
	// Due is the worker's round: the orders due at now, each given what
	// work makes of it, in one transaction.
	Due(ctx context.Context, now, until time.Time, limit int, work func(ctx context.Context, due []Record) []Check,
		failed func(id string, err error) time.Time) (int, error)
	// Mint makes l its order's current link: the earlier ones stop counting.
	Mint(ctx context.Context, l LinkRecord) error
	Link(ctx context.Context, id string) (LinkRecord, error)
	// Redeem uses l once (ErrUsed after), while it is current
	// (ErrSuperseded otherwise).
	Redeem(ctx context.Context, id string, at time.Time) error
}

// LinkRecord is one minted hosted card page link.
type LinkRecord struct {
	ID                string
	OrderID           string
	ProviderSessionID string
	ReturnURL         string
	Current           bool
	Used              bool
	CreatedAt         time.Time
}

// Provider is what the service needs of the card provider.
type Provider interface {
	CreateCardOrder(ctx context.Context, in bankprovider.NewCardOrder, idempotencyKey string) (bankprovider.CardOrder, error)
	CardOrder(ctx context.Context, id string) (bankprovider.CardOrder, error)
	CreateCardSession(ctx context.Context, orderID, returnURL string) (bankprovider.CardSession, error)
	SimulateCardDeposit(ctx context.Context, orderID string) (bankprovider.CardOrder, error)
}

// Errors of the store: a record it does not have; a link used before, or
// no longer its order's current one.
var (
	ErrNotFound   = errors.New("order not found")
	ErrUsed       = hostedlink.ErrUsed
	ErrSuperseded = hostedlink.ErrSuperseded
)

// OrderTTL is how long an order waits for its payment or deposit.
const OrderTTL = 30 * time.Minute

// MockMoney is every money figure while the card provider is a stand-in,
// as the payout quote's mock rule has it.
const MockMoney = "1234567.89"

const orderPrefix = "ord_"

var errOrderNotFound = envelope.New(envelope.CodeOrderNotFound, "No order with this orderId exists for this key.")

type service struct {
	env      environment.Name
	chains   *catalog.Chains
	store    Store
	provider Provider
	links    *hostedlink.Lifecycle // the hosted card page's links; its signer's secret signs the lists' cursors too
	log      *slog.Logger
	now      func() time.Time
}

var _ Service = (*service)(nil)

// Config is what the service is made of.
type Config struct {
	Env      environment.Name
	Store    Store
	Provider Provider
	// Secret signs the state carried through the browser; ReturnURL is the
	// gateway's public return address.
	Secret    []byte
	ReturnURL string
	Log       *slog.Logger
	Now       func() time.Time
}

// NewService returns the order service.
func NewService(c Config) Service {
	s := &service{env: c.Env, chains: catalog.ChainsFor(c.Env), store: c.Store, provider: c.Provider, log: c.Log, now: c.Now}
	s.links = &hostedlink.Lifecycle{Env: c.Env, Signer: hostedlink.Signer{Secret: c.Secret, Now: c.Now}, ReturnTo: c.ReturnURL,
		Prefix: linkPrefix, Now: c.Now, Find: s.findLink, Keep: s.keepLink}
	return s
}

// owned loads an order of the caller's: another key's, an unknown id, or an
// id of the wrong shape (refused without a lookup) is order_not_found.
func (s *service) owned(ctx context.Context, caller partner.Caller, id string) (Record, error) {
	if id == "" {
		return Record{}, envelope.InvalidRequest("orderId is required.")
	}
	if !format.ValidID(orderPrefix, id) {
		return Record{}, errOrderNotFound
	}
	r, err := s.store.Get(ctx, id)
	if errors.Is(err, ErrNotFound) || (err == nil && r.Owner != caller.KeyID) {
		return Record{}, errOrderNotFound
	}
	return r, err
}
