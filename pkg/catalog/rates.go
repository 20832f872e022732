package catalog

import "math/big"

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

// USDValue converts amount (a decimal string) of currency to USD at the
// reference rate. ok is false for a currency without a published rate or an
// amount that is not a decimal.
func USDValue(amount, currency string) (usd *big.Rat, ok bool) {
	rate, ok := ReferenceRatesUSD[currency]
	if !ok {
		return nil, false
	}
	a, ok := new(big.Rat).SetString(amount)
	if !ok {
		return nil, false
	}
	r, _ := new(big.Rat).SetString(rate)
	return a.Mul(a, r), true
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
