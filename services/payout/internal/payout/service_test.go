package payout

import (
	"context"
	"errors"
	"regexp"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/partnerpay/api/pkg/database"
	"github.com/partnerpay/api/pkg/envelope"
	"github.com/partnerpay/api/pkg/environment"
	"github.com/partnerpay/api/pkg/partner"
	"github.com/partnerpay/api/services/payout/internal/quote"
	"github.com/partnerpay/api/services/payout/internal/store"
	"github.com/partnerpay/api/testkit/pgtest"
	"github.com/partnerpay/api/testkit/redistest"
)

var acme = partner.Caller{KeyID: "acme", Grants: partner.Grants{Products: []string{"bank"}, Chains: partner.Chains{Source: []int64{84532}}, MaxExecutionUSD: "25000"}}

func strp(s string) *string { return &s }

// clock is the service's time; the book's quotes expire in Redis's.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) now() time.Time      { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *clock) add(d time.Duration) { c.mu.Lock(); defer c.mu.Unlock(); c.t = c.t.Add(d) }

func TestMain(m *testing.M) { pgtest.Main(m) }

// newTestService is the service on a real quote book over a test Redis,
// and its payouts in PostgreSQL.
func newTestService(t testing.TB, ttl time.Duration) (Service, *clock) {
	t.Helper()
	return newTestServiceOn(t, pgtest.Open(t, migrationSets...), ttl)
}

func newTestServiceOn(t testing.TB, db *database.DB, ttl time.Duration) (Service, *clock) {
	t.Helper()
	rs := redistest.Start(t)
	rdb := redis.NewClient(&redis.Options{Addr: rs.Addr})
	t.Cleanup(func() { rdb.Close() })
	c := &clock{t: time.Now()}
	return NewService(keyed(Config{Env: environment.Sandbox, TTL: ttl, Book: quote.NewBook(rdb, []byte("test-secret-0123456789"), c.now),
		Payouts: store.NewStore(db, environment.Sandbox), Payee: newFakeProvider(), Now: c.now, Secret: []byte("test-secret-0123456789")})), c
}

func code(err error) string {
	if err == nil {
		return ""
	}
	e, _ := envelope.From(err)
	return string(e.Code)
}

var quoteID = regexp.MustCompile(`^bpq_84532_[0-9a-f]{32}$`)

func TestQuoteAnswer(t *testing.T) {
	t.Parallel()
	svc, c := newTestService(t, time.Minute)
	q, err := svc.Quote(context.Background(), acme, QuoteRequest{
		CryptoCurrency: "usdc", Chain: 84532, FiatCurrency: "eur", Country: "de", CryptoAmount: strp("0100.50"),
	})
	if err != nil {
		t.Fatal(err)
	}
	want := Quote{Mock: true, QuoteID: q.QuoteID, CryptoAmount: MockMoney, FiatAmount: MockMoney, Rate: MockMoney,
		Rail: "sepa_instant", EstimatedSettlement: "PT10S", ProviderFee: MockMoney, OurFee: MockMoney,
		ExpiresAt: c.now().UTC().Add(time.Minute).Truncate(time.Second).Format(time.RFC3339)}
	if q != want || !quoteID.MatchString(q.QuoteID) {
		t.Fatalf("quote\n got %+v\nwant %+v", q, want)
	}
}

// Every quote request opens a new quote (DESIGN §3), whatever form the
// same request takes: no id is answered twice, each priced once, each
// executable once; a retry that must not open a second one carries an
// Idempotency-Key (the route's middleware).
func TestEveryQuoteRequestOpensANewQuote(t *testing.T) {
	t.Parallel()
	svc, c := newTestService(t, time.Minute)
	ctx := context.Background()
	req := QuoteRequest{CryptoCurrency: "USDC", Chain: 84532, FiatCurrency: "EUR", Country: "DE", CryptoAmount: strp("100")}
	first, _ := svc.Quote(ctx, acme, req)
	c.add(20 * time.Second)
	seen := map[string]bool{first.QuoteID: true}
	for _, same := range []QuoteRequest{req,
		{CryptoCurrency: "usdc", Chain: 84532, FiatCurrency: "eur", Country: "de", CryptoAmount: strp("100.00")},
		{CryptoCurrency: "USDC", Chain: 84532, FiatCurrency: "EUR", Country: "DE", CryptoAmount: strp("100"), Rail: strp("sepa_instant")},
	} {
		again, err := svc.Quote(ctx, acme, same)
		if err != nil || seen[again.QuoteID] || again.Rail != first.Rail || again.ExpiresAt == first.ExpiresAt {
			t.Fatalf("the same request 20 s later: %+v %v; want a new quote of its own (after %+v)", again, err, first)
		}
		seen[again.QuoteID] = true
	}
	// Two quotes of one request are two payouts.
	var ids []string
	for range 2 {
		ids = append(ids, quoteFor(t, svc, acme, req))
	}
	for _, id := range ids {
		if _, err := svc.Execute(ctx, acme, pay(id, "Ada Lovelace", goodIBAN)); err != nil {
			t.Errorf("executing %s: %v", id, err)
		}
	}
}

