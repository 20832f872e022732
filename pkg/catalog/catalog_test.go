package catalog

import (
	"math/big"
	"strings"
	"testing"

	"github.com/partnerpay/api/pkg/envelope"
	"github.com/partnerpay/api/pkg/environment"
	"github.com/partnerpay/api/pkg/format"
)

func TestResolveRail(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, currency, country, forced, amount string
		want                                    string // the rail, or the no_route message
	}{
		{"EUR to Germany takes the fastest SEPA rail", "EUR", "DE", "", "100", "sepa_instant"},
		{"EUR above SEPA Instant's limit takes SEPA", "EUR", "DE", "", "500000", "sepa"},
		{"EUR at SEPA Instant's limit stays instant", "EUR", "DE", "", "100000", "sepa_instant"},
		{"EUR to the UK is in the SEPA area", "EUR", "GB", "", "100", "sepa_instant"},
		{"forced sepa is honoured", "EUR", "FR", "sepa", "100", "sepa"},
		{"forced rail is case-insensitive", "EUR", "FR", "SEPA", "100", "sepa"},
		{"EUR outside SEPA goes by swift", "EUR", "US", "", "1000", "swift"},
		{"USD to the US prefers wire over ach", "USD", "US", "", "1000", "wire"},
		{"USD below wire's minimum goes by ach", "USD", "US", "", "50", "ach"},
		{"forced ach", "USD", "US", "ach", "1", "ach"},
		{"USD abroad goes by swift", "USD", "DE", "", "1000", "swift"},
		{"GBP to GB is faster payments", "GBP", "GB", "", "1", "faster_payments"},
		{"GBP to France is swift", "GBP", "FR", "", "100", "swift"},
		{"MXN to Mexico is SPEI", "MXN", "MX", "", "1", "spei"},
		{"BRL to Brazil is PIX", "BRL", "BR", "", "1", "pix"},
		{"swift cannot be forced where a specific rail serves", "USD", "US", "swift", "1000", "The forced rail does not serve USD to US; see GET /v1/limits."},
		{"MXN outside Mexico has no route", "MXN", "US", "", "1", "No payout rail serves MXN to US; see GET /v1/limits."},
		{"JPY has no rail", "JPY", "JP", "", "1", "No payout rail serves JPY to JP; see GET /v1/limits."},
		{"a three-letter code no rail serves", "XYZ", "DE", "", "1", "No payout rail serves XYZ to DE; see GET /v1/limits."},
		{"forced rail that does not serve the currency", "EUR", "DE", "pix", "1", "The forced rail does not serve EUR to DE; see GET /v1/limits."},
		{"unknown forced rail", "EUR", "DE", "carrier_pigeon", "1", "The forced rail does not serve EUR to DE; see GET /v1/limits."},
		{"a forced rail outside its limits", "EUR", "DE", "sepa_instant", "500000", "The forced rail sepa_instant takes 1 to 100000 EUR per payout; this payout is 500000 EUR; see GET /v1/limits."},
		{"below every rail's minimum", "EUR", "DE", "", "0.5", "No payout rail takes 0.5 EUR to DE: the rails that serve it take 1 to 1000000 EUR per payout; see GET /v1/limits."},
		{"above every rail's maximum", "EUR", "US", "", "20000000", "No payout rail takes 20000000 EUR to US: the rails that serve it take 100 to 10000000 EUR per payout; see GET /v1/limits."},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := ResolveRail(tt.currency, tt.country, tt.forced, mustRat(tt.amount))
			res := got.Name
			if err != nil {
				e, _ := envelope.From(err)
				if e.Code != envelope.CodeNoRoute {
					t.Fatalf("code %s", e.Code)
				}
				res = e.Message
			}
			if res != tt.want {
				t.Fatalf("ResolveRail(%s,%s,%q,%s) = %q; want %q", tt.currency, tt.country, tt.forced, tt.amount, res, tt.want)
			}
		})
	}
}

func TestConvert(t *testing.T) {
	t.Parallel()
	got, ok := Convert(mustRat("108"), "USD", "EUR")
	if !ok || got.Cmp(mustRat("100")) != 0 {
		t.Errorf("108 USD = %v EUR, want 100", got)
	}
	if _, ok := Convert(mustRat("1"), "USD", "JPY"); ok {
		t.Error("JPY has no reference rate")
	}
}

func TestChainsFor(t *testing.T) {
	t.Parallel()
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
	t.Parallel()
	tests := []struct{ amount, currency, want string }{
		{"100", "USD", "100"},
		{"100", "EUR", "108"},
		{"0.5", "GBP", "0.635"},
		{"1000", "MXN", "58"},
	}
	for _, tt := range tests {
		got, ok := USDValue(mustRat(tt.amount), tt.currency)
		if !ok || got.FloatString(3) != mustRat(tt.want).FloatString(3) {
			t.Errorf("USDValue(%s %s) = %v, want %s", tt.amount, tt.currency, got, tt.want)
		}
	}
	if _, ok := USDValue(mustRat("1"), "JPY"); ok {
		t.Error("a currency without a published rate converted")
	}
}

