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
	"bytes"
	"errors"
	"reflect"
	"regexp"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"

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

// Problem is one thing wrong with a beneficiary: the field, as a message
// names it (beneficiary.iban), a code, and the message execution answers
// when it is the first.
type Problem struct {
	Field   string `json:"field"`
	Code    string `json:"code"`
	Message string `json:"message"`
}

// Problem codes.
const (
	Required        = "required"
	UnknownField    = "unknown_field"
	InvalidFormat   = "invalid_format"
	InvalidChecksum = "invalid_checksum"
	CountryMismatch = "country_mismatch"
	TooLong         = "too_long"
)

// problems collects a beneficiary's problems, in the order the checks run.
type problems []Problem

func (p *problems) add(field, code, message string) { *p = append(*p, Problem{field, code, message}) }

// Check reads raw, the beneficiary object of a payout, against rail (the
// quote's) and country (the quote's destination, canonical). A wrong one is
// 400 invalid_request naming the first problem.
func Check(rail, country string, raw []byte) (Checked, error) {
	c, found, err := run(rail, country, raw, false)
	if err != nil {
		return Checked{}, err
	}
	if len(found) > 0 {
		return Checked{}, envelope.InvalidRequest(found[0].Message)
	}
	return c, nil
}

// Validate runs Check's checks on raw and reports every problem, not only
// the first (POST /v1/bank/payout/validate): the first is the one Check
// refuses with, in its words. The error is for a rail Check does not know.
func Validate(rail, country string, raw []byte) (Checked, []Problem, error) {
	return run(rail, country, raw, true)
}

func run(rail, country string, raw []byte, all bool) (Checked, problems, error) {
	switch rail {
	case "sepa", "sepa_instant":
		return check(rail, raw, all, func(b *sepa, p *problems) string {
			account, ok := checkIBAN(p, "beneficiary.iban", b.IBAN, country)
			b.IBAN = account
			if b.BIC != nil {
				if c, ok2 := checkBIC(p, "beneficiary.bic", *b.BIC); ok && ok2 && c != account[:2] && c != country {
					p.add("beneficiary.bic", CountryMismatch, "beneficiary.bic is a bank in "+c+", not in the IBAN's country "+account[:2]+".")
				}
			}
			return account
		})
	case "faster_payments":
		return check(rail, raw, all, func(b *fasterPayments, p *problems) string {
			sc, err := bankaccount.SortCode(b.SortCode)
			if fieldProblem(p, "beneficiary.sortCode", err) {
				b.SortCode = sc
			}
			fieldProblem(p, "beneficiary.accountNumber", bankaccount.UKAccountNumber(b.AccountNumber))
			return b.AccountNumber
		})
	case "ach":
		return check(rail, raw, all, func(b *ach, p *problems) string {
			checkUS(p, b.RoutingNumber, b.AccountNumber)
			switch b.AccountType {
			case "checking", "savings":
			case "":
				p.add("beneficiary.accountType", Required, "beneficiary.accountType is required: "+describe["beneficiary.accountType"]+".")
			default:
				p.add("beneficiary.accountType", InvalidFormat, "beneficiary.accountType must be "+describe["beneficiary.accountType"]+".")
			}
			return b.AccountNumber
		})
	case "wire":
		return check(rail, raw, all, func(b *wire, p *problems) string {
			checkUS(p, b.RoutingNumber, b.AccountNumber)
			checkAddress(p, b.Address)
			return b.AccountNumber
		})
	case "spei":
		return check(rail, raw, all, func(b *spei, p *problems) string {
			fieldProblem(p, "beneficiary.clabe", bankaccount.CLABE(b.CLABE))
			return b.CLABE
		})
	case "pix":
		return check(rail, raw, all, func(b *pix, p *problems) string {
			_, err := bankaccount.PixKey(b.PixKey)
			fieldProblem(p, "beneficiary.pixKey", err)
			fieldProblem(p, "beneficiary.taxId", bankaccount.TaxID(b.TaxID))
			return b.PixKey
		})
	case "swift":
		return check(rail, raw, all, func(b *swift, p *problems) string {
			if c, ok := checkBIC(p, "beneficiary.bic", b.BIC); ok && c != country && c != iban.CountryOf(country) {
				p.add("beneficiary.bic", CountryMismatch, "beneficiary.bic is a bank in "+c+"; this quote pays out to "+country+".")
			}
			var account string
			switch {
			case b.IBAN == nil && b.AccountNumber == nil:
				p.add("beneficiary.iban", Required, "Send exactly one of beneficiary.iban and beneficiary.accountNumber.")
			case b.IBAN != nil && b.AccountNumber != nil:
				p.add("beneficiary.accountNumber", UnknownField, "Send exactly one of beneficiary.iban and beneficiary.accountNumber.")
			case b.IBAN != nil:
				account, _ = checkIBAN(p, "beneficiary.iban", *b.IBAN, country)
				b.IBAN = &account
			default:
				account = *b.AccountNumber
				if !swiftAccount.MatchString(account) {
					p.add("beneficiary.accountNumber", InvalidFormat, "beneficiary.accountNumber must be "+describe["beneficiary.accountNumber@swift"]+".")
				}
			}
			checkAddress(p, b.Address)
			return account
		})
	}
	return Checked{}, nil, errors.New("beneficiary: no rail " + rail)
}

