package catalog

import (
	"fmt"
	"math/big"

	"github.com/partnerpay/api/pkg/envelope"
)

// ReferenceRatesUSD are the published USD values of one unit of each payout
// currency: what holds a transfer against a key's maxExecutionUsd, converts
// a crypto amount for a rail's limits, and what GET /v1/rates publishes.
// Stablecoins count at par with the currency they are pegged to. They are
// reference figures, never prices: they change by release.
var ReferenceRatesUSD = map[string]string{
	"USD": "1",
	"EUR": "1.08",
	"GBP": "1.27",
	"MXN": "0.058",
	"BRL": "0.18",
}

// Convert converts amount (major units of from) to to at the reference
// rates. ok is false when either currency has no published rate.
func Convert(amount *big.Rat, from, to string) (*big.Rat, bool) {
	f, ok1 := rate(from)
	t, ok2 := rate(to)
	if !ok1 || !ok2 {
		return nil, false
	}
	out := new(big.Rat).Mul(amount, f)
	return out.Quo(out, t), true
}

func rate(currency string) (*big.Rat, bool) {
	s, ok := ReferenceRatesUSD[currency]
	if !ok {
		return nil, false
	}
	return new(big.Rat).SetString(s)
}

// USDValue is the value of amount (major units of currency: a fiat code,
// or the one a stablecoin is pegged to) in USD at the reference rates. ok
// is false for a currency without a published rate.
func USDValue(amount *big.Rat, currency string) (usd *big.Rat, ok bool) {
	return Convert(amount, currency, "USD")
}

// CheckCeiling holds a transfer to a key's maxExecutionUsd: the one
// computation of a transfer's USD value that payouts, crypto deposits and
// card orders are all held to (stablecoins at par with their currency,
// fiat at the reference rates of GET /v1/rates). what names the transfer
// in the refusal ("payout", "deposit", "order").
func CheckCeiling(what string, amount *big.Rat, currency, ceiling string) error {
	usd, ok := USDValue(amount, currency)
	if !ok {
		return fmt.Errorf("no reference rate for %s", currency)
	}
	limit, ok := new(big.Rat).SetString(ceiling)
	if !ok {
		return fmt.Errorf("key ceiling %q is not a decimal", ceiling)
	}
	if usd.Cmp(limit) > 0 {
		return envelope.New(envelope.CodeExecutionCapped,
			"This "+what+" is worth more than the key's maxExecutionUsd of "+ceiling+" USD at the reference rates of GET /v1/rates.")
	}
	return nil
}

// StablecoinRatesUSD values one unit of each stablecoin of the catalogue in
// USD: at par with the currency it is pegged to.
func (c *Chains) StablecoinRatesUSD() map[string]string {
	out := map[string]string{}
	for _, ch := range c.List {
		for _, t := range ch.Tokens {
			if r, ok := ReferenceRatesUSD[t.Currency]; ok {
				out[t.Symbol] = r
			}
		}
	}
	return out
}
