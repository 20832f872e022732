package format

import (
	"strings"
	"testing"

	"github.com/partnerpay/api/pkg/envelope"
)

func TestCanonicalCountry(t *testing.T) {
	t.Parallel()
	tests := []struct {
		in   string
		want string
		ok   bool
	}{
		{"de", "DE", true}, {"DE", "DE", true}, {"Gb", "GB", true}, {"XK", "XK", true},
		{"UK", "", false}, {"EU", "", false}, {"ZZ", "", false}, {"FX", "", false},
		{"SU", "", false}, {"D", "", false}, {"DEU", "", false}, {"", "", false}, {"1A", "", false},
	}
	for _, tt := range tests {
		got, ok := CanonicalCountry(tt.in)
		if ok != tt.ok || (ok && got != tt.want) {
			t.Errorf("CanonicalCountry(%q) = %q,%v; want %q,%v", tt.in, got, ok, tt.want, tt.ok)
		}
	}
	if n := len(Countries()); n != 250 {
		t.Errorf("len(Countries()) = %d, want 249 ISO countries plus XK", n)
	}
}

func TestCanonicalCurrency(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]string{"eur": "EUR", "Usd": "USD", "JPY": "JPY"} {
		if got, ok := CanonicalCurrency(in); !ok || got != want {
			t.Errorf("CanonicalCurrency(%q) = %q,%v", in, got, ok)
		}
	}
	for _, in := range []string{"XYZ", "EU", "EURO", "", "12A"} {
		if _, ok := CanonicalCurrency(in); ok {
			t.Errorf("CanonicalCurrency(%q) accepted", in)
		}
	}
}

func msg(err error) string {
	if err == nil {
		return ""
	}
	e, _ := envelope.From(err)
	return string(e.Code) + ": " + e.Message
}

func TestFieldChecks(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		err  error
		want string
	}{
		{"chain missing", ChainID("chain", 0), "invalid_request: chain is required: a positive integer chain id."},
		{"chain negative", ChainID("source.chain", -1), "invalid_request: source.chain must be a positive integer no greater than 9007199254740991."},
		{"chain above 2^53-1", ChainID("chain", MaxChainID+1), "invalid_request: chain must be a positive integer no greater than 9007199254740991."},
		{"chain at 2^53-1", ChainID("chain", MaxChainID), ""},
		{"currency of four letters", second(Currency("fiatCurrency", "EURO")), "invalid_request: fiatCurrency must be an ISO 4217 code of three letters."},
		{"currency with a digit", second(Currency("fiatCurrency", "EU1")), "invalid_request: fiatCurrency must be an ISO 4217 code of three letters."},
		{"currency missing", second(Currency("currency", "")), "invalid_request: currency is required: an ISO 4217 code of three letters."},
		{"country unknown", second(Country("country", "ZZ")), "invalid_request: country must be a known ISO 3166-1 alpha-2 country code."},
		{"amount zero", second(Amount("cryptoAmount", "0.00")), `invalid_request: cryptoAmount must be a decimal string in major units greater than zero, such as "100.50".`},
		{"amount in exponent notation", second(Amount("fiatAmount", "1e3")), `invalid_request: fiatAmount must be a decimal string in major units greater than zero, such as "100.50".`},
		{"smallest unit with a point", second(SmallestUnit("amount", "1.5")), `invalid_request: amount must be an integer string in the token's smallest unit greater than zero, such as "1000000".`},
		{"smallest unit zero", second(SmallestUnit("amount", "000")), `invalid_request: amount must be an integer string in the token's smallest unit greater than zero, at most 78 digits.`},
		{"smallest unit of 79 digits", second(SmallestUnit("amount", "1"+strings.Repeat("0", 78))), `invalid_request: amount must be an integer string in the token's smallest unit greater than zero, at most 78 digits.`},
		{"smallest unit of 78 digits", second(SmallestUnit("amount", strings.Repeat("9", 78))), ""},
		{"address with a broken checksum", second(EVMAddress("walletAddress", "0x5AAeb6053F3E94C9b9A09f33669435E7Ef1BeAed")), "invalid_request: walletAddress must be 0x followed by 40 hex digits, with a valid EIP-55 checksum if it is mixed-case."},
	}
	for _, tt := range tests {
		if got := msg(tt.err); got != tt.want {
			t.Errorf("%s: %q, want %q", tt.name, got, tt.want)
		}
	}
	if c, _ := Currency("fiatCurrency", "eur"); c != "EUR" {
		t.Errorf("currency not upper-cased: %s", c)
	}
	if a, _ := Amount("fiatAmount", "0100.50"); a != "100.5" {
		t.Errorf("amount not canonical: %s", a)
	}
	if a, _ := SmallestUnit("amount", "00100"); a != "100" {
		t.Errorf("smallest unit not canonical: %s", a)
	}
}

func second(_ string, err error) error { return err }

func TestCanonicalDecimal(t *testing.T) {
	t.Parallel()
	good := map[string]string{"100": "100", "100.50": "100.5", "0100.00": "100", "0.01": "0.01", "0": "0", "000": "0"}
	for in, want := range good {
		if got, ok := CanonicalDecimal(in); !ok || got != want {
			t.Errorf("CanonicalDecimal(%q) = %q,%v; want %q", in, got, ok, want)
		}
	}
	for _, in := range []string{"", "1.", ".5", "-1", "+1", "1e3", "1,5", " 1", "1.2.3", "١٢", strings.Repeat("9", 65)} {
		if _, ok := CanonicalDecimal(in); ok {
			t.Errorf("CanonicalDecimal(%q) accepted", in)
		}
	}
}