// check decodes raw into the rail's fields, strictly (unknown fields and
// wrong types are named as beneficiary.<field>), checks the name, then the
// rail's own fields with rule, which canonicalises them and returns the
// account identifier. With all, a decoding problem does not end the
// checks: every field that decodes is checked (decodeAll).
func check[T any](rail string, raw []byte, all bool, rule func(*T, *problems) string) (Checked, problems, error) {
	var p problems
	b, err := decode[T](raw)
	if err != nil {
		msg := err.Error()
		if e, ok := envelope.From(err); ok {
			msg = e.Message
		}
		if !all {
			return Checked{}, problems{{"beneficiary", InvalidFormat, msg}}, nil
		}
		if b, p = decodeAll[T](raw, "beneficiary", msg); b == nil {
			return Checked{}, p, nil
		}
	}
	name := nameOf(b)
	checkName(&p, name)
	account := rule(b, &p)
	if len(p) > 0 {
		return Checked{}, p, nil
	}
	fields, err := envelope.JSON(b)
	if err != nil {
		return Checked{}, nil, err
	}
	return Checked{Rail: rail, Name: name, Account: account, Fields: fields}, nil, nil
}

// decode reads raw into the rail's fields as Check always has: strictly,
// the first problem refused.
func decode[T any](raw []byte) (*T, error) {
	var in struct {
		Beneficiary *T `json:"beneficiary"`
	}
	wrapped := make([]byte, 0, len(raw)+len(`{"beneficiary":}`))
	wrapped = append(append(append(wrapped, `{"beneficiary":`...), raw...), '}')
	if err := jsonbody.Bytes(wrapped, &in); err != nil {
		return nil, err
	}
	if in.Beneficiary == nil {
		return nil, envelope.InvalidRequest(missing)
	}
	return in.Beneficiary, nil
}

const missing = "beneficiary is required: the bank account paid, with the fields of the quote's rail (GET /v1/limits)."

// decodeAll reads what it can of raw, a beneficiary (or its address, at
// path) that decode refused with first: each member on its own, so that
// every unknown member and every member of a wrong type is a problem, and
// the members that decode are checked. It answers nil when raw is not an
// object at all (first is then the only problem).
func decodeAll[T any](raw []byte, path, first string) (*T, problems) {
	names, members, ok := membersOf(raw)
	if !ok {
		code := InvalidFormat
		if len(raw) == 0 || string(raw) == "null" {
			code = Required
		}
		if first == "" {
			first = missing
		}
		return nil, problems{{path, code, first}}
	}
	var p problems
	known := fieldsOf(reflect.TypeFor[T]())
	kept := map[string]jsontext.Value{}
	for _, name := range names {
		field, v := path+"."+name, members[name]
		sub, ok := known[name]
		switch {
		case !ok:
			p.add(field, UnknownField, "Unknown field "+strconv.Quote(cut(field))+".")
			continue
		case sub == reflect.TypeFor[Address]() && len(v) > 0 && v[0] == '{':
			a, ap := decodeAll[Address](v, field, "")
			p = append(p, ap...)
			if a == nil {
				continue
			}
			v, _ = json.Marshal(a)
		default:
			one, _ := json.Marshal(map[string]jsontext.Value{name: v})
			var t T
			if err := jsonbody.Bytes(one, &t); err != nil {
				msg := err.Error()
				if e, ok := envelope.From(err); ok {
					msg = "Field " + strconv.Quote(cut(field)) + strings.TrimPrefix(e.Message, "Field "+strconv.Quote(name))
				}
				p.add(field, InvalidFormat, msg)
				continue
			}
		}
		kept[name] = v
	}
	body, _ := json.Marshal(kept)
	t := new(T)
	_ = json.Unmarshal(body, t)
	return t, p
}