func TestCheckCeiling(t *testing.T) {
	t.Parallel()
	tests := []struct {
		amount, currency, ceiling string
		capped                    bool
	}{
		{"25000", "USD", "25000", false},
		{"25000.01", "USD", "25000", true},
		{"23148", "EUR", "25000", false}, // 24,999.84 USD
		{"23149", "EUR", "25000", true},  // 25,000.92 USD
		{"431034", "MXN", "25000", false},
	}
	for _, tt := range tests {
		err := CheckCeiling("payout", mustRat(tt.amount), tt.currency, tt.ceiling)
		e, ok := envelope.From(err)
		switch {
		case tt.capped && (!ok || e.Code != envelope.CodeExecutionCapped || e.Message != "This payout is worth more than the key's maxExecutionUsd of 25000 USD at the reference rates of GET /v1/rates."):
			t.Errorf("%s %s: %v, want execution_capped", tt.amount, tt.currency, err)
		case !tt.capped && err != nil:
			t.Errorf("%s %s: %v, want nil", tt.amount, tt.currency, err)
		}
	}
	if err := CheckCeiling("payout", mustRat("1"), "JPY", "25000"); err == nil {
		t.Error("a currency without a rate passed")
	} else if _, known := envelope.From(err); known {
		t.Errorf("a currency without a rate: %v, want an internal error", err)
	}
}

func mustRat(s string) *big.Rat {
	r, _ := new(big.Rat).SetString(s)
	return r
}

// Every token address is written in its EIP-55 checksummed form: the
// deposit quote echoes addresses checksummed and compares them.
func TestTokenAddressesAreChecksummed(t *testing.T) {
	t.Parallel()
	for _, env := range []environment.Name{environment.Sandbox, environment.Production} {
		for _, ch := range ChainsFor(env).List {
			for _, tok := range ch.Tokens {
				if sum, ok := format.Checksummed(tok.Address); !ok || sum != tok.Address {
					t.Errorf("%s %s on %d: %s, checksummed %s", env, tok.Symbol, ch.ID, tok.Address, sum)
				}
			}
		}
	}
}

// TestCardCorridors: an order finds its corridor by currency, cardholder
// country and direction, or a no_route that says which is missing; the
// per-order limits hold at both ends.
func TestCardCorridors(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		direction, currency, country string
		message                      string
	}{
		{DirectionBuy, "EUR", "DE", ""},
		{DirectionSell, "EUR", "FR", ""},
		{DirectionBuy, "BRL", "BR", ""},
		{DirectionSell, "BRL", "BR", "The BRL card corridor for BR takes buy orders only; see GET /v1/limits."},
		{DirectionBuy, "EUR", "GB", "No card corridor serves EUR for cardholders in GB; see GET /v1/limits."},
		{DirectionBuy, "JPY", "JP", "No card corridor serves JPY for cardholders in JP; see GET /v1/limits."},
	} {
		c, err := FindCardCorridor(tc.direction, tc.currency, tc.country)
		switch {
		case tc.message == "" && (err != nil || c.FiatCurrency != tc.currency):
			t.Errorf("%s %s %s: %v", tc.direction, tc.currency, tc.country, err)
		case tc.message != "" && (err == nil || !strings.Contains(err.Error(), tc.message)):
			t.Errorf("%s %s %s: %v, want no_route %q", tc.direction, tc.currency, tc.country, err, tc.message)
		}
	}
	eur, _ := FindCardCorridor(DirectionBuy, "EUR", "DE")
	for _, a := range []struct {
		amount string
		ok     bool
	}{{"20", true}, {"5000", true}, {"19.99", false}, {"5000.01", false}} {
		amount, _ := new(big.Rat).SetString(a.amount)
		if err := eur.CheckAmount(amount); (err == nil) != a.ok {
			t.Errorf("EUR %s: %v", a.amount, err)
		}
	}
	if err := eur.CheckAmount(big.NewRat(10, 1)); err == nil || !strings.Contains(err.Error(), "takes 20 to 5000 EUR per order; this order is 10 EUR") {
		t.Errorf("the refusal does not give the limits: %v", err)
	}
	if !CardMethodOffered(MethodApplePay, DirectionBuy) || CardMethodOffered(MethodApplePay, "payout") {
		t.Error("Apple Pay is offered for buy orders only where a corridor has it")
	}
	if got := eur.CountryList(); len(got) != 20 || got[0] != "AT" {
		t.Errorf("EUR card countries %v", got)
	}
}
