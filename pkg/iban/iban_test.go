package iban

import (
	"errors"
	"testing"
)

func TestValidatesRegistryExamples(t *testing.T) {
	t.Parallel()
	// The SWIFT IBAN Registry's example IBAN of each of these countries.
	for _, s := range []string{
		"DE89370400440532013000", "GB82WEST12345698765432", "FR1420041010050500013M02606", "NL91ABNA0417164300",
		"BE68539007547034", "ES9121000418450200051332", "IT60X0542811101000000123456", "CH9300762011623852957",
		"AT611904300234573201", "PL61109010140000071219812874", "NO9386011117947", "SE4550000000058398257466",
		"PT50000201231234567890154", "IE29AIBK93115212345678", "CY17002001280000001200527600",
		"MT84MALT011000012345MTLCAST001S", "BR1800360305000010009795493C1", "XK051212012345678906",
		"de89 3704 0044 0532 0130 00", // as people type it
	} {
		if _, err := Validate(s); err != nil {
			t.Errorf("Validate(%q) = %v", s, err)
		}
	}
}

func TestRefusalsCarryALabel(t *testing.T) {
	t.Parallel()
	tests := map[string]string{
		"":                            Required,
		"   ":                         Required,
		"DE8937040044053201300":       InvalidFormat, // one digit short
		"DE89370400440532013000X":     InvalidFormat, // too long
		"GB82WEST1234569876543A":      InvalidFormat, // letter where the registry has digits
		"8989370400440532013000":      InvalidFormat, // no country
		"DE89-3704-0044-0532-0130-00": InvalidFormat, // punctuation
		"US12345678901234567890":      UnsupportedCountry,
		"DE88370400440532013000":      InvalidChecksum, // check digits off by one
		"DE89370400440532013001":      InvalidChecksum, // a typo in the account
	}
	for in, want := range tests {
		_, err := Validate(in)
		var e *Error
		if !errors.As(err, &e) || e.Label != want {
			t.Errorf("Validate(%q) = %v, want %s", in, err, want)
		}
	}
}

func TestCheckDigitsBuildValidIBANs(t *testing.T) {
	t.Parallel()
	if got := CheckDigits("DE", "370400440532013000"); got != "89" {
		t.Fatalf("CheckDigits = %s, want 89", got)
	}
}

func TestEveryRegistryLengthIsConsistent(t *testing.T) {
	t.Parallel()
	for country, structure := range bban {
		// A BBAN of all digits or all letters must fit the declared structure's length.
		n := 0
		s := structure
		for s != "" {
			i := 0
			for s[i] != '!' {
				i++
			}
			k := 0
			for _, c := range s[:i] {
				k = k*10 + int(c-'0')
			}
			n += k
			s = s[i+2:]
		}
		if n+4 > 34 || n < 8 {
			t.Errorf("%s: BBAN length %d out of range", country, n)
		}
	}
}
