// Package beneficiary is the bank account a payout pays, per rail (DESIGN
// §3): the fields each rail takes, the checks they pass (pkg/iban and
// pkg/bankaccount, one rule each), the JSON Schema GET /v1/limits publishes
// for each rail, and the masked form answers carry. The quote fixed the
// rail, so the beneficiary is read against it: a field the rail does not
// take is an unknown field, and a wrong one is 400 invalid_request naming
// it. Account identifiers are personal data: never logged, and answered
// only as their last four characters.
package beneficiary

import (
	"errors"
	"regexp"
	"strconv"
	"unicode/utf8"

	"github.com/partnerpay/api/pkg/bankaccount"
	"github.com/partnerpay/api/pkg/envelope"
	"github.com/partnerpay/api/pkg/format"
	"github.com/partnerpay/api/pkg/iban"
	"github.com/partnerpay/api/pkg/jsonbody"
)

// Checked is a beneficiary that passed its rail's checks, in canonical form.
type Checked struct {
	Rail string
	Name string
	// Account is the account identifier (IBAN, account number, CLABE or
	// PIX key), canonical.
	Account string
	// Fields is the canonical JSON of every field the rail took: what is
	// stored, and what tells one beneficiary from another.
	Fields []byte
}

// Masked is the beneficiary as answers show it: the name, and the last four
// characters of the account identifier.
type Masked struct {
	Name    string `json:"name"`
	Account string `json:"account"`
}

// Masked is c as answers show it.
func (c Checked) Masked() Masked { return Mask(c.Name, c.Account) }

// Mask makes the masked form of a name and an account identifier.
func Mask(name, account string) Masked {
	if n := len(account); n > 4 {
		account = account[n-4:]
	}
	return Masked{Name: name, Account: account}
}

// Address is a postal address, as wire and SWIFT payouts carry it.
type Address struct {
	Line1      string  `json:"line1"`
	Line2      *string `json:"line2,omitempty"`
	City       string  `json:"city"`
	Region     *string `json:"region,omitempty"`
	PostalCode string  `json:"postalCode"`
	Country    string  `json:"country"`
}

// The fields of each rail, as sent and as stored (canonical).
type (
	sepa struct {
		Name string  `json:"name"`
		IBAN string  `json:"iban"`
		BIC  *string `json:"bic,omitempty"`
	}
	fasterPayments struct {
		Name          string `json:"name"`
		SortCode      string `json:"sortCode"`
		AccountNumber string `json:"accountNumber"`
	}
	ach struct {
		Name          string `json:"name"`
		RoutingNumber string `json:"routingNumber"`
		AccountNumber string `json:"accountNumber"`
		AccountType   string `json:"accountType"`
	}
	wire struct {
		Name          string   `json:"name"`
		RoutingNumber string   `json:"routingNumber"`
		AccountNumber string   `json:"accountNumber"`
		Address       *Address `json:"address"`
	}
	spei struct {
		Name  string `json:"name"`
		CLABE string `json:"clabe"`
	}
	pix struct {
		Name   string `json:"name"`
		PixKey string `json:"pixKey"`
		TaxID  string `json:"taxId"`
	}
	swift struct {
		Name          string   `json:"name"`
		BIC           string   `json:"bic"`
		IBAN          *string  `json:"iban,omitempty"`
		AccountNumber *string  `json:"accountNumber,omitempty"`
		Address       *Address `json:"address"`
	}
)

