package format

import (
	"sort"
	"strings"
	"sync"

	"golang.org/x/text/currency"
	"golang.org/x/text/language"
	"golang.org/x/text/language/display"
)

// notAssigned are codes x/text knows as regions that ISO 3166-1 does not
// assign to a country: exceptionally or transitionally reserved, or withdrawn.
// XK (Kosovo) is user-assigned but used by banks (its IBANs start with XK), so
// it stays.
var notAssigned = map[string]bool{
	"AC": true, "AN": true, "CP": true, "CQ": true, "CS": true, "DG": true,
	"EA": true, "EZ": true, "FQ": true, "IC": true, "NT": true, "PC": true,
	"SU": true, "TA": true, "UN": true, "YU": true,
}

// ISOCountry is a destination a bank payout can be priced for.
type ISOCountry struct {
	Code string `json:"code"`
	Name string `json:"name"`
}

// countries is built on first use, not at init: a binary that never asks
// (the gateway) never reads x/text's display tables, nor keeps the list.
var countries = sync.OnceValue(func() []ISOCountry {
	var out []ISOCountry
	names := display.English.Regions()
	for a := 'A'; a <= 'Z'; a++ {
		for b := 'A'; b <= 'Z'; b++ {
			code := string([]rune{a, b})
			if r, ok := region(code); ok {
				out = append(out, ISOCountry{Code: code, Name: names.Name(r)})
			}
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Code < out[j].Code })
	return out
})

var countrySet = sync.OnceValue(func() map[string]bool {
	m := make(map[string]bool, len(countries()))
	for _, c := range countries() {
		m[c.Code] = true
	}
	return m
})

func region(code string) (language.Region, bool) {
	r, err := language.ParseRegion(code)
	if err != nil || !r.IsCountry() || r.String() != code || r.Canonicalize() != r || notAssigned[code] {
		return language.Region{}, false
	}
	return r, true
}

// Countries lists every ISO 3166-1 alpha-2 country, sorted by code.
func Countries() []ISOCountry { return countries() }

// CanonicalCountry upper-cases an alpha-2 code and reports whether it names an
// assigned country. Aliases such as UK are refused, not rewritten: the partner
// should learn the code its bank will need.
func CanonicalCountry(code string) (string, bool) {
	if len(code) != 2 {
		return "", false
	}
	c := strings.ToUpper(code)
	return c, countrySet()[c]
}

// CanonicalCurrency upper-cases an ISO 4217 code and reports whether it is one.
func CanonicalCurrency(code string) (string, bool) {
	if len(code) != 3 {
		return "", false
	}
	u, err := currency.ParseISO(code)
	if err != nil {
		return "", false
	}
	return u.String(), true
}
