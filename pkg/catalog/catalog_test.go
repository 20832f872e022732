package catalog

import (
	"math/big"
	"testing"

	"github.com/partnerpay/api/pkg/environment"
)

func TestResolveRail(t *testing.T) {
	tests := []struct {
		name, currency, country, forced string
		want                            string
		ok                              bool
	}{
		{"EUR to Germany takes the fastest SEPA rail", "EUR", "DE", "", "sepa_instant", true},
		{"EUR to the UK is in the SEPA area", "EUR", "GB", "", "sepa_instant", true},
		{"forced sepa is honoured", "EUR", "FR", "sepa", "sepa", true},
		{"forced rail is case-insensitive", "EUR", "FR", "SEPA", "sepa", true},
		{"EUR outside SEPA goes by swift", "EUR", "US", "", "swift", true},
		{"USD to the US prefers wire over ach", "USD", "US", "", "wire", true},
		{"forced ach", "USD", "US", "ach", "ach", true},
		{"USD abroad goes by swift", "USD", "DE", "", "swift", true},
		{"swift cannot be forced where a specific rail serves", "USD", "US", "swift", "swift", false},
		{"GBP to GB is faster payments", "GBP", "GB", "", "faster_payments", true},
		{"GBP to France is swift", "GBP", "FR", "", "swift", true},
		{"MXN to Mexico is SPEI", "MXN", "MX", "", "spei", true},
		{"BRL to Brazil is PIX", "BRL", "BR", "", "pix", true},
		{"MXN outside Mexico has no route", "MXN", "US", "", "", false},
		{"JPY has no rail", "JPY", "JP", "", "", false},
		{"forced rail that does not serve the currency", "EUR", "DE", "pix", "pix", false},
		{"unknown forced rail", "EUR", "DE", "carrier_pigeon", "", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, ok := ResolveRail(tt.currency, tt.country, tt.forced)
			if ok != tt.ok || (ok && got.Name != tt.want) {
				t.Fatalf("ResolveRail(%s,%s,%q) = %q,%v; want %q,%v", tt.currency, tt.country, tt.forced, got.Name, ok, tt.want, tt.ok)
			}
		})
	}
}

func TestChainsFor(t *testing.T) {
	sb := ChainsFor(environment.Sandbox)
	ch, ok := sb.Chain(84532)
	if !ok || !ch.Testnet {
		t.Fatalf("sandbox lacks Base Sepolia testnet")
	}
	if tok, ok := ch.Token("usdc"); !ok || tok.Address != "0x036CbD53842c5426634e7929541eC2318f3dCF7e" {
		t.Errorf("Base Sepolia USDC = %+v, %v", tok, ok)
	}
	if _, ok := sb.Chain(1); ok {
		t.Error("sandbox lists Ethereum mainnet")
	}
	if sb.Settlement.Chain != 84532 {
		t.Errorf("sandbox settles on %d", sb.Settlement.Chain)
	}
	prod := ChainsFor(environment.Production)
	for _, c := range prod.List {
		if c.Testnet {
			t.Errorf("production lists testnet %d", c.ID)
		}
	}
	if _, ok := prod.Chain(84532); ok {
		t.Error("production lists Base Sepolia")
	}
}

func TestUSDValue(t *testing.T) {
	tests := []struct{ amount, currency, want string }{
		{"100", "USD", "100"},
		{"100", "EUR", "108"},
		{"0.5", "GBP", "0.635"},
		{"1000", "MXN", "58"},
	}
	for _, tt := range tests {
		got, ok := USDValue(tt.amount, tt.currency)
		if !ok || got.FloatString(3) != mustRat(tt.want).FloatString(3) {
			t.Errorf("USDValue(%s %s) = %v, want %s", tt.amount, tt.currency, got, tt.want)
		}
	}
	if _, ok := USDValue("1", "JPY"); ok {
		t.Error("a currency without a published rate converted")
	}
}

func mustRat(s string) *big.Rat {
	r, _ := new(big.Rat).SetString(s)
	return r
}