// Check reads raw, the beneficiary object of a payout, against rail (the
// quote's) and country (the quote's destination, canonical).
func Check(rail, country string, raw []byte) (Checked, error) {
	switch rail {
	case "sepa", "sepa_instant":
		return check(rail, raw, func(b *sepa) (string, error) {
			account, err := checkIBAN("beneficiary.iban", b.IBAN, country)
			if err != nil {
				return "", err
			}
			b.IBAN = account
			if b.BIC != nil {
				c, err := checkBIC("beneficiary.bic", *b.BIC)
				if err != nil {
					return "", err
				}
				if c != account[:2] && c != country {
					return "", envelope.InvalidRequest("beneficiary.bic is a bank in " + c + ", not in the IBAN's country " + account[:2] + ".")
				}
			}
			return account, nil
		})
	case "faster_payments":
		return check(rail, raw, func(b *fasterPayments) (string, error) {
			sc, err := bankaccount.SortCode(b.SortCode)
			if err != nil {
				return "", fieldError("beneficiary.sortCode", err)
			}
			b.SortCode = sc
			return b.AccountNumber, fieldError("beneficiary.accountNumber", bankaccount.UKAccountNumber(b.AccountNumber))
		})
	case "ach":
		return check(rail, raw, func(b *ach) (string, error) {
			if err := checkUS(b.RoutingNumber, b.AccountNumber); err != nil {
				return "", err
			}
			if b.AccountType != "checking" && b.AccountType != "savings" {
				if b.AccountType == "" {
					return "", envelope.InvalidRequest("beneficiary.accountType is required: " + describe["beneficiary.accountType"] + ".")
				}
				return "", envelope.InvalidRequest("beneficiary.accountType must be " + describe["beneficiary.accountType"] + ".")
			}
			return b.AccountNumber, nil
		})
	case "wire":
		return check(rail, raw, func(b *wire) (string, error) {
			if err := checkUS(b.RoutingNumber, b.AccountNumber); err != nil {
				return "", err
			}
			return b.AccountNumber, checkAddress(b.Address)
		})
	case "spei":
		return check(rail, raw, func(b *spei) (string, error) {
			return b.CLABE, fieldError("beneficiary.clabe", bankaccount.CLABE(b.CLABE))
		})
	case "pix":
		return check(rail, raw, func(b *pix) (string, error) {
			if _, err := bankaccount.PixKey(b.PixKey); err != nil {
				return "", fieldError("beneficiary.pixKey", err)
			}
			return b.PixKey, fieldError("beneficiary.taxId", bankaccount.TaxID(b.TaxID))
		})
	case "swift":
		return check(rail, raw, func(b *swift) (string, error) {
			c, err := checkBIC("beneficiary.bic", b.BIC)
			if err != nil {
				return "", err
			}
			if c != country && c != iban.CountryOf(country) {
				return "", envelope.InvalidRequest("beneficiary.bic is a bank in " + c + "; this quote pays out to " + country + ".")
			}
			var account string
			switch {
			case (b.IBAN == nil) == (b.AccountNumber == nil):
				return "", envelope.InvalidRequest("Send exactly one of beneficiary.iban and beneficiary.accountNumber.")
			case b.IBAN != nil:
				if account, err = checkIBAN("beneficiary.iban", *b.IBAN, country); err != nil {
					return "", err
				}
				b.IBAN = &account
			default:
				account = *b.AccountNumber
				if !swiftAccount.MatchString(account) {
					return "", envelope.InvalidRequest("beneficiary.accountNumber must be " + describe["beneficiary.accountNumber@swift"] + ".")
				}
			}
			return account, checkAddress(b.Address)
		})
	}
	return Checked{}, errors.New("beneficiary: no rail " + rail)
}

// check decodes raw into the rail's fields, strictly (unknown fields and
// wrong types are named as beneficiary.<field>), checks the name, then the
// rail's own fields with rule, which canonicalises them and returns the
// account identifier.
func check[T any](rail string, raw []byte, rule func(*T) (string, error)) (Checked, error) {
	var in struct {
		Beneficiary *T `json:"beneficiary"`
	}
	wrapped := make([]byte, 0, len(raw)+len(`{"beneficiary":}`))
	wrapped = append(append(append(wrapped, `{"beneficiary":`...), raw...), '}')
	if err := jsonbody.Bytes(wrapped, &in); err != nil {
		return Checked{}, err
	}
	if in.Beneficiary == nil {
		return Checked{}, envelope.InvalidRequest("beneficiary is required: the bank account paid, with the fields of the quote's rail (GET /v1/limits).")
	}
	b := in.Beneficiary
	name := nameOf(b)
	if err := checkName(name); err != nil {
		return Checked{}, err
	}
	account, err := rule(b)
	if err != nil {
		return Checked{}, err
	}
	fields, err := envelope.JSON(b)
	if err != nil {
		return Checked{}, err
	}
	return Checked{Rail: rail, Name: name, Account: account, Fields: fields}, nil
}

