// Package reference is GET /v1/config and the reference lists
// (currencies, limits, countries, rates, payment methods, statuses): what
// a partner reads before it quotes. They need only the catalogue and the
// key's grants, so every service serves them (a go-kit service of its own,
// mounted on each service's mux), and the gateway reads them from whichever
// service answers: the death of one service does not take them down.
package reference

import (
	"context"
	"log/slog"
	"net/http"
	"slices"

	"github.com/go-kit/kit/endpoint"

	"github.com/partnerpay/api/pkg/beneficiary"
	"github.com/partnerpay/api/pkg/catalog"
	"github.com/partnerpay/api/pkg/environment"
	"github.com/partnerpay/api/pkg/format"
	"github.com/partnerpay/api/pkg/kithttp"
	"github.com/partnerpay/api/pkg/lifecycle"
	"github.com/partnerpay/api/pkg/partner"
)

// Service answers the reference reads.
type Service interface {
	Config(ctx context.Context, caller partner.Caller) (Config, error)
	Currencies(ctx context.Context) Currencies
	Limits(ctx context.Context) Limits
	Countries(ctx context.Context) Countries
	Rates(ctx context.Context) Rates
	PaymentMethods(ctx context.Context) PaymentMethods
	Statuses(ctx context.Context) Statuses
}

type service struct{ chains *catalog.Chains }

var _ Service = (*service)(nil)

// NewService returns the reference reads of environment env's catalogue.
func NewService(env environment.Name) Service { return &service{chains: catalog.ChainsFor(env)} }

// Routes mounts the reference reads on mux: each measured by o, not logged
// (the gateway's request line says all there is to say about them).
func Routes(mux *http.ServeMux, s Service, o *kithttp.Observer, log *slog.Logger) {
	mux.Handle("GET /v1/config", kithttp.Server(o.Quiet("config", kithttp.Endpoint(func(ctx context.Context, c partner.Caller, _ struct{}) (Config, error) {
		return s.Config(ctx, c)
	})), kithttp.DecodeCaller, log))
	for _, r := range []struct {
		path, op string
		e        endpoint.Endpoint
	}{
		{"/v1/currencies", "currencies", read(s.Currencies)},
		{"/v1/limits", "limits", read(s.Limits)},
		{"/v1/countries", "countries", read(s.Countries)},
		{"/v1/rates", "rates", read(s.Rates)},
		{"/v1/payment-methods", "payment_methods", read(s.PaymentMethods)},
		{"/v1/statuses", "statuses", read(s.Statuses)},
	} {
		mux.Handle("GET "+r.path, kithttp.Server(o.Quiet(r.op, r.e), kithttp.DecodeCaller, log))
	}
}

// read adapts a reference list, which needs no caller and cannot fail.
func read[R any](f func(context.Context) R) endpoint.Endpoint {
	return func(ctx context.Context, _ any) (any, error) { return f(ctx), nil }
}

// Config is GET /v1/config: what the calling key may do.
type Config struct {
	Products          []string        `json:"products"`
	MaxExecutionUSD   string          `json:"maxExecutionUsd"`
	Crypto            CryptoGrants    `json:"crypto"`
	Corridors         Corridors       `json:"corridors"`
	SettlementNetwork catalog.Network `json:"settlementNetwork"`
	ReadBack          ReadBack        `json:"readBack"`
}

// CryptoGrants are the chains and tokens the key may name.
type CryptoGrants struct {
	Chains partner.Chains      `json:"chains"`
	Tokens map[string][]string `json:"tokens"`
}

// Corridors are the fiat routes open to the key.
type Corridors struct {
	Bank []BankCorridor `json:"bank"`
	Card []CardCorridor `json:"card"`
}

// BankCorridor is a payout currency and the rails that carry it.
type BankCorridor struct {
	FiatCurrency string   `json:"fiatCurrency"`
	Rails        []string `json:"rails"`
}

// CardCorridor is a card on/off-ramp route (catalog.CardCorridors): the
// cardholders' countries it serves, what the hosted card page offers in
// it, its directions and its per-order limits.
type CardCorridor struct {
	FiatCurrency   string   `json:"fiatCurrency"`
	Countries      []string `json:"countries"`
	PaymentMethods []string `json:"paymentMethods"`
	Directions     []string `json:"directions"`
	MinAmount      string   `json:"minAmount"`
	MaxAmount      string   `json:"maxAmount"`
}

