package payout

import (
	"context"
	"testing"
	"time"

	"github.com/partnerpay/api/pkg/envelope"
	"github.com/partnerpay/api/pkg/environment"
	"github.com/partnerpay/api/pkg/partner"
)

const goodIBAN = "DE89370400440532013000"

func capped(limit string) partner.Caller {
	c := acme
	c.Grants.MaxExecutionUSD = limit
	return c
}

func quoteFor(t *testing.T, svc Service, caller partner.Caller, req QuoteRequest) string {
	t.Helper()
	q, err := svc.Quote(context.Background(), caller, req)
	if err != nil {
		t.Fatal(err)
	}
	return q.QuoteID
}

func codeOfErr(err error) string {
	if err == nil {
		return ""
	}
	e, _ := envelope.From(err)
	return string(e.Code)
}

func TestExecutionCeiling(t *testing.T) {
	svc := newTestService(&memStore{})
	tests := []struct {
		name  string
		req   QuoteRequest
		limit string
		want  string
	}{
		{"USDC at par, at the ceiling", QuoteRequest{CryptoCurrency: "USDC", Chain: 84532, FiatCurrency: "EUR", Country: "DE", CryptoAmount: strp("1000")}, "1000", ""},
		{"USDC at par, a cent over", QuoteRequest{CryptoCurrency: "USDC", Chain: 84532, FiatCurrency: "EUR", Country: "DE", CryptoAmount: strp("1000.01")}, "1000", "execution_capped"},
		{"EURC counts at the EUR reference rate", QuoteRequest{CryptoCurrency: "EURC", Chain: 84532, FiatCurrency: "EUR", Country: "DE", CryptoAmount: strp("1000")}, "1000", "execution_capped"},
		{"EURC under the ceiling once converted", QuoteRequest{CryptoCurrency: "EURC", Chain: 84532, FiatCurrency: "EUR", Country: "DE", CryptoAmount: strp("925")}, "1000", ""},
		{"a fiat amount counts in its currency", QuoteRequest{CryptoCurrency: "USDC", Chain: 84532, FiatCurrency: "GBP", Country: "GB", FiatAmount: strp("800")}, "1000", "execution_capped"},
		{"a fiat amount in USD at par", QuoteRequest{CryptoCurrency: "USDC", Chain: 84532, FiatCurrency: "USD", Country: "US", FiatAmount: strp("999")}, "1000", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			caller := capped(tt.limit)
			id := quoteFor(t, svc, caller, tt.req)
			_, err := svc.Execute(context.Background(), caller, ExecuteRequest{QuoteID: id, Beneficiary: Beneficiary{Name: "Ada", IBAN: goodIBAN}})
			if got := codeOfErr(err); got != tt.want {
				t.Fatalf("code %q, want %q (%v)", got, tt.want, err)
			}
		})
	}
}

func TestExecuteOnceExpiryAndOwnership(t *testing.T) {
	now := fixedNow
	store := &memStore{}
	svc := NewService(environment.Sandbox, []byte("test-secret-0123456789"), time.Minute, store, func() time.Time { return now })
	req := QuoteRequest{CryptoCurrency: "USDC", Chain: 84532, FiatCurrency: "EUR", Country: "DE", CryptoAmount: strp("10")}
	caller := capped("25000")
	id := quoteFor(t, svc, caller, req)
	body := ExecuteRequest{QuoteID: id, Beneficiary: Beneficiary{Name: "Ada Lovelace", IBAN: "de89 3704 0044 0532 0130 00"}}

	other := caller
	other.KeyID = "globex"
	if _, err := svc.Execute(context.Background(), other, body); codeOfErr(err) != "quote_not_found" {
		t.Fatalf("another key's quote: %v", err)
	}
	p1, err := svc.Execute(context.Background(), caller, body)
	if err != nil {
		t.Fatal(err)
	}
	if !p1.Mock || p1.Status != "pending" || p1.Rail != "sepa_instant" || p1.EstimatedSettlement != "PT10S" || p1.QuoteID != id || len(p1.PayoutID) != 36 {
		t.Fatalf("payout %+v", p1)
	}
	if store.payouts[id].Beneficiary.IBAN != goodIBAN {
		t.Errorf("the IBAN is stored in electronic form: %q", store.payouts[id].Beneficiary.IBAN)
	}
	now = now.Add(2 * time.Minute) // past expiresAt
	p2, err := svc.Execute(context.Background(), caller, body)
	if err != nil || p2 != p1 {
		t.Fatalf("a repeat after execution answers the same payout, even once expired: %+v, %v", p2, err)
	}
	fresh := quoteFor(t, svc, caller, QuoteRequest{CryptoCurrency: "USDC", Chain: 84532, FiatCurrency: "EUR", Country: "DE", CryptoAmount: strp("11")})
	now = now.Add(61 * time.Second)
	if _, err := svc.Execute(context.Background(), caller, ExecuteRequest{QuoteID: fresh, Beneficiary: body.Beneficiary}); codeOfErr(err) != "quote_expired" {
		t.Fatalf("expired quote: %v", err)
	}
	if _, ok := store.payouts[fresh]; ok {
		t.Error("an expired quote was executed")
	}
}

func TestExecuteValidation(t *testing.T) {
	svc := newTestService(&memStore{})
	tests := []struct {
		name   string
		req    ExecuteRequest
		fields map[string]string
		msg    string
	}{
		{"no quote id", ExecuteRequest{Beneficiary: Beneficiary{Name: "A", IBAN: goodIBAN}}, nil, "quoteId is required: the id of a quote from POST /v1/bank/payout/quote."},
		{"bad checksum", ExecuteRequest{QuoteID: "q", Beneficiary: Beneficiary{Name: "A", IBAN: "DE88370400440532013000"}}, map[string]string{"beneficiary.iban": "invalid_checksum"}, ""},
		{"nothing about the beneficiary", ExecuteRequest{QuoteID: "q"}, map[string]string{"beneficiary.name": "required", "beneficiary.iban": "required"}, ""},
		{"unsupported country", ExecuteRequest{QuoteID: "q", Beneficiary: Beneficiary{Name: "A", IBAN: "US12345678901234567890"}}, map[string]string{"beneficiary.iban": "unsupported_country"}, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := svc.Execute(context.Background(), acme, tt.req)
			e, known := envelope.From(err)
			if !known || e.Code != "invalid_request" || e.Status != 400 {
				t.Fatalf("%+v", e)
			}
			if tt.msg != "" && e.Message != tt.msg {
				t.Errorf("message %q", e.Message)
			}
			if len(e.Fields) != len(tt.fields) {
				t.Fatalf("fields %v, want %v", e.Fields, tt.fields)
			}
			for k, v := range tt.fields {
				if e.Fields[k] != v {
					t.Errorf("fields %v, want %v", e.Fields, tt.fields)
				}
			}
		})
	}
}
