// Package payout is the payout service: bank payout quotes (a mock while the
// payout provider is being connected) and their execution. Business logic
// only; HTTP lives in transport.go.
package payout

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"math/big"
	"net/url"
	"strconv"
	"time"

	"github.com/partnerpay/api/pkg/bankprovider"
	"github.com/partnerpay/api/pkg/catalog"
	"github.com/partnerpay/api/pkg/envelope"
	"github.com/partnerpay/api/pkg/environment"
	"github.com/partnerpay/api/pkg/format"
	"github.com/partnerpay/api/pkg/partner"
	"github.com/partnerpay/api/services/payout/internal/answer"
	"github.com/partnerpay/api/services/payout/internal/chain"
	"github.com/partnerpay/api/services/payout/internal/mover"
	"github.com/partnerpay/api/services/payout/internal/quote"
	"github.com/partnerpay/api/services/payout/internal/record"
)

// MockMoney is every money figure while the payout provider is a mock.
const MockMoney = record.MockMoney

// Service is what the payout service does.
type Service interface {
	Quote(ctx context.Context, caller partner.Caller, req QuoteRequest) (Quote, error)
	Execute(ctx context.Context, caller partner.Caller, req ExecuteRequest) (Payout, error)
	// Hold binds the execution's quote to its beneficiary before a keyed
	// request claims its Idempotency-Key (execute.go).
	Hold(ctx context.Context, caller partner.Caller, req ExecuteRequest)
	Status(ctx context.Context, caller partner.Caller, req StatusRequest) (PayoutStatus, error)
	SandboxDeposit(ctx context.Context, caller partner.Caller, req DepositRequest) (SandboxDeposit, error)
	SandboxExpire(ctx context.Context, caller partner.Caller, req StatusRequest) (PayoutStatus, error)
	SetRefundAddress(ctx context.Context, caller partner.Caller, req RefundAddressRequest) (PayoutStatus, error)
	// Validate checks a beneficiary against a quote, recording nothing.
	Validate(ctx context.Context, caller partner.Caller, req ValidateRequest) (Validation, error)
	// List answers GET /v1/bank/payouts: its query string, checked here.
	List(ctx context.Context, caller partner.Caller, query url.Values) (PayoutList, error)
}

// QuoteRequest is BankPayoutQuoteRequest. Pointers tell "sent" from "omitted"
// where the contract cares.
type QuoteRequest struct {
	CryptoCurrency string  `json:"cryptoCurrency"`
	Chain          int64   `json:"chain"`
	FiatCurrency   string  `json:"fiatCurrency"`
	Country        string  `json:"country"`
	CryptoAmount   *string `json:"cryptoAmount"`
	FiatAmount     *string `json:"fiatAmount"`
	Rail           *string `json:"rail"`
}

// Quote is BankPayoutQuote less environment, which the gateway stamps first.
// The field order is the wire order.
type Quote struct {
	Mock                bool   `json:"mock"`
	QuoteID             string `json:"quoteId"`
	CryptoAmount        string `json:"cryptoAmount"`
	FiatAmount          string `json:"fiatAmount"`
	Rate                string `json:"rate"`
	Rail                string `json:"rail"`
	EstimatedSettlement string `json:"estimatedSettlement"`
	ProviderFee         string `json:"providerFee"`
	OurFee              string `json:"ourFee"`
	ExpiresAt           string `json:"expiresAt"`
}

// StoredQuote is what execution needs to know of a quote later: what it
// priced and until when. The quote book keeps whose it is.
type StoredQuote struct {
	ID             string    `json:"id"`
	Chain          int64     `json:"chain"`
	CryptoCurrency string    `json:"cryptoCurrency"`
	TokenCurrency  string    `json:"tokenCurrency"` // the fiat the token is pegged to
	FiatCurrency   string    `json:"fiatCurrency"`
	Country        string    `json:"country"`
	CryptoAmount   string    `json:"cryptoAmount,omitempty"`
	FiatAmount     string    `json:"fiatAmount,omitempty"`
	Rail           string    `json:"rail"`
	Settlement     string    `json:"estimatedSettlement"`
	ExpiresAt      time.Time `json:"expiresAt"`
}

// Book keeps the quote offers (quote.Book in production).
type Book interface {
	Open(ctx context.Context, k quote.Kind, keyID string, chain int64, canonical string, ttl time.Duration,
		build func(id string, expiresAt time.Time) ([]byte, error)) (quote.Offer, error)
	Find(ctx context.Context, id quote.ID, keyID string) (quote.Found, error)
	FindClosing(ctx context.Context, id quote.ID, keyID string, g quote.Guess) (quote.Found, error)
	Close(ctx context.Context, id quote.ID, by string) (bool, error)
	Reopen(ctx context.Context, id quote.ID, by string) error
	Closed(ctx context.Context, id quote.ID) (bool, error)
}