// membersOf is the members of raw, a JSON object, and their names in the
// order they come (a problem is named where it stands); not ok when raw is
// not an object, or a name stands twice.
func membersOf(raw []byte) ([]string, map[string]jsontext.Value, bool) {
	var members map[string]jsontext.Value
	if len(raw) == 0 || json.Unmarshal(raw, &members) != nil || members == nil {
		return nil, nil, false
	}
	dec := jsontext.NewDecoder(bytes.NewReader(raw))
	if _, err := dec.ReadToken(); err != nil {
		return nil, nil, false
	}
	names := make([]string, 0, len(members))
	for dec.PeekKind() != '}' {
		tok, err := dec.ReadToken()
		if err != nil {
			return nil, nil, false
		}
		names = append(names, tok.String()) // before the next read: tok is the decoder's
		if dec.SkipValue() != nil {
			return nil, nil, false
		}
	}
	return names, members, true
}

// fieldsOf is the JSON member names of struct t, with their types.
func fieldsOf(t reflect.Type) map[string]reflect.Type {
	out := map[string]reflect.Type{}
	for i := range t.NumField() {
		f := t.Field(i)
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		ft := f.Type
		if ft.Kind() == reflect.Pointer {
			ft = ft.Elem()
		}
		out[name] = ft
	}
	return out
}

