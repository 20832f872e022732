// Package bankaccount checks the account identifiers of the payout rails
// other than IBAN (pkg/iban): the ABA routing number (ACH and wire), the
// CLABE (SPEI), Brazil's CPF and CNPJ tax ids and PIX keys, UK sort codes
// and account numbers, US account numbers, and the BIC (SWIFT, SEPA). One
// pure function a rule, each from its published definition; errors are
// constraint labels (Error), never an echo of the number.
package bankaccount

import (
	"regexp"
	"strings"
)

// Constraint labels.
const (
	Required        = "required"
	InvalidFormat   = "invalid_format"
	InvalidChecksum = "invalid_checksum"
)

// Error is a refusal, with its constraint label.
type Error struct{ Label string }

func (e *Error) Error() string { return "bank account: " + e.Label }

var (
	errRequired = &Error{Required}
	errFormat   = &Error{InvalidFormat}
	errChecksum = &Error{InvalidChecksum}
)

func digitsOnly(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return true
}

func digit(s string, i int) int { return int(s[i] - '0') }

// ABARoutingNumber checks a US ABA routing transit number: 9 digits whose
// weighted sum (weights 3, 7, 1 repeated) is a multiple of 10.
func ABARoutingNumber(s string) error {
	switch {
	case s == "":
		return errRequired
	case len(s) != 9 || !digitsOnly(s):
		return errFormat
	}
	sum := 0
	for i := range 9 {
		sum += digit(s, i) * [3]int{3, 7, 1}[i%3]
	}
	if sum%10 != 0 {
		return errChecksum
	}
	return nil
}

// USAccountNumber checks a US bank account number: 4 to 17 digits.
func USAccountNumber(s string) error {
	switch {
	case s == "":
		return errRequired
	case len(s) < 4 || len(s) > 17 || !digitsOnly(s):
		return errFormat
	}
	return nil
}

// CLABE checks a Mexican CLABE: 18 digits, the last a check digit over the
// first 17 (weights 3, 7, 1 repeated, each product taken mod 10; the check
// digit is 10 minus the sum mod 10, mod 10).
func CLABE(s string) error {
	switch {
	case s == "":
		return errRequired
	case len(s) != 18 || !digitsOnly(s):
		return errFormat
	}
	sum := 0
	for i := range 17 {
		sum += digit(s, i) * [3]int{3, 7, 1}[i%3] % 10
	}
	if (10-sum%10)%10 != digit(s, 17) {
		return errChecksum
	}
	return nil
}

// CPF checks a Brazilian individual's tax id: 11 digits (dots and a dash
// as people write it are the caller's to remove), not all one digit, with
// its two mod-11 check digits.
func CPF(s string) error {
	switch {
	case s == "":
		return errRequired
	case len(s) != 11 || !digitsOnly(s):
		return errFormat
	case strings.Count(s, s[:1]) == 11:
		return errChecksum // 000.000.000-00 and the like pass the sums but are not issued
	}
	for n := 9; n <= 10; n++ {
		sum := 0
		for i := range n {
			sum += digit(s, i) * (n + 1 - i)
		}
		if d := sum * 10 % 11 % 10; d != digit(s, n) {
			return errChecksum
		}
	}
	return nil
}

// CNPJ checks a Brazilian company's tax id: 14 digits, not all one digit,
// with its two mod-11 check digits.
func CNPJ(s string) error {
	switch {
	case s == "":
		return errRequired
	case len(s) != 14 || !digitsOnly(s):
		return errFormat
	case strings.Count(s, s[:1]) == 14:
		return errChecksum
	}
	weights := []int{6, 5, 4, 3, 2, 9, 8, 7, 6, 5, 4, 3, 2}
	for n := 12; n <= 13; n++ {
		sum := 0
		for i := range n {
			sum += digit(s, i) * weights[i+13-n]
		}
		d := 0
		if r := sum % 11; r >= 2 {
			d = 11 - r
		}
		if d != digit(s, n) {
			return errChecksum
		}
	}
	return nil
}

// TaxID checks a CPF (11 digits) or a CNPJ (14).
func TaxID(s string) error {
	if len(s) == 14 {
		return CNPJ(s)
	}
	return CPF(s)
}

// PIX key kinds.
const (
	PixTaxID  = "tax_id"
	PixEmail  = "email"
	PixPhone  = "phone"
	PixRandom = "random"
)

var (
	pixEmail  = regexp.MustCompile(`^[A-Za-z0-9._%+-]+@[A-Za-z0-9-]+(\.[A-Za-z0-9-]+)+$`)
	pixPhone  = regexp.MustCompile(`^\+55[1-9][0-9]{9,10}$`)
	pixRandom = regexp.MustCompile(`^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$`)
)

// PixKey checks a PIX key and says which kind it is: a CPF or CNPJ (digits
// only), an e-mail address (at most 77 characters, the scheme's limit), a
// Brazilian phone number in E.164 (+55, area code, 8 or 9 digits), or a
// random key (a UUID, lower case).
func PixKey(s string) (string, error) {
	switch {
	case s == "":
		return "", errRequired
	case digitsOnly(s) && (len(s) == 11 || len(s) == 14):
		return PixTaxID, TaxID(s)
	case strings.HasPrefix(s, "+"):
		if !pixPhone.MatchString(s) {
			return "", errFormat
		}
		return PixPhone, nil
	case strings.Contains(s, "@"):
		if len(s) > 77 || !pixEmail.MatchString(s) {
			return "", errFormat
		}
		return PixEmail, nil
	case pixRandom.MatchString(s):
		return PixRandom, nil
	}
	return "", errFormat
}

var sortCode = regexp.MustCompile(`^[0-9]{2}[- ]?[0-9]{2}[- ]?[0-9]{2}$`)

// SortCode checks a UK sort code and returns its 6 digits: people type it
// as 123456, 12-34-56 or 12 34 56.
func SortCode(s string) (string, error) {
	switch {
	case s == "":
		return "", errRequired
	case !sortCode.MatchString(s):
		return "", errFormat
	}
	return strings.NewReplacer("-", "", " ", "").Replace(s), nil
}

// UKAccountNumber checks a UK account number: 8 digits.
func UKAccountNumber(s string) error {
	switch {
	case s == "":
		return errRequired
	case len(s) != 8 || !digitsOnly(s):
		return errFormat
	}
	return nil
}

var bic = regexp.MustCompile(`^[A-Z]{6}[A-Z0-9]{2}([A-Z0-9]{3})?$`)

// BIC checks a business identifier code (ISO 9362): 8 or 11 characters,
// the bank's 4 letters, its country's 2, a location of 2 and an optional
// branch of 3; it returns the country.
func BIC(s string) (country string, err error) {
	switch {
	case s == "":
		return "", errRequired
	case !bic.MatchString(s):
		return "", errFormat
	}
	return s[4:6], nil
}