// BankPayout is the kind of the bank payout quote: ids bpq_<chain>_<32 hex>.
var BankPayout = quote.Kind{Prefix: "bpq"}

type service struct {
	env      environment.Name
	chains   *catalog.Chains
	view     answer.View
	ttl      time.Duration
	book     Book
	payouts  Payouts
	checker  PayeeChecker
	mover    *mover.Worker
	now      func() time.Time
	secret   []byte
	deposits *chain.Deposits // nil: no deposit key is configured
	faucet   *chain.Faucet
	sent     func(chain int64)
	offered  func(chain int64) bool
	log      *slog.Logger
	// corridors guess an execution's quote before it is read.
	corridors corridors
}

var _ Service = (*service)(nil)

// PayeeChecker asks the payee's bank about a beneficiary's name: the bank
// provider (pkg/bankprovider).
type PayeeChecker interface {
	CheckPayee(ctx context.Context, in bankprovider.PayeeCheck) (bankprovider.PayeeResult, error)
}

// Config is what the service is made of.
type Config struct {
	Env environment.Name
	// TTL is how long a quote may be executed.
	TTL     time.Duration
	Book    Book
	Payouts Payouts
	// Payee checks a beneficiary's name with the bank provider before
	// an execution (nil: none is connected).
	Payee PayeeChecker
	// Mover hands a payout over at once when its deposit is recorded
	// (nil: the worker's queue does, or nothing when none runs).
	Mover *mover.Worker
	// Now is the database's clock (database.DB.Now): expiry is read on it.
	Now func() time.Time
	// Secret signs the lists' cursors.
	Secret []byte
	// Addresses derive each payout's deposit address from the deposit
	// wallet's extended public key, at an index from Indexes (DESIGN §10).
	Addresses *chain.Addresses
	Indexes   *chain.Indexes
	// Faucet sends the sandbox's deposits on the local chain (nil: no
	// chain is configured, and POST /v1/sandbox/payouts/deposit is 503);
	// Sent is told of each, so the chain's watcher reads it at once.
	Faucet *chain.Faucet
	Sent   func(chain int64)
	// Offered says whether payouts on a chain may start: a chain this
	// deployment reaches no node of is not offered, since no deposit to
	// it would be seen (DESIGN §10). nil: every chain of the catalogue (a
	// test without a chain).
	Offered func(chain int64) bool
	// Log receives what no request asked for (the worker's lines); nil
	// discards them.
	Log *slog.Logger
}

// NewService returns the payout service.
func NewService(cfg Config) Service {
	if cfg.Log == nil {
		cfg.Log = slog.New(slog.DiscardHandler)
	}
	if cfg.Sent == nil {
		cfg.Sent = func(int64) {}
	}
	if cfg.Offered == nil {
		cfg.Offered = func(int64) bool { return true }
	}
	var deposits *chain.Deposits
	if cfg.Addresses != nil && cfg.Indexes != nil {
		deposits = chain.NewDeposits(cfg.Indexes, cfg.Addresses)
	}
	return &service{env: cfg.Env, chains: catalog.ChainsFor(cfg.Env), view: answer.NewView(cfg.Env), ttl: cfg.TTL, book: cfg.Book,
		payouts: cfg.Payouts, checker: cfg.Payee, mover: cfg.Mover, now: cfg.Now, secret: cfg.Secret, deposits: deposits, faucet: cfg.Faucet, sent: cfg.Sent, offered: cfg.Offered, log: cfg.Log}
}

// clock is the database's clock now, to the microsecond it keeps.
func (s *service) clock() time.Time { return s.now().UTC().Truncate(time.Microsecond) }

// canonicalQuote is a quote request after validation: codes upper-cased,
// amounts canonical, the rail resolved.
type canonicalQuote struct {
	crypto, fiat, country string
	tokenCurrency         string
	chain                 int64
	cryptoAmount          string
	fiatAmount            string
	rail                  catalog.Rail
}

// String is the canonical request: what makes two requests the same quote.
func (q canonicalQuote) String() string {
	return fmt.Sprintf("%d\x00%s\x00%s\x00%s\x00crypto=%s\x00fiat=%s\x00%s",
		q.chain, q.crypto, q.fiat, q.country, q.cryptoAmount, q.fiatAmount, q.rail.Name)
}

