package payout

import (
	"context"
	"encoding/json"
	"reflect"
	"testing"
	"time"

	"github.com/partnerpay/api/pkg/bankprovider"
	"github.com/partnerpay/api/testkit/pgtest"
)

// Validation runs execution's checks on a beneficiary and names every
// problem; on a rail with a payee check it asks the payee's bank about the
// name (and answers not_possible when the bank cannot say). It records
// nothing: the quote executes afterwards, to any valid beneficiary.
func TestValidationNamesEveryProblemAndConsumesNothing(t *testing.T) {
	t.Parallel()
	f := newStatusFixture(t, pgtest.Open(t, migrationSets...))
	ctx := context.Background()
	id := quoteFor(t, f.svc, acme, QuoteRequest{CryptoCurrency: "USDC", Chain: 84532, FiatCurrency: "EUR", Country: "DE", CryptoAmount: strp("50")})
	validate := func(body string) Validation {
		t.Helper()
		v, err := f.svc.Validate(ctx, acme, ValidateRequest{QuoteID: id, Beneficiary: json.RawMessage(body)})
		if err != nil {
			t.Fatal(err)
		}
		return v
	}

	v := validate(`{"name":"Ada Lovelace","iban":"DE89 3704 0044 0532 0130 00"}`)
	if !v.Valid || v.Errors == nil || len(v.Errors) != 0 || v.NameCheck == nil || *v.NameCheck != (NameCheck{Result: "match"}) {
		t.Errorf("a valid beneficiary: %+v", v)
	}
	v = validate(`{"iban":"DE89370400440532013001","bic":"NWBKGB2L","colour":"red"}`)
	var fields []string
	for _, p := range v.Errors {
		fields = append(fields, p.Field+"/"+p.Code)
	}
	if v.Valid || v.NameCheck != nil || !reflect.DeepEqual(fields, []string{"beneficiary.colour/unknown_field", "beneficiary.name/required", "beneficiary.iban/invalid_checksum"}) {
		t.Errorf("three problems: %+v", v)
	}
	if v := validate(`null`); v.Valid || len(v.Errors) != 1 || v.Errors[0].Field != "beneficiary" || v.Errors[0].Code != "required" {
		t.Errorf("no beneficiary: %+v", v)
	}
	f.provider.set(func(p *fakeProvider) {
		p.payee = bankprovider.PayeeResult{Result: "close_match", RegisteredName: "Ada King"}
	})
	if v := validate(`{"name":"Ada Lovelace","iban":"DE89370400440532013000"}`); *v.NameCheck != (NameCheck{Result: "close_match", RegisteredName: "Ada King"}) {
		t.Errorf("a close match: %+v", v.NameCheck)
	}
	f.provider.set(func(p *fakeProvider) { p.payee = bankprovider.PayeeResult{Result: "maybe"} })
	if v := validate(`{"name":"Ada Lovelace","iban":"DE89370400440532013000"}`); *v.NameCheck != (NameCheck{Result: "not_possible"}) {
		t.Errorf("an answer out of shape: %+v", v.NameCheck)
	}
	f.provider.set(func(p *fakeProvider) { p.down = true })
	if v := validate(`{"name":"Ada Lovelace","iban":"DE89370400440532013000"}`); !v.Valid || *v.NameCheck != (NameCheck{Result: "not_possible"}) {
		t.Errorf("the payee's bank unreachable: %+v", v)
	}
	f.provider.set(func(p *fakeProvider) { p.down = false })
	if f.provider.checked != 4 {
		t.Errorf("%d payee checks, want 4 (none for a beneficiary with problems)", f.provider.checked)
	}

	// Nothing was consumed: the quote executes, to another beneficiary than
	// any validated; then validation says it was executed.
	if _, err := f.svc.Execute(ctx, acme, pay(id, "Grace Hopper", "DE89370400440532013000")); err != nil {
		t.Fatalf("execution after validation: %v", err)
	}
	if _, err := f.svc.Validate(ctx, acme, ValidateRequest{QuoteID: id, Beneficiary: json.RawMessage(`{}`)}); code(err) != "quote_already_executed" {
		t.Errorf("an executed quote: %v", err)
	}

	// A rail without a payee check has no nameCheck.
	us := quoteFor(t, f.svc, acme, QuoteRequest{CryptoCurrency: "USDC", Chain: 84532, FiatCurrency: "USD", Country: "US", CryptoAmount: strp("500"), Rail: strp("wire")})
	if v, err := f.svc.Validate(ctx, acme, ValidateRequest{QuoteID: us, Beneficiary: payTo("US", us).Beneficiary}); err != nil || !v.Valid || v.NameCheck != nil {
		t.Errorf("a wire: %+v %v", v, err)
	}

	// The quote's own refusals are execution's.
	for name, tt := range map[string]struct {
		key, quote, code string
	}{
		"malformed":   {"acme", "bpq_nope", "quote_not_found"},
		"unknown":     {"acme", "bpq_84532_00000000000000000000000000000000", "quote_not_found"},
		"another key": {"globex", us, "quote_not_found"},
		"no quoteId":  {"acme", "", "invalid_request"},
	} {
		c := acme
		c.KeyID = tt.key
		if _, err := f.svc.Validate(ctx, c, ValidateRequest{QuoteID: tt.quote, Beneficiary: json.RawMessage(`{}`)}); code(err) != tt.code {
			t.Errorf("%s: %v, want %s", name, err, tt.code)
		}
	}
	f.clock.add(time.Hour)
	if _, err := f.svc.Validate(ctx, acme, ValidateRequest{QuoteID: us, Beneficiary: json.RawMessage(`{}`)}); code(err) != "quote_expired" {
		t.Errorf("an expired quote: %v", err)
	}
}
