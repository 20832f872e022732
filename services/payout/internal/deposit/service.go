// Package deposit is the crypto deposit quote: a stablecoin sent from a
// wallet on one chain and delivered in the same currency on another. It is
// a mock while the bridge provider is being connected, and it shares the
// quote machinery of the bank payout quote (package quote: instances, HMAC
// ids, tombstones). Business logic only; HTTP lives in transport.go.
package deposit

import (
	"context"
	"encoding/json"
	"fmt"
	"math/big"
	"strconv"
	"strings"
	"time"

	"github.com/partnerpay/api/pkg/catalog"
	"github.com/partnerpay/api/pkg/envelope"
	"github.com/partnerpay/api/pkg/environment"
	"github.com/partnerpay/api/pkg/format"
	"github.com/partnerpay/api/pkg/partner"
	"github.com/partnerpay/api/services/payout/internal/quote"
)

// MockFigure is every figure the bridge provider would compute, while it
// is a mock: an integer, since these are smallest units.
const MockFigure = "123456789"

// Settlement is the bridge's normal settlement time (ISO 8601 duration,
// the notation of GET /v1/limits): its usual behaviour, never a promise.
const Settlement = "PT15M"

// Kind is the deposit quote's: ids dq_<source chain>_<32 hex>.
var Kind = quote.Kind{Prefix: "dq"}

// Service is what the deposit quote does.
type Service interface {
	Quote(ctx context.Context, caller partner.Caller, req QuoteRequest) (Quote, error)
}

// Side is one end of a deposit: a wallet, its chain, and the token's
// contract address.
type Side struct {
	Address string `json:"address"`
	Chain   int64  `json:"chain"`
	Token   string `json:"token"`
}

// QuoteRequest is the body of POST /v1/deposit/quote.
type QuoteRequest struct {
	Source      *Side  `json:"source"`
	Destination *Side  `json:"destination"`
	Amount      string `json:"amount"` // the source token's smallest unit
	Method      string `json:"method"`
}

// Quote is the answer, less environment; the field order is the wire's.
type Quote struct {
	Mock                bool   `json:"mock"`
	QuoteID             string `json:"quoteId"`
	Source              Side   `json:"source"`
	Destination         Side   `json:"destination"`
	Method              string `json:"method"`
	AmountIn            string `json:"amountIn"`
	AmountOut           string `json:"amountOut"`
	Fee                 string `json:"fee"`
	EstimatedSettlement string `json:"estimatedSettlement"`
	ExpiresAt           string `json:"expiresAt"`
}

// Opener opens quote instances (quote.Book in production).
type Opener interface {
	Open(ctx context.Context, k quote.Kind, keyID string, chain int64, canonical string, ttl time.Duration,
		build func(id string, expiresAt time.Time) ([]byte, error)) (quote.Offer, error)
}

type service struct {
	chains *catalog.Chains
	ttl    time.Duration
	book   Opener
}

var _ Service = (*service)(nil)

// NewService returns the deposit quote service; ttl is a quote's life.
func NewService(env environment.Name, ttl time.Duration, book Opener) Service {
	return &service{chains: catalog.ChainsFor(env), ttl: ttl, book: book}
}

func (s *service) Quote(ctx context.Context, caller partner.Caller, req QuoteRequest) (Quote, error) {
	q, err := s.validate(caller, req)
	if err != nil {
		return Quote{}, err
	}
	canonical := strings.Join([]string{strconv.FormatInt(q.Source.Chain, 10), q.Source.Token, q.Source.Address,
		strconv.FormatInt(q.Destination.Chain, 10), q.Destination.Token, q.Destination.Address, q.AmountIn, q.Method}, "\x00")
	offer, err := s.book.Open(ctx, Kind, caller.KeyID, q.Source.Chain, strings.ToLower(canonical), s.ttl, func(id string, expires time.Time) ([]byte, error) {
		q.QuoteID, q.ExpiresAt = id, expires.UTC().Format(time.RFC3339)
		return json.Marshal(q)
	})
	if err != nil {
		return Quote{}, err
	}
	var out Quote
	if err := json.Unmarshal(offer.Record, &out); err != nil {
		return Quote{}, fmt.Errorf("stored deposit quote: %w", err)
	}
	return out, nil
}

