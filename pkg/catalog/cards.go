package catalog

import (
	"math/big"
	"slices"
	"sort"

	"github.com/partnerpay/api/pkg/envelope"
)

// Card orders: a user buys stablecoins with a card (or Apple Pay) on the
// card provider's hosted page, or sells them and has the card credited.
const (
	DirectionBuy  = "buy"
	DirectionSell = "sell"

	MethodCard     = "card"
	MethodApplePay = "apple_pay"
)

// CardCorridor is a published card route: the fiat currency the card is
// charged (buy) or credited (sell) in, the countries of the cardholders it
// serves, what the hosted page offers in it, which directions, and the
// per-order limits in major units of the currency, as published (GET
// /v1/limits) and as enforced.
type CardCorridor struct {
	FiatCurrency string
	Countries    map[string]bool
	Methods      []string // card, apple_pay: what the hosted page offers
	Directions   []string // buy, sell
	MinAmount    string
	MaxAmount    string
	min, max     *big.Rat
}

// eurozone are the countries whose cards the EUR corridor takes.
var eurozone = setOf("AT", "BE", "CY", "DE", "EE", "ES", "FI", "FR", "GR", "HR", "IE", "IT", "LT", "LU", "LV", "MT", "NL", "PT", "SI", "SK")

var cardCorridors = func() []CardCorridor {
	both, buy := []string{DirectionBuy, DirectionSell}, []string{DirectionBuy}
	out := []CardCorridor{
		{FiatCurrency: "EUR", Countries: eurozone, Methods: []string{MethodCard, MethodApplePay}, Directions: both, MinAmount: "20", MaxAmount: "5000"},
		{FiatCurrency: "GBP", Countries: setOf("GB"), Methods: []string{MethodCard, MethodApplePay}, Directions: both, MinAmount: "20", MaxAmount: "5000"},
		{FiatCurrency: "USD", Countries: setOf("US"), Methods: []string{MethodCard, MethodApplePay}, Directions: both, MinAmount: "20", MaxAmount: "10000"},
		{FiatCurrency: "BRL", Countries: setOf("BR"), Methods: []string{MethodCard}, Directions: buy, MinAmount: "100", MaxAmount: "25000"},
	}
	for i := range out {
		out[i].min, _ = new(big.Rat).SetString(out[i].MinAmount)
		out[i].max, _ = new(big.Rat).SetString(out[i].MaxAmount)
	}
	return out
}()

// CardCorridors are the published card corridors.
func CardCorridors() []CardCorridor { return cardCorridors }

// CountryList is the corridor's countries, sorted.
func (c *CardCorridor) CountryList() []string {
	out := make([]string, 0, len(c.Countries))
	for k := range c.Countries {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// Offers reports whether the corridor's hosted page offers method.
func (c *CardCorridor) Offers(method string) bool { return slices.Contains(c.Methods, method) }

// CardMethodOffered reports whether some corridor offers method in
// direction: what GET /v1/payment-methods says.
func CardMethodOffered(method, direction string) bool {
	for i := range cardCorridors {
		c := &cardCorridors[i]
		if c.Offers(method) && slices.Contains(c.Directions, direction) {
			return true
		}
	}
	return false
}

// FindCardCorridor is the corridor of an order (currency and country
// canonical), or a 400 no_route that says what is missing.
func FindCardCorridor(direction, currency, country string) (*CardCorridor, error) {
	for i := range cardCorridors {
		c := &cardCorridors[i]
		if c.FiatCurrency != currency || !c.Countries[country] {
			continue
		}
		if !slices.Contains(c.Directions, direction) {
			return nil, envelope.New(envelope.CodeNoRoute, "The "+currency+" card corridor for "+country+" takes buy orders only; see GET /v1/limits.")
		}
		return c, nil
	}
	return nil, envelope.New(envelope.CodeNoRoute, "No card corridor serves "+currency+" for cardholders in "+country+"; see GET /v1/limits.")
}

// CheckAmount holds an order's fiat amount to the corridor's per-order
// limits: a 400 no_route that gives them otherwise.
func (c *CardCorridor) CheckAmount(amount *big.Rat) error {
	if amount.Cmp(c.min) < 0 || amount.Cmp(c.max) > 0 {
		return envelope.New(envelope.CodeNoRoute, "The "+c.FiatCurrency+" card corridor takes "+c.MinAmount+" to "+c.MaxAmount+" "+c.FiatCurrency+
			" per order; this order is "+Figure(amount)+" "+c.FiatCurrency+"; see GET /v1/limits.")
	}
	return nil
}
