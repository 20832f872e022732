package payout

import (
	"context"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/partnerpay/api/pkg/database/databasetest"
	"github.com/partnerpay/api/pkg/envelope"
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

func pay(id, name, account string) ExecuteRequest {
	return ExecuteRequest{QuoteID: id, Beneficiary: Beneficiary{Name: name, IBAN: account}}
}

func TestExecutionCeiling(t *testing.T) {
	svc, _ := newTestService(t, time.Minute)
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
			_, err := svc.Execute(context.Background(), caller, pay(id, "Ada", goodIBAN))
			if got := code(err); got != tt.want {
				t.Fatalf("code %q, want %q (%v)", got, tt.want, err)
			}
		})
	}
}

func TestExecutionIsBoundToItsBeneficiary(t *testing.T) {
	svc, c := newTestService(t, time.Minute)
	ctx := context.Background()
	req := QuoteRequest{CryptoCurrency: "USDC", Chain: 84532, FiatCurrency: "GBP", Country: "GB", CryptoAmount: strp("42")}
	id := quoteFor(t, svc, acme, req)
	alice := pay(id, "Alice Liddell", "GB29 NWBK 6016 1331 9268 19")

	other := acme
	other.KeyID = "globex"
	if _, err := svc.Execute(ctx, other, alice); code(err) != "quote_not_found" {
		t.Fatalf("another key's quote: %v", err)
	}
	p1, err := svc.Execute(ctx, acme, alice)
	if err != nil {
		t.Fatal(err)
	}
	if !p1.Mock || p1.Status != "pending" || p1.Rail != "faster_payments" || p1.EstimatedSettlement != "PT2H" || p1.QuoteID != id || len(p1.PayoutID) != 36 {
		t.Fatalf("payout %+v", p1)
	}
	if p, err := svc.Execute(ctx, acme, pay(id, "Alice Liddell", "GB29NWBK60161331926819")); err != nil || p != p1 {
		t.Fatalf("the same beneficiary again (IBAN without spaces): %+v %v; want the same payout", p, err)
	}
	bob := pay(id, "Bob", "GB94BARC10201530093459")
	_, err = svc.Execute(ctx, acme, bob)
	if e, _ := envelope.From(err); e.Code != envelope.CodeQuoteAlreadyExecuted || e.Status != 409 {
		t.Fatalf("another beneficiary on an executed quote: %v, want 409 quote_already_executed", err)
	}
	if _, err := svc.Execute(ctx, acme, pay(id, "Alice L.", "GB29NWBK60161331926819")); code(err) != "quote_already_executed" {
		t.Fatalf("another name on the same account: %v", err)
	}
	c.add(2 * time.Minute) // past expiresAt: the executed quote still answers its payout
	if p, err := svc.Execute(ctx, acme, alice); err != nil || p != p1 {
		t.Fatalf("a repeat after expiry: %+v %v", p, err)
	}

	// The same request again is a new quote, so Bob can be paid the same
	// amount: a second identical payout is not merged into the first.
	next := quoteFor(t, svc, acme, req)
	if next == id {
		t.Fatal("re-quoting an executed quote answered the executed quote")
	}
	p2, err := svc.Execute(ctx, acme, pay(next, "Bob", "GB94BARC10201530093459"))
	if err != nil || p2.PayoutID == p1.PayoutID || p2.QuoteID != next {
		t.Fatalf("Bob's payout: %+v %v", p2, err)
	}
}

func TestAnExpiredQuoteIsRefusedAndNeverRepriced(t *testing.T) {
	svc, c := newTestService(t, time.Second)
	req := QuoteRequest{CryptoCurrency: "USDC", Chain: 84532, FiatCurrency: "EUR", Country: "DE", CryptoAmount: strp("11")}
	id := quoteFor(t, svc, acme, req)
	time.Sleep(1100 * time.Millisecond)
	c.add(1100 * time.Millisecond)
	if _, err := svc.Execute(context.Background(), acme, pay(id, "Ada", goodIBAN)); code(err) != "quote_expired" {
		t.Fatalf("expired quote: %v", err)
	}
	if again := quoteFor(t, svc, acme, req); again == id {
		t.Fatal("re-quoting after expiry brought the old id back: whoever holds it would execute at the new price")
	}
	if _, err := svc.Execute(context.Background(), acme, pay(id, "Ada", goodIBAN)); code(err) != "quote_expired" {
		t.Fatalf("the old id after a re-quote: %v", err)
	}
}