// ReadBack says which records can be read again after they were created:
// asking for a user's virtual account again answers the same bank details.
type ReadBack struct {
	VirtualAccounts bool `json:"virtualAccounts"`
}

// Currencies is GET /v1/currencies: the token catalogue per chain.
type Currencies struct {
	Chains         []catalog.Chain `json:"chains"`
	FiatCurrencies []string        `json:"fiatCurrencies"`
}

// Limits is GET /v1/limits: the payout rails and their limits.
type Limits struct {
	SettlementNotation string         `json:"settlementNotation"`
	Rails              []RailLimit    `json:"rails"`
	CardCorridors      []CardCorridor `json:"cardCorridors"`
	// ReferenceRatesUSD value one unit of each payout currency in USD, to
	// hold a payout against maxExecutionUsd; stablecoins count at par.
	ReferenceRatesUSD map[string]string `json:"referenceRatesUsd"`
}

// RailLimit is one published rail. OtherCountries marks the catch-all rail:
// it serves every country the other rails do not serve in that currency.
type RailLimit struct {
	Rail           string   `json:"rail"`
	Currencies     []string `json:"currencies"`
	Countries      []string `json:"countries"`
	OtherCountries bool     `json:"otherCountries"`
	Settlement     string   `json:"settlement"`
	MinAmount      string   `json:"minAmount"`
	MaxAmount      string   `json:"maxAmount"`
	// Beneficiary is the JSON Schema of the beneficiary a payout on the
	// rail takes (POST /v1/bank/payout): its fields, required ones and
	// patterns. Check digits are checked beyond it.
	Beneficiary *beneficiary.Schema `json:"beneficiary"`
}

// Rates is GET /v1/rates: the reference rates, USD per unit of each fiat
// currency and stablecoin. They hold transfers to maxExecutionUsd and
// convert crypto amounts for rail limits; they are never a price.
type Rates struct {
	Indicative  bool              `json:"indicative"`
	Base        string            `json:"base"`
	Notice      string            `json:"notice"`
	Fiat        map[string]string `json:"fiat"`
	Stablecoins map[string]string `json:"stablecoins"`
}

// PaymentMethods is GET /v1/payment-methods.
type PaymentMethods struct {
	PaymentMethods []PaymentMethod `json:"paymentMethods"`
}

// PaymentMethod is one way value moves, its directions, and whether this
// deployment offers it.
type PaymentMethod struct {
	Method      string   `json:"method"`
	Directions  []string `json:"directions"`
	Offered     bool     `json:"offered"`
	Description string   `json:"description"`
	Rails       []string `json:"rails,omitempty"`
}

// Statuses is GET /v1/statuses: every status of every resource.
type Statuses struct {
	Resources []lifecycle.Resource `json:"resources"`
}

// Countries is GET /v1/countries.
type Countries struct {
	Countries []CountryEntry `json:"countries"`
}

// CountryEntry is a country and the payout rails that reach it, fastest first.
type CountryEntry struct {
	Code        string   `json:"code"`
	Name        string   `json:"name"`
	PayoutRails []string `json:"payoutRails"`
}

