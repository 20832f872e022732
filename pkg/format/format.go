// Package format holds the formats of the values partners send: chain ids,
// currency and country codes, decimal amounts in major units, integer
// amounts in a token's smallest unit, EVM addresses, and the shapes of the
// ids the API issues. Each check returns the invalid_request a partner sees,
// naming the field; none of them ever echoes more than a short, quoted
// excerpt of what was sent. This is the one place those rules live.
package format

import (
	"crypto/rand"
	"encoding/hex"
	"regexp"
	"strings"

	"github.com/partnerpay/api/pkg/envelope"
)

// MaxChainID is the largest chain id: the largest integer a JSON number
// holds exactly (the contract's ChainId maximum).
const MaxChainID = 1<<53 - 1

// ChainID checks a ChainId field: sent (JSON has no zero chain), positive
// and at most MaxChainID.
func ChainID(field string, id int64) error {
	switch {
	case id == 0:
		return envelope.InvalidRequest(field + " is required: a positive integer chain id.")
	case id < 0 || id > MaxChainID:
		return envelope.InvalidRequest(field + " must be a positive integer no greater than 9007199254740991.")
	}
	return nil
}

// Currency checks an IsoCurrency field (three letters, any case) and returns
// it upper-cased. Whether anything serves the currency is not a format
// question: that is the caller's no_route.
func Currency(field, code string) (string, error) {
	switch {
	case code == "":
		return "", envelope.InvalidRequest(field + " is required: an ISO 4217 code of three letters.")
	case !letters(code, 3):
		return "", envelope.InvalidRequest(field + " must be an ISO 4217 code of three letters.")
	}
	return strings.ToUpper(code), nil
}

// Country checks an IsoCountry field: two letters, any case, naming an
// assigned ISO 3166-1 country. It returns the code upper-cased.
func Country(field, code string) (string, error) {
	if code == "" {
		return "", envelope.InvalidRequest(field + " is required: an ISO 3166-1 alpha-2 code.")
	}
	c, ok := CanonicalCountry(code)
	if !ok || !letters(code, 2) {
		return "", envelope.InvalidRequest(field + " must be a known ISO 3166-1 alpha-2 country code.")
	}
	return c, nil
}

var decimal = regexp.MustCompile(`^\d+(\.\d+)?$`)

// CanonicalDecimal checks a DecimalMajorUnits string and returns it without
// leading zeros or trailing fractional zeros ("0100.50" → "100.5"), so equal
// amounts compare equal. ok is false when s is not a decimal string.
func CanonicalDecimal(s string) (canon string, ok bool) {
	if len(s) > 64 || !decimal.MatchString(s) {
		return "", false
	}
	whole, frac, _ := strings.Cut(s, ".")
	whole = strings.TrimLeft(whole, "0")
	if whole == "" {
		whole = "0"
	}
	frac = strings.TrimRight(frac, "0")
	if frac == "" {
		return whole, true
	}
	return whole + "." + frac, true
}

// Amount checks a DecimalMajorUnits amount that must be above zero and
// returns its canonical form.
func Amount(field, s string) (string, error) {
	c, ok := CanonicalDecimal(s)
	if !ok || c == "0" {
		return "", envelope.InvalidRequest(field + ` must be a decimal string in major units greater than zero, such as "100.50".`)
	}
	return c, nil
}

// MaxSmallestUnitDigits bounds an integer amount in a token's smallest unit:
// 78 digits hold any uint256.
const MaxSmallestUnitDigits = 78

// SmallestUnit checks an amount in a token's smallest unit: digits only,
// above zero, at most 78 digits. It returns it without leading zeros.
func SmallestUnit(field, s string) (string, error) {
	if s == "" {
		return "", envelope.InvalidRequest(field + ` is required: an integer string in the token's smallest unit, such as "1000000".`)
	}
	if len(s) > MaxSmallestUnitDigits+8 || strings.Trim(s, "0123456789") != "" {
		return "", envelope.InvalidRequest(field + ` must be an integer string in the token's smallest unit greater than zero, such as "1000000".`)
	}
	t := strings.TrimLeft(s, "0")
	if t == "" || len(t) > MaxSmallestUnitDigits {
		return "", envelope.InvalidRequest(field + ` must be an integer string in the token's smallest unit greater than zero, at most 78 digits.`)
	}
	return t, nil
}

func letters(s string, n int) bool {
	if len(s) != n {
		return false
	}
	for i := 0; i < n; i++ {
		c := s[i] | 0x20 // fold ASCII case
		if c < 'a' || c > 'z' {
			return false
		}
	}
	return true
}

// IDHexLen is the length of the random part of the ids the API issues for
// its records (accounts, virtual accounts, deposits, consent sessions).
const IDHexLen = 24

// NewID returns a fresh record id: prefix and 24 lower-case hex digits.
func NewID(prefix string) string {
	var b [IDHexLen / 2]byte
	_, _ = rand.Read(b[:])
	return prefix + hex.EncodeToString(b[:])
}

// ValidID reports whether s has the shape of an id NewID(prefix) makes.
// Anything else is answered without a store lookup and never logged.
func ValidID(prefix, s string) bool {
	if len(s) != len(prefix)+IDHexLen || !strings.HasPrefix(s, prefix) {
		return false
	}
	for i := len(prefix); i < len(s); i++ {
		if c := s[i]; !('0' <= c && c <= '9' || 'a' <= c && c <= 'f') {
			return false
		}
	}
	return true
}

// Malformed is what a log line says instead of an id that does not have
// its shape: whatever the client sent is never logged whole.
const Malformed = "[malformed]"

// LogID is id as a log line may carry it: itself when it has the shape
// NewID(prefix) makes (or is empty), else Malformed.
func LogID(prefix, id string) string {
	if id == "" || ValidID(prefix, id) {
		return id
	}
	return Malformed
}
