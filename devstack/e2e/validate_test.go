package e2e

import (
	"strings"
	"testing"
)

// Not parallel: see the package comment (one stack at a time).
//
// Validate before anyone deposits (DESIGN §3): through the gateway,
// validation names every problem at once, answers the sandbox's payee
// check, consumes nothing, and keeps the quote's own refusals.
func TestValidateBeforeAnyoneDeposits(t *testing.T) {
	// Not parallel: a stack of its own, timed against bounds (package e2e).
	s := startStack(t)
	acme := s.issue("acme", "--products", "bank", "--source-chains", "84532", "--rate", "1000")
	globex := s.issue("globex", "--products", "bank", "--source-chains", "84532", "--rate", "1000")
	fiatOnly := s.issue("fiat-only", "--products", "fiat", "--rate", "1000")
	q := s.quoteID(acme, eur("100"))
	validate := func(key, quoteID, beneficiary string) response {
		return s.post("/v1/bank/payout/validate", key, `{"quoteId":"`+quoteID+`","beneficiary":`+beneficiary+`}`)
	}

	r := validate(acme, q, `{"iban":"DE89 3704 0044 0532 0130 01","bic":"NWBKGB2L","sortCode":"601613"}`)
	want := `{"environment":"sandbox","valid":false,"errors":[` +
		`{"field":"beneficiary.sortCode","code":"unknown_field","message":"Unknown field \"beneficiary.sortCode\"."},` +
		`{"field":"beneficiary.name","code":"required","message":"beneficiary.name is required: the account holder's name."},` +
		`{"field":"beneficiary.iban","code":"invalid_checksum","message":"beneficiary.iban has an invalid checksum; check it for a mistyped character."}]}`
	if r.Status != 200 || r.Body != want {
		t.Errorf("three problems:\n got %d %s\nwant 200 %s", r.Status, r.Body, want)
	}
	for name, want := range map[string]string{
		"Ada Lovelace":       `{"environment":"sandbox","valid":true,"errors":[],"nameCheck":{"result":"match"}}`,
		"Ada Close Lovelace": `{"environment":"sandbox","valid":true,"errors":[],"nameCheck":{"result":"close_match","registeredName":"Ada Lovelace"}}`,
		"Ada Mismatch":       `{"environment":"sandbox","valid":true,"errors":[],"nameCheck":{"result":"no_match"}}`,
		"Unavailable Ltd":    `{"environment":"sandbox","valid":true,"errors":[],"nameCheck":{"result":"not_possible"}}`,
	} {
		if r := validate(acme, q, `{"name":"`+name+`","iban":"DE89370400440532013000"}`); r.Status != 200 || r.Body != want {
			t.Errorf("%s: %d %s, want %s", name, r.Status, r.Body, want)
		}
	}
	// A null in the beneficiary is one of its problems, not a refused body.
	for what, beneficiary := range map[string]string{
		"a null name":    `{"name":null,"iban":"DE89370400440532013000"}`,
		"a null address": `{"name":"Ada","iban":"DE89370400440532013000","bic":null}`,
	} {
		r := validate(acme, q, beneficiary)
		if r.Status != 200 || !strings.HasPrefix(r.Body, `{"environment":"sandbox","valid":false,"errors":[{"field":"beneficiary`) {
			t.Errorf("%s: %d %s, want 200 with the problem in errors", what, r.Status, r.Body)
		}
	}
	if r := validate(acme, q, `{"name":"Ada","iban":"DE89370400440532013000"}`); r.Header.Get("Idempotent-Replayed") != "" {
		t.Errorf("a validation replayed: %v", r.Header)
	}

	// The quote's own refusals, and the product.
	for name, tt := range map[string]struct {
		key, quote    string
		status        int
		code, message string
	}{
		"another key's quote": {globex, q, 404, "quote_not_found", "No quote with this quoteId exists for this key."},
		"a malformed id":      {acme, "bpq_1", 404, "quote_not_found", "No quote with this quoteId exists for this key."},
		"no bank product":     {fiatOnly, q, 403, "permission_denied", ""},
	} {
		r := validate(tt.key, tt.quote, `{}`)
		if r.Status != tt.status || (tt.message != "" && r.Body != errorBody(tt.code, tt.message)) || !strings.Contains(r.Body, `"code":"`+tt.code+`"`) {
			t.Errorf("%s: %d %s", name, r.Status, r.Body)
		}
	}

	// It consumed nothing: the quote executes, to another beneficiary than
	// any validated; then it has nothing left to validate.
	if r := s.post(executePath, acme, executeBody(q, "FR1420041010050500013M02606")); r.Status != 400 {
		t.Errorf("an FR IBAN on a DE quote: %d %s", r.Status, r.Body)
	}
	if r := s.post(executePath, acme, `{"quoteId":"`+q+`","beneficiary":{"name":"Grace Hopper","iban":"DE89370400440532013000"}}`); r.Status != 200 {
		t.Fatalf("execution after validation: %d %s", r.Status, r.Body)
	}
	r = validate(acme, q, `{"name":"Ada","iban":"DE89370400440532013000"}`)
	if want := errorBody("quote_already_executed", "This quote was already executed; there is nothing left to validate. Request a new quote for a new payout."); r.Status != 409 || r.Body != want {
		t.Errorf("an executed quote: %d %s", r.Status, r.Body)
	}
}