func (s *service) Quote(ctx context.Context, caller partner.Caller, req QuoteRequest) (Quote, error) {
	q, err := s.validate(caller, req)
	if err != nil {
		return Quote{}, err
	}
	offer, err := s.book.Open(ctx, BankPayout, caller.KeyID, q.chain, q.String(), s.ttl, func(id string, expires time.Time) ([]byte, error) {
		return json.Marshal(StoredQuote{
			ID: id, Chain: q.chain, CryptoCurrency: q.crypto, TokenCurrency: q.tokenCurrency,
			FiatCurrency: q.fiat, Country: q.country, CryptoAmount: q.cryptoAmount, FiatAmount: q.fiatAmount,
			Rail: q.rail.Name, Settlement: q.rail.Settlement, ExpiresAt: expires,
		})
	})
	if err != nil {
		return Quote{}, err
	}
	var stored StoredQuote
	if err := json.Unmarshal(offer.Record, &stored); err != nil {
		return Quote{}, fmt.Errorf("stored quote: %w", err)
	}
	s.corridors.remember(caller.KeyID, stored.Rail, stored.Country)
	return Quote{
		Mock:                true,
		QuoteID:             stored.ID,
		CryptoAmount:        MockMoney,
		FiatAmount:          MockMoney,
		Rate:                MockMoney,
		Rail:                stored.Rail,
		EstimatedSettlement: stored.Settlement,
		ProviderFee:         MockMoney,
		OurFee:              MockMoney,
		ExpiresAt:           stored.ExpiresAt.UTC().Format(time.RFC3339),
	}, nil
}

// validate applies the contract's checks in order: shape and formats, chain
// in the catalogue, token on the chain, the key's source chains, the rail.
func (s *service) validate(caller partner.Caller, req QuoteRequest) (canonicalQuote, error) {
	var q canonicalQuote
	var err error
	if req.CryptoCurrency == "" {
		return q, envelope.InvalidRequest("cryptoCurrency is required: the symbol of a stablecoin listed by GET /v1/currencies.")
	}
	if err := format.ChainID("chain", req.Chain); err != nil {
		return q, err
	}
	q.chain = req.Chain
	if q.fiat, err = format.Currency("fiatCurrency", req.FiatCurrency); err != nil {
		return q, err
	}
	if q.country, err = format.Country("country", req.Country); err != nil {
		return q, err
	}
	switch {
	case req.CryptoAmount != nil && req.FiatAmount != nil:
		return q, envelope.InvalidRequest("Send exactly one of cryptoAmount and fiatAmount, not both.")
	case req.CryptoAmount == nil && req.FiatAmount == nil:
		return q, envelope.InvalidRequest("Send exactly one of cryptoAmount and fiatAmount.")
	case req.CryptoAmount != nil:
		if q.cryptoAmount, err = format.Amount("cryptoAmount", *req.CryptoAmount); err != nil {
			return q, err
		}
	default:
		if q.fiatAmount, err = format.Amount("fiatAmount", *req.FiatAmount); err != nil {
			return q, err
		}
	}
	if req.Rail != nil && *req.Rail == "" {
		return q, envelope.InvalidRequest("rail, when sent, must name a rail listed by GET /v1/limits.")
	}

	chain, err := s.chains.Find("chain", req.Chain)
	if err != nil {
		return q, err
	}
	token, ok := chain.Token(req.CryptoCurrency)
	if !ok {
		return q, envelope.InvalidRequest("cryptoCurrency is not a token on chain " + strconv.FormatInt(req.Chain, 10) + "; see GET /v1/currencies.")
	}
	q.crypto, q.tokenCurrency = token.Symbol, token.Currency
	if err := caller.Grants.AllowChain(partner.Source, req.Chain); err != nil {
		return q, err
	}
	forced := ""
	if req.Rail != nil {
		forced = *req.Rail
	}
	if q.rail, err = catalog.ResolveRail(q.fiat, q.country, forced, q.fiatValue()); err != nil {
		return q, err
	}
	return q, nil
}

// fiatValue is what arrives, in the fiat currency: fiatAmount, or
// cryptoAmount converted at the reference rates (stablecoins at par with
// their currency); nil when the fiat currency has no reference rate (and so
// no rail).
func (q canonicalQuote) fiatValue() *big.Rat {
	if q.fiatAmount != "" {
		v, _ := new(big.Rat).SetString(q.fiatAmount)
		return v
	}
	c, _ := new(big.Rat).SetString(q.cryptoAmount)
	v, ok := catalog.Convert(c, q.tokenCurrency, q.fiat)
	if !ok {
		return nil
	}
	return v
}
