// Package iban validates International Bank Account Numbers (ISO 13616):
// the country's length and BBAN structure from the SWIFT IBAN Registry, then
// the ISO 7064 mod-97 check digits. Errors are constraint labels, fit for
// error.fields, never an echo of the number.
//
// We would rather have used a library (jacoelho/banking), but the module
// proxy this project builds from does not serve any IBAN library; the
// registry table below is the whole of what such a library knows.
package iban

import "strings"

// Constraint labels.
const (
	Required           = "required"
	InvalidFormat      = "invalid_format"
	UnsupportedCountry = "unsupported_country"
	InvalidChecksum    = "invalid_checksum"
)

// Error is a refusal, with its constraint label.
type Error struct{ Label string }

func (e *Error) Error() string { return "iban: " + e.Label }

// bban is the SWIFT IBAN Registry structure of each country's BBAN:
// n = digits, a = upper-case letters, c = letters or digits, each with its
// fixed length.
var bban = map[string]string{
	"AD": "4!n4!n12!c", "AE": "3!n16!n", "AL": "8!n16!c", "AT": "5!n11!n", "AZ": "4!a20!c",
	"BA": "3!n3!n8!n2!n", "BE": "3!n7!n2!n", "BG": "4!a4!n2!n8!c", "BH": "4!a14!c", "BI": "5!n5!n11!n2!n",
	"BR": "8!n5!n10!n1!a1!c", "BY": "4!c4!n16!c", "CH": "5!n12!c", "CR": "4!n14!n", "CY": "3!n5!n16!c",
	"CZ": "4!n6!n10!n", "DE": "8!n10!n", "DJ": "5!n5!n11!n2!n", "DK": "4!n9!n1!n", "DO": "4!c20!n",
	"EE": "2!n2!n11!n1!n", "EG": "4!n4!n17!n", "ES": "4!n4!n1!n1!n10!n", "FI": "3!n11!n", "FK": "2!a12!n",
	"FO": "4!n9!n1!n", "FR": "5!n5!n11!c2!n", "GB": "4!a6!n8!n", "GE": "2!a16!n", "GI": "4!a15!c",
	"GL": "4!n9!n1!n", "GR": "3!n4!n16!c", "GT": "4!c20!c", "HR": "7!n10!n", "HU": "3!n4!n1!n15!n1!n",
	"IE": "4!a6!n8!n", "IL": "3!n3!n13!n", "IQ": "4!a3!n12!n", "IS": "4!n2!n6!n10!n", "IT": "1!a5!n5!n12!c",
	"JO": "4!a4!n18!c", "KW": "4!a22!c", "KZ": "3!n13!c", "LB": "4!n20!c", "LC": "4!a24!c",
	"LI": "5!n12!c", "LT": "5!n11!n", "LU": "3!n13!c", "LV": "4!a13!c", "LY": "3!n3!n15!n",
	"MC": "5!n5!n11!c2!n", "MD": "2!c18!c", "ME": "3!n13!n2!n", "MK": "3!n10!c2!n", "MN": "4!n12!n",
	"MR": "5!n5!n11!n2!n", "MT": "4!a5!n18!c", "MU": "4!a2!n2!n12!n3!n3!a", "NI": "4!a20!n", "NL": "4!a10!n",
	"NO": "4!n6!n1!n", "OM": "3!n16!c", "PK": "4!a16!c", "PL": "8!n16!n", "PS": "4!a21!c",
	"PT": "4!n4!n11!n2!n", "QA": "4!a21!c", "RO": "4!a16!c", "RS": "3!n13!n2!n", "RU": "9!n5!n15!c",
	"SA": "2!n18!c", "SC": "4!a2!n2!n16!n3!a", "SD": "2!n12!n", "SE": "3!n16!n1!n", "SI": "5!n8!n2!n",
	"SK": "4!n6!n10!n", "SM": "1!a5!n5!n12!c", "SO": "4!n3!n12!n", "ST": "8!n11!n2!n", "SV": "4!a20!n",
	"TL": "3!n14!n2!n", "TN": "2!n3!n13!n2!n", "TR": "5!n1!n16!c", "UA": "6!n19!c", "VA": "3!n15!n",
	"VG": "4!a16!n", "XK": "4!n10!n2!n",
}

// Normalize removes the spaces people type in groups of four and upper-cases.
func Normalize(s string) string {
	return strings.ToUpper(strings.ReplaceAll(strings.TrimSpace(s), " ", ""))
}

// Validate checks s (spaces and case allowed) and returns the electronic form.
func Validate(s string) (string, error) {
	n := Normalize(s)
	if n == "" {
		return "", &Error{Required}
	}
	if len(n) < 5 || len(n) > 34 || !isUpper(n[0]) || !isUpper(n[1]) || !isDigit(n[2]) || !isDigit(n[3]) {
		return "", &Error{InvalidFormat}
	}
	structure, ok := bban[n[:2]]
	if !ok {
		return "", &Error{UnsupportedCountry}
	}
	if !matches(n[4:], structure) {
		return "", &Error{InvalidFormat}
	}
	if mod97(n[4:]+n[:4]) != 1 {
		return "", &Error{InvalidChecksum}
	}
	return n, nil
}

// CheckDigits computes the two check digits for country and bban, to build
// valid test IBANs.
func CheckDigits(country, bban string) string {
	r := 98 - mod97(bban+country+"00")
	return string([]byte{byte('0' + r/10), byte('0' + r%10)})
}

// matches checks s against a registry structure such as "8!n10!n".
func matches(s, structure string) bool {
	pos := 0
	for structure != "" {
		i := strings.IndexByte(structure, '!')
		n := 0
		for _, c := range structure[:i] {
			n = n*10 + int(c-'0')
		}
		class := structure[i+1]
		structure = structure[i+2:]
		if pos+n > len(s) {
			return false
		}
		for _, c := range []byte(s[pos : pos+n]) {
			switch {
			case class == 'n' && !isDigit(c),
				class == 'a' && !isUpper(c),
				class == 'c' && !isDigit(c) && !isUpper(c):
				return false
			}
		}
		pos += n
	}
	return pos == len(s)
}

// mod97 is ISO 7064 MOD 97-10 over s with letters as 10..35.
func mod97(s string) int {
	r := 0
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case isDigit(c):
			r = (r*10 + int(c-'0')) % 97
		case isUpper(c):
			r = (r*100 + int(c-'A'+10)) % 97
		default:
			return -1
		}
	}
	return r
}

func isDigit(c byte) bool { return '0' <= c && c <= '9' }
func isUpper(c byte) bool { return 'A' <= c && c <= 'Z' }

// issuedBy are the territories whose accounts carry another country's
// IBANs (ISO 13616's registry: they issue none of their own): the French
// overseas departments and collectivities take FR IBANs, the Åland
// Islands FI, and Jersey, Guernsey and the Isle of Man GB. Each is in the
// SEPA scheme's geographical scope under its own code.
var issuedBy = map[string]string{
	"GP": "FR", "GF": "FR", "MQ": "FR", "RE": "FR", "YT": "FR", "BL": "FR", "MF": "FR", "PM": "FR",
	"AX": "FI",
	"JE": "GB", "GG": "GB", "IM": "GB",
}

// CountryOf is the country whose IBANs accounts in country carry: country
// itself, or for a territory that issues none of its own, its issuer's.
func CountryOf(country string) string {
	if c, ok := issuedBy[country]; ok {
		return c
	}
	return country
}
