// Package payout is the payout service: bank payout quotes (a mock while the
// payout provider is being connected) and the reference lists partners read
// before they quote. Business logic only; HTTP lives in transport.go.
package payout

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/partnerpay/api/pkg/catalog"
	"github.com/partnerpay/api/pkg/envelope"
	"github.com/partnerpay/api/pkg/environment"
	"github.com/partnerpay/api/pkg/format"
	"github.com/partnerpay/api/pkg/partner"
)

// MockMoney is every money figure while the payout provider is a mock.
const MockMoney = "1234567.89"

// Service is what the payout service does.
type Service interface {
	Quote(ctx context.Context, caller partner.Caller, req QuoteRequest) (Quote, error)
	Execute(ctx context.Context, caller partner.Caller, req ExecuteRequest) (Payout, error)
	Config(ctx context.Context, caller partner.Caller) Config
	Currencies(ctx context.Context) Currencies
	Limits(ctx context.Context) Limits
	Countries(ctx context.Context) Countries
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

// StoredQuote is what execution needs to know of a quote later: whose it is,
// what it priced and until when.
type StoredQuote struct {
	ID             string    `json:"id"`
	Owner          string    `json:"owner"`
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

// ErrNotFound is a quote or payout the store does not know.
var ErrNotFound = errors.New("not found")

// QuoteStore keeps quotes, and the payouts that execute them.
type QuoteStore interface {
	Save(ctx context.Context, q StoredQuote) error
	Get(ctx context.Context, quoteID string) (StoredQuote, error)
	// PayoutFor returns the payout of a quote, ErrNotFound if none.
	PayoutFor(ctx context.Context, quoteID string) (StoredPayout, error)
	// CreatePayout stores p unless the quote already has a payout, and
	// returns the one that is stored: at most one payout per quote, even when
	// two executions race.
	CreatePayout(ctx context.Context, p StoredPayout) (StoredPayout, error)
}

type service struct {
	env    environment.Name
	chains *catalog.Chains
	secret []byte
	ttl    time.Duration
	store  QuoteStore
	now    func() time.Time
}

var _ Service = (*service)(nil)

// NewService returns the payout service. secret keys the quote ids; ttl is
// how long a quote may be executed.
func NewService(env environment.Name, secret []byte, ttl time.Duration, store QuoteStore, now func() time.Time) Service {
	return &service{env: env, chains: catalog.ChainsFor(env), secret: secret, ttl: ttl, store: store, now: now}
}

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

func (s *service) Quote(ctx context.Context, caller partner.Caller, req QuoteRequest) (Quote, error) {
	q, err := s.validate(caller, req)
	if err != nil {
		return Quote{}, err
	}
	id := s.quoteID(caller.KeyID, q)
	expires := s.now().UTC().Add(s.ttl).Truncate(time.Second)
	if err := s.store.Save(ctx, StoredQuote{
		ID: id, Owner: caller.KeyID, Chain: q.chain, CryptoCurrency: q.crypto, TokenCurrency: q.tokenCurrency,
		FiatCurrency: q.fiat, Country: q.country, CryptoAmount: q.cryptoAmount, FiatAmount: q.fiatAmount,
		Rail: q.rail.Name, Settlement: q.rail.Settlement, ExpiresAt: expires,
	}); err != nil {
		return Quote{}, fmt.Errorf("save quote: %w", err)
	}
	return Quote{
		Mock:                true,
		QuoteID:             id,
		CryptoAmount:        MockMoney,
		FiatAmount:          MockMoney,
		Rate:                MockMoney,
		Rail:                q.rail.Name,
		EstimatedSettlement: q.rail.Settlement,
		ProviderFee:         MockMoney,
		OurFee:              MockMoney,
		ExpiresAt:           expires.Format(time.RFC3339),
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
	if _, ok := format.CanonicalCurrency(q.fiat); !ok {
		return q, envelope.InvalidRequest("fiatCurrency is not an ISO 4217 currency code.")
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
	if q.rail, ok = catalog.ResolveRail(q.fiat, q.country, forced); !ok {
		if forced != "" {
			return q, envelope.New(envelope.CodeNoRoute,
				"The forced rail does not serve "+q.fiat+" to "+q.country+"; see GET /v1/limits.")
		}
		return q, envelope.New(envelope.CodeNoRoute,
			"No payout rail serves "+q.fiat+" to "+q.country+"; see GET /v1/limits.")
	}
	return q, nil
}

// quoteID is bpq_<chain>_<32 hex>: an HMAC under the server secret of the key
// id and the canonical request, so the same request from the same key gets
// the same id, and nobody without the secret can make one.
func (s *service) quoteID(keyID string, q canonicalQuote) string {
	mac := hmac.New(sha256.New, s.secret)
	fmt.Fprintf(mac, "bpq/v1\x00%s\x00%d\x00%s\x00%s\x00%s\x00crypto=%s\x00fiat=%s\x00%s",
		keyID, q.chain, q.crypto, q.fiat, q.country, q.cryptoAmount, q.fiatAmount, q.rail.Name)
	return "bpq_" + strconv.FormatInt(q.chain, 10) + "_" + hex.EncodeToString(mac.Sum(nil)[:16])
}