func TestQuoteRefusals(t *testing.T) {
	t.Parallel()
	svc, _ := newTestService(t, time.Minute)
	for _, tt := range []struct {
		req  QuoteRequest
		code string
	}{
		{QuoteRequest{CryptoCurrency: "USDC", Chain: 84532, FiatCurrency: "EUR", Country: "DE"}, "invalid_request"},
		{QuoteRequest{CryptoCurrency: "USDC", Chain: 84532, FiatCurrency: "JPY", Country: "JP", CryptoAmount: strp("1")}, "no_route"},
		{QuoteRequest{CryptoCurrency: "USDC", Chain: 84532, FiatCurrency: "XYZ", Country: "DE", CryptoAmount: strp("1")}, "no_route"},
		{QuoteRequest{CryptoCurrency: "USDC", Chain: 84532, FiatCurrency: "EURO", Country: "DE", CryptoAmount: strp("1")}, "invalid_request"},
		{QuoteRequest{CryptoCurrency: "USDC", Chain: 84532, FiatCurrency: "EUR", Country: "DE", CryptoAmount: strp("0")}, "invalid_request"},
		{QuoteRequest{CryptoCurrency: "USDC", Chain: 84532, FiatCurrency: "EUR", Country: "DE", CryptoAmount: strp("1"), Rail: strp("")}, "invalid_request"},
		{QuoteRequest{CryptoCurrency: "USDC", Chain: 11155111, FiatCurrency: "EUR", Country: "DE", CryptoAmount: strp("1")}, "chain_not_allowed"},
		{QuoteRequest{CryptoCurrency: "USDC", Chain: 84532, FiatCurrency: "EUR", Country: "DE", FiatAmount: strp("0.5")}, "no_route"},
	} {
		if _, err := svc.Quote(context.Background(), acme, tt.req); code(err) != tt.code {
			t.Errorf("%+v: %v, want %s", tt.req, err, tt.code)
		}
	}
}

func TestRailsHonourTheirLimits(t *testing.T) {
	t.Parallel()
	svc, _ := newTestService(t, time.Minute)
	for _, tt := range []struct {
		req  QuoteRequest
		rail string
	}{
		{QuoteRequest{CryptoCurrency: "USDC", Chain: 84532, FiatCurrency: "EUR", Country: "DE", FiatAmount: strp("500000")}, "sepa"},
		{QuoteRequest{CryptoCurrency: "USDC", Chain: 84532, FiatCurrency: "EUR", Country: "DE", FiatAmount: strp("100000")}, "sepa_instant"},
		// 108,001 USDC is 100,000.93 EUR at the reference rates: over SEPA Instant's limit.
		{QuoteRequest{CryptoCurrency: "USDC", Chain: 84532, FiatCurrency: "EUR", Country: "DE", CryptoAmount: strp("108001")}, "sepa"},
		{QuoteRequest{CryptoCurrency: "EURC", Chain: 84532, FiatCurrency: "EUR", Country: "DE", CryptoAmount: strp("100000")}, "sepa_instant"},
		{QuoteRequest{CryptoCurrency: "USDC", Chain: 84532, FiatCurrency: "USD", Country: "US", FiatAmount: strp("50")}, "ach"},
	} {
		q, err := svc.Quote(context.Background(), acme, tt.req)
		if err != nil || q.Rail != tt.rail {
			t.Errorf("%+v: rail %s (%v), want %s", tt.req, q.Rail, err, tt.rail)
		}
	}
}

type brokenBook struct{ Book }

func (brokenBook) Open(context.Context, quote.Kind, string, int64, string, time.Duration, func(string, time.Time) ([]byte, error)) (quote.Offer, error) {
	return quote.Offer{}, errors.New("redis: connection refused")
}

func TestStoreFailureIsInternal(t *testing.T) {
	t.Parallel()
	svc := NewService(Config{Env: environment.Sandbox, TTL: time.Minute, Book: brokenBook{}, Now: time.Now})
	_, err := svc.Quote(context.Background(), acme, QuoteRequest{
		CryptoCurrency: "USDC", Chain: 84532, FiatCurrency: "EUR", Country: "DE", CryptoAmount: strp("100"),
	})
	if e, known := envelope.From(err); known || e.Code != envelope.CodeInternal {
		t.Fatalf("store failure maps to %+v (known %v), want internal", e, known)
	}
}

// BenchmarkQuote prices the same request over and over against a real
// Redis: the quote answered again while open, the common case.
func BenchmarkQuote(b *testing.B) {
	svc, _ := newTestService(b, time.Hour)
	req := QuoteRequest{CryptoCurrency: "USDC", Chain: 84532, FiatCurrency: "EUR", Country: "DE", CryptoAmount: strp("100")}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := svc.Quote(context.Background(), acme, req); err != nil {
			b.Fatal(err)
		}
	}
}
