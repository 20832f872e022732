package bankaccount

import (
	"errors"
	"testing"
)

func label(err error) string {
	var e *Error
	if errors.As(err, &e) {
		return e.Label
	}
	if err != nil {
		return err.Error()
	}
	return ""
}

// Published examples: routing numbers of the Federal Reserve Bank of
// Boston, JPMorgan Chase and Bank of America; the CLABE of Banxico's
// example; CPF and CNPJ numbers used in Receita Federal's documentation.
func TestChecksums(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		rule, in, want string
	}{
		{"aba", "011000015", ""},
		{"aba", "021000021", ""},
		{"aba", "026009593", ""},
		{"aba", "021000022", InvalidChecksum},
		{"aba", "02100002", InvalidFormat},
		{"aba", "02100002a", InvalidFormat},
		{"aba", "", Required},
		{"clabe", "032180000118359719", ""},
		{"clabe", "032180000118359718", InvalidChecksum},
		{"clabe", "03218000011835971", InvalidFormat},
		{"clabe", "", Required},
		{"cpf", "52998224725", ""},
		{"cpf", "52998224724", InvalidChecksum},
		{"cpf", "11111111111", InvalidChecksum},
		{"cpf", "529.982.247-25", InvalidFormat},
		{"cnpj", "11222333000181", ""},
		{"cnpj", "11222333000182", InvalidChecksum},
		{"cnpj", "00000000000000", InvalidChecksum},
		{"taxid", "52998224725", ""},
		{"taxid", "11222333000181", ""},
		{"taxid", "1122233300018", InvalidFormat},
		{"usaccount", "0001234567", ""},
		{"usaccount", "123", InvalidFormat},
		{"usaccount", "123456789012345678", InvalidFormat},
		{"ukaccount", "31926819", ""},
		{"ukaccount", "3192681", InvalidFormat},
	} {
		var err error
		switch tt.rule {
		case "aba":
			err = ABARoutingNumber(tt.in)
		case "clabe":
			err = CLABE(tt.in)
		case "cpf":
			err = CPF(tt.in)
		case "cnpj":
			err = CNPJ(tt.in)
		case "taxid":
			err = TaxID(tt.in)
		case "usaccount":
			err = USAccountNumber(tt.in)
		case "ukaccount":
			err = UKAccountNumber(tt.in)
		}
		if got := label(err); got != tt.want {
			t.Errorf("%s %q: %q, want %q", tt.rule, tt.in, got, tt.want)
		}
	}
}

func TestPixKeys(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct{ in, kind, want string }{
		{"52998224725", PixTaxID, ""},
		{"11222333000181", PixTaxID, ""},
		{"52998224724", PixTaxID, InvalidChecksum},
		{"ana@example.com.br", PixEmail, ""},
		{"ana@", "", InvalidFormat},
		{"+5511998765432", PixPhone, ""},
		{"+551133334444", PixPhone, ""},
		{"+4411998765432", "", InvalidFormat},
		{"11998765432x", "", InvalidFormat},
		{"123e4567-e89b-12d3-a456-426614174000", PixRandom, ""},
		{"123E4567-E89B-12D3-A456-426614174000", "", InvalidFormat},
		{"", "", Required},
	} {
		kind, err := PixKey(tt.in)
		if got := label(err); got != tt.want || (err == nil && kind != tt.kind) {
			t.Errorf("PixKey(%q) = %q, %q; want %q, %q", tt.in, kind, got, tt.kind, tt.want)
		}
	}
}

func TestSortCodeAndBIC(t *testing.T) {
	t.Parallel()
	for _, in := range []string{"601613", "60-16-13", "60 16 13"} {
		if got, err := SortCode(in); err != nil || got != "601613" {
			t.Errorf("SortCode(%q) = %q, %v", in, got, err)
		}
	}
	for _, in := range []string{"60161", "60-16-1x", ""} {
		if _, err := SortCode(in); err == nil {
			t.Errorf("SortCode(%q) accepted", in)
		}
	}
	for _, tt := range []struct{ in, country, want string }{
		{"DEUTDEFF", "DE", ""},
		{"DEUTDEFF500", "DE", ""},
		{"NWBKGB2L", "GB", ""},
		{"deutdeff", "", InvalidFormat},
		{"DEUTDEFF5", "", InvalidFormat},
		{"DEU1DEFF", "", InvalidFormat},
		{"", "", Required},
	} {
		c, err := BIC(tt.in)
		if got := label(err); got != tt.want || c != tt.country {
			t.Errorf("BIC(%q) = %q, %q; want %q, %q", tt.in, c, got, tt.country, tt.want)
		}
	}
}
