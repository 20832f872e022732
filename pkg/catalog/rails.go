package catalog

import (
	"math/big"
	"sort"
	"strings"
	"time"

	"github.com/partnerpay/api/pkg/envelope"
)

// SettlementNotation explains the settlement durations of the rails table.
const SettlementNotation = "ISO 8601 duration (PT10S = 10 seconds, PT2H = 2 hours, P1D = 1 day): the rail's normal settlement time, never a commitment."

// Rail is a published bank payout rail. Countries nil means "every country
// the other rails do not serve for that currency" (SWIFT's role).
type Rail struct {
	Name       string
	Currencies []string
	Countries  map[string]bool
	Settlement string
	settleIn   time.Duration
	// Per-payout limits in major units of the payout currency, as published
	// (GET /v1/limits) and as enforced.
	MinAmount string
	MaxAmount string
	min, max  *big.Rat
}

// sepaArea is the SEPA scheme's geographical scope: the EEA, the
// micro-states and non-EU members, and the territories that take part.
var sepaArea = setOf(
	// EU
	"AT", "BE", "BG", "HR", "CY", "CZ", "DK", "EE", "FI", "FR", "DE", "GR", "HU", "IE",
	"IT", "LV", "LT", "LU", "MT", "NL", "PL", "PT", "RO", "SK", "SI", "ES", "SE",
	// rest of the EEA, and non-EEA members
	"IS", "LI", "NO", "CH", "GB", "MC", "SM", "VA", "AD",
	// territories in the scheme
	"AX", "GF", "GP", "MQ", "YT", "RE", "BL", "MF", "PM", "GI", "GG", "JE", "IM",
)

var rails = []Rail{
	{Name: "sepa_instant", Currencies: []string{"EUR"}, Countries: sepaArea, Settlement: "PT10S", settleIn: 10 * time.Second, MinAmount: "1", MaxAmount: "100000"},
	{Name: "sepa", Currencies: []string{"EUR"}, Countries: sepaArea, Settlement: "P1D", settleIn: 24 * time.Hour, MinAmount: "1", MaxAmount: "1000000"},
	{Name: "faster_payments", Currencies: []string{"GBP"}, Countries: setOf("GB"), Settlement: "PT2H", settleIn: 2 * time.Hour, MinAmount: "1", MaxAmount: "1000000"},
	{Name: "ach", Currencies: []string{"USD"}, Countries: setOf("US"), Settlement: "P1D", settleIn: 24 * time.Hour, MinAmount: "1", MaxAmount: "1000000"},
	{Name: "wire", Currencies: []string{"USD"}, Countries: setOf("US"), Settlement: "PT4H", settleIn: 4 * time.Hour, MinAmount: "100", MaxAmount: "10000000"},
	{Name: "spei", Currencies: []string{"MXN"}, Countries: setOf("MX"), Settlement: "PT1M", settleIn: time.Minute, MinAmount: "1", MaxAmount: "5000000"},
	{Name: "pix", Currencies: []string{"BRL"}, Countries: setOf("BR"), Settlement: "PT1M", settleIn: time.Minute, MinAmount: "1", MaxAmount: "1000000"},
	{Name: "swift", Currencies: []string{"USD", "EUR", "GBP"}, Countries: nil, Settlement: "P3D", settleIn: 72 * time.Hour, MinAmount: "100", MaxAmount: "10000000"},
}

// bySpeed holds the rails fastest first, ties in table order. Building it
// also parses each rail's limits once.
var bySpeed = func() []*Rail {
	out := make([]*Rail, len(rails))
	for i := range rails {
		r := &rails[i]
		r.min, _ = new(big.Rat).SetString(r.MinAmount)
		r.max, _ = new(big.Rat).SetString(r.MaxAmount)
		out[i] = r
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].settleIn < out[j].settleIn })
	return out
}()

// Rails lists the published rails in table order. Callers must not modify it.
func Rails() []Rail { return rails }

// RailNamed is the rail named name.
func RailNamed(name string) (Rail, bool) {
	for _, r := range rails {
		if r.Name == name {
			return r, true
		}
	}
	return Rail{}, false
}

// SettlesIn is the rail's normal settlement time (Settlement, as a
// duration).
func (r *Rail) SettlesIn() time.Duration { return r.settleIn }