// cut is a member's path as a message quotes it: at most 64 characters.
func cut(s string) string {
	if r := []rune(s); len(r) > 64 {
		return string(r[:63]) + "…"
	}
	return s
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

func checkName(p *problems, name string) {
	switch {
	case name == "":
		p.add("beneficiary.name", Required, "beneficiary.name is required: the account holder's name.")
	case !utf8.ValidString(name):
		p.add("beneficiary.name", InvalidFormat, "beneficiary.name must be at most 140 characters.")
	case utf8.RuneCountInString(name) > maxName:
		p.add("beneficiary.name", TooLong, "beneficiary.name must be at most 140 characters.")
	case !nameChars.MatchString(name):
		p.add("beneficiary.name", InvalidFormat, "beneficiary.name must not hold control characters.")
	}
}

var ibanMessages = map[string]string{
	iban.Required:           "beneficiary.iban is required: the account's IBAN.",
	iban.InvalidFormat:      "beneficiary.iban is not an IBAN: its length or characters do not fit its country's format.",
	iban.UnsupportedCountry: "beneficiary.iban is from a country that does not issue IBANs.",
	iban.InvalidChecksum:    "beneficiary.iban has an invalid checksum; check it for a mistyped character.",
}

var ibanCodes = map[string]string{
	iban.Required:           Required,
	iban.InvalidFormat:      InvalidFormat,
	iban.UnsupportedCountry: InvalidFormat,
	iban.InvalidChecksum:    InvalidChecksum,
}

// checkIBAN checks an IBAN for an account in country: its IBAN's country
// is country, or the one whose IBANs country's accounts carry (iban.CountryOf:
// a Guadeloupe account's is FR). It returns the electronic form, and
// whether it is an IBAN at all (a country mismatch aside).
func checkIBAN(p *problems, field, s, country string) (string, bool) {
	if s != "" && !ibanShape.MatchString(s) {
		p.add(field, InvalidFormat, ibanMessages[iban.InvalidFormat])
		return s, false
	}
	account, err := iban.Validate(s)
	var ie *iban.Error
	switch {
	case errors.As(err, &ie):
		p.add(field, ibanCodes[ie.Label], ibanMessages[ie.Label])
		return s, false
	case err != nil:
		p.add(field, InvalidFormat, ibanMessages[iban.InvalidFormat])
		return s, false
	}
	if want := iban.CountryOf(country); account[:2] != want {
		msg := field + " is an account in " + account[:2] + "; this quote pays out to " + country + "."
		if want != country {
			msg = field + " is an account in " + account[:2] + "; this quote pays out to " + country + ", whose accounts carry " + want + " IBANs."
		}
		p.add(field, CountryMismatch, msg)
	}
	return account, true
}

// checkBIC checks a BIC; it returns its country, and whether it is one.
func checkBIC(p *problems, field, s string) (string, bool) {
	c, err := bankaccount.BIC(s)
	return c, fieldProblem(p, field, err)
}

func checkUS(p *problems, routing, account string) {
	fieldProblem(p, "beneficiary.routingNumber", bankaccount.ABARoutingNumber(routing))
	fieldProblem(p, "beneficiary.accountNumber", bankaccount.USAccountNumber(account))
}

func checkAddress(p *problems, a *Address) {
	if a == nil {
		p.add("beneficiary.address", Required, "beneficiary.address is required: "+describe["beneficiary.address"]+".")
		return
	}
	text := func(field, v string, max int, optional bool) {
		switch {
		case v == "" && optional:
			p.add(field, InvalidFormat, field+", when sent, must not be empty; leave it out instead.")
		case v == "":
			p.add(field, Required, field+" is required.")
		case utf8.RuneCountInString(v) > max:
			p.add(field, TooLong, field+" must be at most "+strconv.Itoa(max)+" characters, with no control characters.")
		case !nameChars.MatchString(v):
			p.add(field, InvalidFormat, field+" must be at most "+strconv.Itoa(max)+" characters, with no control characters.")
		}
	}
	text("beneficiary.address.line1", a.Line1, 140, false)
	if a.Line2 != nil {
		text("beneficiary.address.line2", *a.Line2, 140, true)
	}
	text("beneficiary.address.city", a.City, 70, false)
	if a.Region != nil {
		text("beneficiary.address.region", *a.Region, 70, true)
	}
	switch {
	case a.PostalCode == "":
		p.add("beneficiary.address.postalCode", Required, "beneficiary.address.postalCode is required.")
	case !postalCode.MatchString(a.PostalCode):
		p.add("beneficiary.address.postalCode", InvalidFormat, "beneficiary.address.postalCode must be "+describe["beneficiary.address.postalCode"]+".")
	}
	if a.Country != "" && !alpha2.MatchString(a.Country) {
		p.add("beneficiary.address.country", InvalidFormat, "beneficiary.address.country must be a known ISO 3166-1 alpha-2 country code.")
		return
	}
	c, err := format.Country("beneficiary.address.country", a.Country)
	if err != nil {
		code := InvalidFormat
		if a.Country == "" {
			code = Required
		}
		msg := err.Error()
		if e, ok := envelope.From(err); ok {
			msg = e.Message
		}
		p.add("beneficiary.address.country", code, msg)
		return
	}
	a.Country = c
}

// fieldProblem adds a bankaccount refusal of field to p, worded; it
// reports whether there was none.
func fieldProblem(p *problems, field string, err error) bool {
	var e *bankaccount.Error
	switch {
	case err == nil:
		return true
	case !errors.As(err, &e):
		p.add(field, InvalidFormat, field+" must be "+describe[field]+".")
		return false
	}
	what := describe[field]
	switch e.Label {
	case bankaccount.Required:
		p.add(field, Required, field+" is required: "+what+".")
	case bankaccount.InvalidChecksum:
		p.add(field, InvalidChecksum, field+" has an invalid checksum; check it for a mistyped digit.")
	default:
		p.add(field, InvalidFormat, field+" must be "+what+".")
	}
	return false
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

// AccountOf is the account identifier in a beneficiary's checked fields
// (Checked.Fields, as stored) for rail: its AccountField, or for SWIFT the
// IBAN when there is no account number. It reads the JSON's tokens, not a
// map: a page of 100 payouts masks 100 of them.
func AccountOf(rail string, fields []byte) string {
	want := AccountField(rail)
	d := jsontext.NewDecoder(bytes.NewReader(fields))
	if tok, err := d.ReadToken(); err != nil || tok.Kind() != '{' {
		return ""
	}
	var iban string
	for d.PeekKind() == '"' {
		k, err := d.ReadToken()
		if err != nil {
			return ""
		}
		key := k.String() // a token is void after the next read
		v, err := d.ReadValue()
		if err != nil {
			return ""
		}
		if v.Kind() != '"' || (key != want && key != "iban") {
			continue
		}
		s, err := jsontext.AppendUnquote(nil, v)
		if err != nil {
			return ""
		}
		if key == want {
			return string(s)
		}
		iban = string(s)
	}
	return iban
}