var (
	limits = func() Limits {
		l := Limits{SettlementNotation: catalog.SettlementNotation, ReferenceRatesUSD: catalog.ReferenceRatesUSD, CardCorridors: cardCorridors}
		for _, r := range catalog.Rails() {
			countries := r.CountryList()
			l.Rails = append(l.Rails, RailLimit{
				Rail: r.Name, Currencies: r.Currencies, Countries: nonNil(countries),
				OtherCountries: countries == nil, Settlement: r.Settlement,
				MinAmount: r.MinAmount, MaxAmount: r.MaxAmount, Beneficiary: beneficiary.SchemaOf(r.Name),
			})
		}
		return l
	}()
	countries = func() Countries {
		var out Countries
		for _, c := range format.Countries() {
			out.Countries = append(out.Countries, CountryEntry{Code: c.Code, Name: c.Name, PayoutRails: nonNil(catalog.CountryRails(c.Code))})
		}
		return out
	}()
	paymentMethods = func() PaymentMethods {
		var rails []string
		for _, r := range catalog.Rails() {
			rails = append(rails, r.Name)
		}
		return PaymentMethods{PaymentMethods: []PaymentMethod{
			{Method: "crypto", Directions: []string{"deposit"}, Offered: true,
				Description: "Stablecoins sent from a wallet on one chain and delivered on another: POST /v1/deposit/quote."},
			{Method: "bank_transfer", Directions: []string{"payin", "payout"}, Offered: true, Rails: rails,
				Description: "A bank transfer in to a virtual account or a one-off deposit (on-ramp), or out to a bank account over a payout rail (POST /v1/bank/payout/quote); rails as GET /v1/limits publishes them."},
			{Method: "card", Directions: []string{"payin", "payout"}, Offered: catalog.CardMethodOffered(catalog.MethodCard, catalog.DirectionBuy),
				Description: "A card on the card provider's hosted page: it pays for a buy order or is credited for a sell (POST /v1/orders, then POST /v1/orders/link); the card corridors are in GET /v1/limits."},
			{Method: "apple_pay", Directions: []string{"payin"}, Offered: catalog.CardMethodOffered(catalog.MethodApplePay, catalog.DirectionBuy),
				Description: "Apple Pay on the card provider's hosted page, for buy orders in the card corridors that have it (GET /v1/limits)."},
		}}
	}()
	cardCorridors = func() []CardCorridor {
		out := []CardCorridor{}
		for _, c := range catalog.CardCorridors() {
			out = append(out, CardCorridor{FiatCurrency: c.FiatCurrency, Countries: c.CountryList(), PaymentMethods: c.Methods,
				Directions: c.Directions, MinAmount: c.MinAmount, MaxAmount: c.MaxAmount})
		}
		return out
	}()
	bankCorridors = func() []BankCorridor {
		var out []BankCorridor
		for _, cur := range catalog.PayoutCurrencies() {
			bc := BankCorridor{FiatCurrency: cur}
			for _, r := range catalog.Rails() {
				if slices.Contains(r.Currencies, cur) {
					bc.Rails = append(bc.Rails, r.Name)
				}
			}
			out = append(out, bc)
		}
		return out
	}()
)

func (s *service) Config(_ context.Context, caller partner.Caller) (Config, error) {
	g := caller.Grants
	c := Config{
		Products:        nonNil(g.Products),
		MaxExecutionUSD: g.MaxExecutionUSD,
		Crypto: CryptoGrants{
			Chains: partner.Chains{Source: nonNil(g.Chains.Source), Destination: nonNil(g.Chains.Destination)},
			Tokens: g.Tokens,
		},
		Corridors:         Corridors{Bank: []BankCorridor{}, Card: []CardCorridor{}},
		SettlementNetwork: s.chains.Settlement,
		ReadBack:          ReadBack{VirtualAccounts: true},
	}
	if c.Crypto.Tokens == nil {
		c.Crypto.Tokens = map[string][]string{}
	}
	if g.HasProduct(partner.ProductBank) {
		c.Corridors.Bank = bankCorridors
	}
	if g.HasProduct(partner.ProductCard) {
		c.Corridors.Card = cardCorridors
	}
	return c, nil
}

func (s *service) Currencies(context.Context) Currencies {
	return Currencies{Chains: s.chains.List, FiatCurrencies: catalog.PayoutCurrencies()}
}

func (s *service) Limits(context.Context) Limits { return limits }

func (s *service) Rates(context.Context) Rates {
	return Rates{Indicative: true, Base: "USD",
		Notice:      "Indicative reference rates: what holds a transfer to maxExecutionUsd and converts a crypto amount for a rail's limits. Never a price; they change by release.",
		Fiat:        catalog.ReferenceRatesUSD,
		Stablecoins: s.chains.StablecoinRatesUSD()}
}

func (s *service) PaymentMethods(context.Context) PaymentMethods { return paymentMethods }

func (s *service) Statuses(context.Context) Statuses { return Statuses{Resources: lifecycle.All()} }

func (s *service) Countries(context.Context) Countries { return countries }

// nonNil makes an absent list encode as [] rather than null.
func nonNil[T any](xs []T) []T {
	if xs == nil {
		return []T{}
	}
	return xs
}