func nameOf(b any) string {
	switch v := b.(type) {
	case *sepa:
		return v.Name
	case *fasterPayments:
		return v.Name
	case *ach:
		return v.Name
	case *wire:
		return v.Name
	case *spei:
		return v.Name
	case *pix:
		return v.Name
	case *swift:
		return v.Name
	}
	return ""
}

const maxName = 140 // what SEPA carries for a creditor name

var (
	nameChars    = regexp.MustCompile(`^[^\x00-\x1F\x7F]*$`)
	ibanShape    = regexp.MustCompile(`^[A-Za-z]{2}[0-9]{2}[A-Za-z0-9 ]{1,40}$`)
	swiftAccount = regexp.MustCompile(`^[A-Za-z0-9]{1,34}$`)
	postalCode   = regexp.MustCompile(`^[A-Za-z0-9 -]{1,16}$`)
	alpha2       = regexp.MustCompile(`^[A-Za-z]{2}$`)
)

func checkName(name string) error {
	switch {
	case name == "":
		return envelope.InvalidRequest("beneficiary.name is required: the account holder's name.")
	case !utf8.ValidString(name) || utf8.RuneCountInString(name) > maxName:
		return envelope.InvalidRequest("beneficiary.name must be at most 140 characters.")
	case !nameChars.MatchString(name):
		return envelope.InvalidRequest("beneficiary.name must not hold control characters.")
	}
	return nil
}

var ibanMessages = map[string]string{
	iban.Required:           "beneficiary.iban is required: the account's IBAN.",
	iban.InvalidFormat:      "beneficiary.iban is not an IBAN: its length or characters do not fit its country's format.",
	iban.UnsupportedCountry: "beneficiary.iban is from a country that does not issue IBANs.",
	iban.InvalidChecksum:    "beneficiary.iban has an invalid checksum; check it for a mistyped character.",
}

// checkIBAN checks an IBAN for an account in country: its IBAN's country
// is country, or the one whose IBANs country's accounts carry (iban.CountryOf:
// a Guadeloupe account's is FR). It returns the electronic form.
func checkIBAN(field, s, country string) (string, error) {
	if s != "" && !ibanShape.MatchString(s) {
		return "", envelope.InvalidRequest(ibanMessages[iban.InvalidFormat])
	}
	account, err := iban.Validate(s)
	var ie *iban.Error
	if errors.As(err, &ie) {
		return "", envelope.InvalidRequest(ibanMessages[ie.Label])
	}
	if err != nil {
		return "", err
	}
	if want := iban.CountryOf(country); account[:2] != want {
		msg := field + " is an account in " + account[:2] + "; this quote pays out to " + country + "."
		if want != country {
			msg = field + " is an account in " + account[:2] + "; this quote pays out to " + country + ", whose accounts carry " + want + " IBANs."
		}
		return "", envelope.InvalidRequest(msg)
	}
	return account, nil
}

func checkBIC(field, s string) (string, error) {
	c, err := bankaccount.BIC(s)
	return c, fieldError(field, err)
}

func checkUS(routing, account string) error {
	if err := fieldError("beneficiary.routingNumber", bankaccount.ABARoutingNumber(routing)); err != nil {
		return err
	}
	return fieldError("beneficiary.accountNumber", bankaccount.USAccountNumber(account))
}