func TestExecuteValidation(t *testing.T) {
	svc, _ := newTestService(t, time.Minute)
	tests := []struct {
		name string
		req  ExecuteRequest
		code string
		msg  string
	}{
		{"no quote id", pay("", "A", goodIBAN), "invalid_request", "quoteId is required: the id of a quote from POST /v1/bank/payout/quote."},
		{"bad checksum", pay("q", "A", "DE88370400440532013000"), "invalid_request", "beneficiary.iban has an invalid checksum; check it for a mistyped character."},
		{"no name", pay("q", "", goodIBAN), "invalid_request", "beneficiary.name is required: the account holder's name."},
		{"no IBAN", pay("q", "A", ""), "invalid_request", "beneficiary.iban is required: the account's IBAN."},
		{"a country without IBANs", pay("q", "A", "US12345678901234567890"), "invalid_request", "beneficiary.iban is from a country that does not issue IBANs."},
		{"a malformed quote id is unknown, without a lookup", pay("q", "A", goodIBAN), "quote_not_found", "No quote with this quoteId exists for this key."},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := svc.Execute(context.Background(), acme, tt.req)
			e, known := envelope.From(err)
			if !known || string(e.Code) != tt.code || e.Message != tt.msg || e.Fields != nil {
				t.Fatalf("%+v, want %s %q and no error.fields (only bank refusals carry them)", e, tt.code, tt.msg)
			}
		})
	}
}

// BenchmarkExecute executes distinct quotes from 16 goroutines at once,
// against a real Redis (the offers) and a real PostgreSQL (the payouts,
// committed one by one), and reports the latency percentiles, the
// throughput, and the bytes each payout costs in PostgreSQL (its row and
// its share of the table's indexes):
//
//	go test -run '^$' -bench Execute -benchtime 4000x ./internal/payout/
func BenchmarkExecute(b *testing.B) {
	db := databasetest.Open(b, databasetest.PostgresURL(b), Migrations)
	svc, _ := newTestServiceOn(b, db, time.Hour)
	ctx := context.Background()
	ids := make([]string, b.N)
	for i := range ids {
		q, err := svc.Quote(ctx, acme, QuoteRequest{CryptoCurrency: "USDC", Chain: 84532, FiatCurrency: "EUR", Country: "DE",
			CryptoAmount: strp(strconv.Itoa(10+i/100) + "." + strconv.Itoa(10+i%90))})
		if err != nil {
			b.Fatal(err)
		}
		ids[i] = q.QuoteID
	}
	const workers = 16
	took := make([]time.Duration, b.N)
	var next atomic.Int64
	var wg sync.WaitGroup
	b.ReportAllocs()
	b.ResetTimer()
	start := time.Now()
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := int(next.Add(1)) - 1
				if i >= b.N {
					return
				}
				t0 := time.Now()
				if _, err := svc.Execute(ctx, acme, pay(ids[i], "Ada Lovelace", goodIBAN)); err != nil {
					b.Error(err)
					return
				}
				took[i] = time.Since(t0)
			}
		}()
	}
	wg.Wait()
	elapsed := time.Since(start)
	b.StopTimer()
	slices.Sort(took)
	b.ReportMetric(float64(took[b.N/2].Microseconds())/1000, "p50-ms")
	b.ReportMetric(float64(took[b.N*99/100].Microseconds())/1000, "p99-ms")
	b.ReportMetric(float64(b.N)/elapsed.Seconds(), "payouts/s")
	var bytes, rows int64
	if err := db.QueryRow(ctx, `SELECT pg_total_relation_size('payouts'), (SELECT count(*) FROM payouts)`).Scan(&bytes, &rows); err != nil {
		b.Fatal(err)
	}
	b.ReportMetric(float64(bytes)/float64(rows), "B/payout")
}