// validate applies DESIGN §5's checks in order and returns the quote to
// offer (without id and expiry): shape and formats; each chain in the
// catalogue and each token a catalogue token on its chain; the key's source
// chain, then destination chain; the key's tokens; a route; the ceiling.
func (s *service) validate(caller partner.Caller, req QuoteRequest) (Quote, error) {
	src, err := sideFormat("source", req.Source, "sent from")
	if err != nil {
		return Quote{}, err
	}
	dst, err := sideFormat("destination", req.Destination, "delivered to")
	if err != nil {
		return Quote{}, err
	}
	amount, err := format.SmallestUnit("amount", req.Amount)
	if err != nil {
		return Quote{}, err
	}
	switch req.Method {
	case "":
		return Quote{}, envelope.InvalidRequest(`method is required: "crypto".`)
	case "crypto":
	default:
		return Quote{}, envelope.InvalidRequest(`method must be "crypto": the deposit is sent from a wallet.`)
	}

	srcToken, err := s.token("source", src)
	if err != nil {
		return Quote{}, err
	}
	dstToken, err := s.token("destination", dst)
	if err != nil {
		return Quote{}, err
	}
	if err := caller.Grants.AllowChain(partner.Source, src.Chain); err != nil {
		return Quote{}, err
	}
	if err := caller.Grants.AllowChain(partner.Destination, dst.Chain); err != nil {
		return Quote{}, err
	}
	for _, side := range []struct {
		name partner.Side
		s    Side
	}{{partner.Source, src}, {partner.Destination, dst}} {
		if err := caller.Grants.AllowToken(side.name, side.s.Chain, side.s.Token); err != nil {
			return Quote{}, err
		}
	}
	switch {
	case srcToken.Currency != dstToken.Currency:
		return Quote{}, envelope.New(envelope.CodeNoRoute, "There is no route from "+srcToken.Symbol+" to "+dstToken.Symbol+
			": a deposit delivers the same currency on another chain.")
	case src.Chain == dst.Chain && src.Token == dst.Token:
		return Quote{}, envelope.New(envelope.CodeNoRoute, "Source and destination are the same token on the same chain: there is nothing to move.")
	case src.Chain == dst.Chain:
		return Quote{}, envelope.New(envelope.CodeNoRoute, "There is no route from "+srcToken.Symbol+" to "+dstToken.Symbol+
			" on the same chain: a deposit moves a stablecoin across chains.")
	}
	if err := ceiling(amount, srcToken, caller.Grants.MaxExecutionUSD); err != nil {
		return Quote{}, err
	}
	return Quote{Mock: true, Source: src, Destination: dst, Method: req.Method, AmountIn: amount,
		AmountOut: MockFigure, Fee: MockFigure, EstimatedSettlement: Settlement}, nil
}

// sideFormat checks one side's shape; the addresses come back checksummed.
func sideFormat(name string, side *Side, verb string) (Side, error) {
	if side == nil {
		return Side{}, envelope.InvalidRequest(name + " is required: the address, chain and token the stablecoins are " + verb + ".")
	}
	var out Side
	var err error
	if out.Address, err = format.EVMAddress(name+".address", side.Address); err != nil {
		return Side{}, err
	}
	if err := format.ChainID(name+".chain", side.Chain); err != nil {
		return Side{}, err
	}
	out.Chain = side.Chain
	if out.Token, err = format.EVMAddress(name+".token", side.Token); err != nil {
		return Side{}, err
	}
	return out, nil
}

// token is the catalogue check of one side: its chain is listed and its
// token is a catalogue token on it.
func (s *service) token(name string, side Side) (catalog.Token, error) {
	ch, err := s.chains.Find(name+".chain", side.Chain)
	if err != nil {
		return catalog.Token{}, err
	}
	for _, t := range ch.Tokens {
		if strings.EqualFold(t.Address, side.Token) {
			return t, nil
		}
	}
	return catalog.Token{}, envelope.InvalidRequest(name + ".token " + side.Token + " is not a token on chain " +
		strconv.FormatInt(side.Chain, 10) + "; see GET /v1/currencies.")
}

// ceiling holds the deposit to maxExecutionUsd: amount is in the source
// token's smallest unit, valued at par with the token's currency.
func ceiling(amount string, t catalog.Token, max string) error {
	units, _ := new(big.Rat).SetString(amount)
	major := units.Quo(units, new(big.Rat).SetInt(new(big.Int).Exp(big.NewInt(10), big.NewInt(int64(t.Decimals)), nil)))
	return catalog.CheckCeiling("deposit", major, t.Currency, max)
}