func (r *Rail) carries(currency string) bool {
	for _, c := range r.Currencies {
		if c == currency {
			return true
		}
	}
	return false
}

// Serves reports whether the rail pays out currency (canonical) to country
// (canonical).
func (r *Rail) Serves(currency, country string) bool {
	if !r.carries(currency) {
		return false
	}
	if r.Countries != nil {
		return r.Countries[country]
	}
	// A catch-all rail serves the countries no specific rail reaches in that currency.
	for i := range rails {
		o := &rails[i]
		if o.Countries != nil && o.carries(currency) && o.Countries[country] {
			return false
		}
	}
	return true
}

// CountryList is the rail's explicit country list, sorted; nil for a catch-all.
func (r *Rail) CountryList() []string {
	if r.Countries == nil {
		return nil
	}
	out := make([]string, 0, len(r.Countries))
	for c := range r.Countries {
		out = append(out, c)
	}
	sort.Strings(out)
	return out
}

// ResolveRail picks the rail for a payout of amount (major units of
// currency; both canonical; nil when no reference rate converts it, which
// only happens for a currency no rail serves): the forced one if it serves the currency, the
// country and the amount, otherwise the fastest that does. Anything else is
// a 400 no_route that says why.
func ResolveRail(currency, country, forced string, amount *big.Rat) (Rail, error) {
	if forced != "" {
		for i := range rails {
			r := &rails[i]
			if !strings.EqualFold(r.Name, forced) {
				continue
			}
			if !r.Serves(currency, country) {
				break
			}
			if amount != nil && !r.Takes(amount) {
				return Rail{}, envelope.New(envelope.CodeNoRoute, "The forced rail "+r.Name+" takes "+r.MinAmount+" to "+r.MaxAmount+" "+currency+
					" per payout; this payout is "+Figure(amount)+" "+currency+"; see GET /v1/limits.")
			}
			return *r, nil
		}
		return Rail{}, envelope.New(envelope.CodeNoRoute, "The forced rail does not serve "+currency+" to "+country+"; see GET /v1/limits.")
	}
	var lo, hi *big.Rat
	for _, r := range bySpeed {
		if !r.Serves(currency, country) {
			continue
		}
		if amount == nil || r.Takes(amount) {
			return *r, nil
		}
		if lo == nil || r.min.Cmp(lo) < 0 {
			lo = r.min
		}
		if hi == nil || r.max.Cmp(hi) > 0 {
			hi = r.max
		}
	}
	if lo == nil {
		return Rail{}, envelope.New(envelope.CodeNoRoute, "No payout rail serves "+currency+" to "+country+"; see GET /v1/limits.")
	}
	return Rail{}, envelope.New(envelope.CodeNoRoute, "No payout rail takes "+Figure(amount)+" "+currency+" to "+country+
		": the rails that serve it take "+Figure(lo)+" to "+Figure(hi)+" "+currency+" per payout; see GET /v1/limits.")
}

// Takes reports whether amount is within the rail's per-payout limits.
func (r *Rail) Takes(amount *big.Rat) bool {
	return amount.Cmp(r.min) >= 0 && amount.Cmp(r.max) <= 0
}

// Figure writes an amount for a message: at most two decimals, no trailing
// zeros ("500000", "92.59").
func Figure(a *big.Rat) string {
	s := a.FloatString(2)
	s = strings.TrimRight(s, "0")
	return strings.TrimSuffix(s, ".")
}

// CountryRails names the rails that reach a country, fastest first.
func CountryRails(country string) []string {
	var out []string
	for _, r := range bySpeed {
		for _, cur := range r.Currencies {
			if r.Serves(cur, country) {
				out = append(out, r.Name)
				break
			}
		}
	}
	return out
}

// PayoutCurrencies lists the currencies some rail pays out, sorted.
func PayoutCurrencies() []string {
	seen := map[string]bool{}
	var out []string
	for _, r := range rails {
		for _, c := range r.Currencies {
			if !seen[c] {
				seen[c] = true
				out = append(out, c)
			}
		}
	}
	sort.Strings(out)
	return out
}

func setOf(codes ...string) map[string]bool {
	m := make(map[string]bool, len(codes))
	for _, c := range codes {
		m[c] = true
	}
	return m
}