func checkAddress(a *Address) error {
	if a == nil {
		return envelope.InvalidRequest("beneficiary.address is required: " + describe["beneficiary.address"] + ".")
	}
	text := func(field, v string, max int, optional bool) error {
		switch {
		case v == "" && optional:
			return envelope.InvalidRequest(field + ", when sent, must not be empty; leave it out instead.")
		case v == "":
			return envelope.InvalidRequest(field + " is required.")
		case utf8.RuneCountInString(v) > max || !nameChars.MatchString(v):
			return envelope.InvalidRequest(field + " must be at most " + strconv.Itoa(max) + " characters, with no control characters.")
		}
		return nil
	}
	if err := text("beneficiary.address.line1", a.Line1, 140, false); err != nil {
		return err
	}
	if a.Line2 != nil {
		if err := text("beneficiary.address.line2", *a.Line2, 140, true); err != nil {
			return err
		}
	}
	if err := text("beneficiary.address.city", a.City, 70, false); err != nil {
		return err
	}
	if a.Region != nil {
		if err := text("beneficiary.address.region", *a.Region, 70, true); err != nil {
			return err
		}
	}
	switch {
	case a.PostalCode == "":
		return envelope.InvalidRequest("beneficiary.address.postalCode is required.")
	case !postalCode.MatchString(a.PostalCode):
		return envelope.InvalidRequest("beneficiary.address.postalCode must be " + describe["beneficiary.address.postalCode"] + ".")
	}
	if a.Country != "" && !alpha2.MatchString(a.Country) {
		return envelope.InvalidRequest("beneficiary.address.country must be a known ISO 3166-1 alpha-2 country code.")
	}
	c, err := format.Country("beneficiary.address.country", a.Country)
	if err != nil {
		return err
	}
	a.Country = c
	return nil
}

// fieldError words a bankaccount refusal of field.
func fieldError(field string, err error) error {
	var e *bankaccount.Error
	if !errors.As(err, &e) {
		return err
	}
	what := describe[field]
	switch e.Label {
	case bankaccount.Required:
		return envelope.InvalidRequest(field + " is required: " + what + ".")
	case bankaccount.InvalidChecksum:
		return envelope.InvalidRequest(field + " has an invalid checksum; check it for a mistyped digit.")
	}
	return envelope.InvalidRequest(field + " must be " + what + ".")
}

// describe says what each field holds, for messages and the schemas.
var describe = map[string]string{
	"beneficiary.bic":                   "a BIC (ISO 9362): 8 or 11 upper-case letters and digits, the bank's country in the 5th and 6th",
	"beneficiary.sortCode":              "a UK sort code: 6 digits, as 123456, 12-34-56 or 12 34 56",
	"beneficiary.accountNumber":         "the account number: 8 digits for a UK account, 4 to 17 digits for a US one",
	"beneficiary.accountNumber@swift":   "the account number at the bank: 1 to 34 letters and digits",
	"beneficiary.routingNumber":         "an ABA routing number: 9 digits with a valid check digit",
	"beneficiary.accountType":           "checking or savings",
	"beneficiary.clabe":                 "a CLABE: 18 digits with a valid check digit",
	"beneficiary.pixKey":                "a PIX key: a CPF or CNPJ (digits only), an e-mail address, a +55 phone number in E.164, or a random key (a lower-case UUID)",
	"beneficiary.taxId":                 "the holder's CPF (11 digits) or CNPJ (14 digits), digits only, with valid check digits",
	"beneficiary.address":               "the holder's postal address: line1, line2 (optional), city, region (optional), postalCode, country",
	"beneficiary.address.postalCode":    "1 to 16 letters, digits, spaces or dashes",
	"beneficiary.iban":                  "an IBAN, in its electronic form or in groups of four",
	"beneficiary.name":                  "the account holder's name: 1 to 140 characters, no control characters",
	"beneficiary.address.country":       "the address's ISO 3166-1 alpha-2 country code",
	"beneficiary.address.line1":         "the first address line: 1 to 140 characters",
	"beneficiary.address.city":          "the city: 1 to 70 characters",
	"beneficiary.address.line2@schema":  "a second address line: 1 to 140 characters",
	"beneficiary.address.region@schema": "a state, province or region: 1 to 70 characters",
}
