// Package reference is GET /v1/config and the reference lists
// (currencies, limits, countries, rates, payment methods, statuses): what
// a partner reads before it quotes. They need only the catalogue and the
// key's grants, which the gateway holds, so the gateway answers them itself
// (DESIGN §1): no service is asked, and none being down takes them down.
// The lists are the same for every key: their answers are encoded once.
package reference

import (
	"net/http"
	"slices"
	"strconv"
	"time"

	"github.com/partnerpay/api/pkg/beneficiary"
	"github.com/partnerpay/api/pkg/catalog"
	"github.com/partnerpay/api/pkg/envelope"
	"github.com/partnerpay/api/pkg/environment"
	"github.com/partnerpay/api/pkg/format"
	"github.com/partnerpay/api/pkg/lifecycle"
	"github.com/partnerpay/api/pkg/partner"
)

// Paths are the reads this package answers, all GET.
var Paths = []string{"/v1/config", "/v1/currencies", "/v1/limits", "/v1/countries", "/v1/statuses", "/v1/payment-methods", "/v1/rates"}

// Reads answers the reference reads of one environment.
type Reads struct {
	env    environment.Name
	chains *catalog.Chains
	lists  map[string][]byte // path → the whole answer, environment first
}

// New returns the reads of environment env's catalogue.
func New(env environment.Name) *Reads {
	r := &Reads{env: env, chains: catalog.ChainsFor(env)}
	r.lists = map[string][]byte{
		"/v1/currencies":      r.body(Currencies{Chains: r.chains.List, FiatCurrencies: catalog.PayoutCurrencies()}),
		"/v1/limits":          r.body(limits),
		"/v1/countries":       r.body(countries),
		"/v1/statuses":        r.body(Statuses{Resources: lifecycle.All(), EventTypes: lifecycle.EventTypes()}),
		"/v1/payment-methods": r.body(paymentMethods),
		"/v1/rates":           r.body(r.rates()),
	}
	return r
}

// body is v's answer: its JSON object with environment first, as every
// answer of the API has it.
func (r *Reads) body(v any) []byte {
	b, err := envelope.JSON(v)
	if err != nil || len(b) < 2 || b[0] != '{' {
		panic("reference: " + strconv.Quote(string(b)) + " is not an object")
	}
	out := append([]byte(`{"environment":`+strconv.Quote(string(r.env))), ',')
	if string(b) == "{}" {
		return append(out[:len(out)-1], '}')
	}
	return append(out, b[1:]...)
}

// Serve answers the read at path for a key with grants; false for a path
// that is not one of Paths.
func (r *Reads) Serve(w http.ResponseWriter, path string, grants partner.Grants) bool {
	b, ok := r.lists[path]
	if !ok {
		if path != "/v1/config" {
			return false
		}
		b = r.body(r.Config(grants))
	}
	r.write(w, b)
	return true
}

// Me is GET /v1/keys/me: what the calling key may do, and from where and
// until when (DESIGN §2). Never the key or its fingerprint.
type Me struct {
	KeyID           string              `json:"keyId"`
	Scope           string              `json:"scope"`
	Products        []string            `json:"products"`
	Chains          partner.Chains      `json:"chains"`
	Tokens          map[string][]string `json:"tokens"`
	RatePerSecond   int                 `json:"ratePerSecond"`
	MaxExecutionUSD string              `json:"maxExecutionUsd"`
	// AllowedIPs are CIDR ranges; empty, the key is allowed from anywhere.
	AllowedIPs []string `json:"allowedIps"`
	// ExpiresAt is null for a key that does not expire.
	ExpiresAt *time.Time `json:"expiresAt"`
}

// ServeMe answers GET /v1/keys/me.
func (r *Reads) ServeMe(w http.ResponseWriter, me Me) {
	if me.Products == nil {
		me.Products = []string{}
	}
	if me.Chains.Source == nil {
		me.Chains.Source = []int64{}
	}
	if me.Chains.Destination == nil {
		me.Chains.Destination = []int64{}
	}
	if me.Tokens == nil {
		me.Tokens = map[string][]string{}
	}
	if me.AllowedIPs == nil {
		me.AllowedIPs = []string{}
	}
	if me.ExpiresAt != nil {
		at := me.ExpiresAt.UTC()
		me.ExpiresAt = &at
	}
	r.write(w, r.body(me))
}

func (r *Reads) write(w http.ResponseWriter, b []byte) {
	h := w.Header()
	h.Set("Content-Type", "application/json")
	h.Set("Content-Length", strconv.Itoa(len(b)))
	h.Set("Cache-Control", "no-store")
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write(b)
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

// Statuses is GET /v1/statuses: every status of every resource, and every
// type of event GET /v1/events answers.
type Statuses struct {
	Resources  []lifecycle.Resource `json:"resources"`
	EventTypes []string             `json:"eventTypes"`
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

// Config is what a key with grants may do.
func (r *Reads) Config(g partner.Grants) Config {
	c := Config{
		Products:        nonNil(g.Products),
		MaxExecutionUSD: g.MaxExecutionUSD,
		Crypto: CryptoGrants{
			Chains: partner.Chains{Source: nonNil(g.Chains.Source), Destination: nonNil(g.Chains.Destination)},
			Tokens: g.Tokens,
		},
		Corridors:         Corridors{Bank: []BankCorridor{}, Card: []CardCorridor{}},
		SettlementNetwork: r.chains.Settlement,
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
	return c
}

func (r *Reads) rates() Rates {
	return Rates{Indicative: true, Base: "USD",
		Notice:      "Indicative reference rates: what holds a transfer to maxExecutionUsd and converts a crypto amount for a rail's limits. Never a price; they change by release.",
		Fiat:        catalog.ReferenceRatesUSD,
		Stablecoins: r.chains.StablecoinRatesUSD()}
}

// nonNil makes an absent list encode as [] rather than null.
func nonNil[T any](xs []T) []T {
	if xs == nil {
		return []T{}
	}
	return xs
}
