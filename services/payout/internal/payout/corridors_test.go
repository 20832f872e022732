package payout

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/partnerpay/api/pkg/database"
	"github.com/partnerpay/api/pkg/environment"
	"github.com/partnerpay/api/pkg/idempotency"
	"github.com/partnerpay/api/services/payout/internal/quote"
	"github.com/partnerpay/api/services/payout/internal/store"
	"github.com/partnerpay/api/testkit/pgtest"
	"github.com/partnerpay/api/testkit/redistest"
)

// calls counts the commands a Redis client sends.
type calls struct {
	mu   sync.Mutex
	n    int
	seen []string
}

func (c *calls) DialHook(next redis.DialHook) redis.DialHook { return next }
func (c *calls) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		c.mu.Lock()
		c.n++
		c.seen = append(c.seen, "pipeline")
		c.mu.Unlock()
		return next(ctx, cmds)
	}
}
func (c *calls) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		if cmd.Name() == "eval" { // go-redis's Script.Run tries EVALSHA first, then EVAL once per script: not ours to count
			return next(ctx, cmd)
		}
		c.mu.Lock()
		c.n++
		c.seen = append(c.seen, cmd.Name())
		c.mu.Unlock()
		return next(ctx, cmd)
	}
}

// during is the commands f sent.
func (c *calls) during(f func()) (int, []string) {
	c.mu.Lock()
	n0, s0 := c.n, len(c.seen)
	c.mu.Unlock()
	f()
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.n - n0, append([]string(nil), c.seen[s0:]...)
}

// An execution of a quote in the corridor its key last quoted or executed
// in reads and closes the quote's offer in one Redis round trip; a quote in
// another corridor is executed all the same, in two, and teaches the key's
// next execution its corridor. Each payout goes to its beneficiary.
func TestAnExecutionInItsKeysCorridorTakesOneRedisRoundTrip(t *testing.T) {
	t.Parallel()
	svc, book, hook, _ := newCountedService(t)
	ctx := context.Background()
	de := func() string {
		return quoteFor(t, svc, acme, QuoteRequest{CryptoCurrency: "USDC", Chain: 84532, FiatCurrency: "EUR", Country: "DE", CryptoAmount: strp("42")})
	}
	gb := func() string {
		return quoteFor(t, svc, acme, QuoteRequest{CryptoCurrency: "USDC", Chain: 84532, FiatCurrency: "GBP", Country: "GB", CryptoAmount: strp("42")})
	}
	deID, gbID := de(), gb() // the key's last corridor: GB
	for _, step := range []struct {
		name    string
		country string
		quote   func() string // called just before the execution
		calls   int
		rail    string
	}{
		{"the corridor last quoted", "GB", func() string { return gbID }, 1, "faster_payments"},
		{"another corridor", "DE", func() string { return deID }, 2, "sepa_instant"},
		{"the corridor just executed", "DE", de, 1, "sepa_instant"},
		{"a quote of another corridor, the key's last", "GB", gb, 1, "faster_payments"},
	} {
		req := payTo(step.country, step.quote())
		var p Payout
		var err error
		n, seen := hook.during(func() { p, err = svc.Execute(ctx, acme, req) })
		if err != nil {
			t.Fatalf("%s: %v", step.name, err)
		}
		if n != step.calls {
			t.Errorf("%s: %d Redis round trips (%v), want %d", step.name, n, seen, step.calls)
		}
		if p.Rail != step.rail || p.Beneficiary.Name != "Ada" {
			t.Errorf("%s: paid %+v on %s, want Ada on %s", step.name, p.Beneficiary, p.Rail, step.rail)
		}
		id, _ := BankPayout.Parse(req.QuoteID)
		if closed, err := book.Closed(ctx, id); err != nil || !closed {
			t.Errorf("%s: the executed quote's offer is not closed (%v)", step.name, err)
		}
	}
}

// A request refused once its quote is read (here the key's ceiling) leaves
// the offer as it found it, even when reading it closed it for the
// beneficiary: another beneficiary's execution is refused for what it is,
// not as a quote already executed, and once the ceiling allows it, is paid.
func TestARefusedExecutionLeavesItsQuoteOpen(t *testing.T) {
	t.Parallel()
	svc, book, _, _ := newCountedService(t)
	ctx := context.Background()
	low := capped("10")
	id := quoteFor(t, svc, low, QuoteRequest{CryptoCurrency: "USDC", Chain: 84532, FiatCurrency: "EUR", Country: "DE", CryptoAmount: strp("42")})
	if _, err := svc.Execute(ctx, low, pay(id, "Ada", goodIBAN)); code(err) != "execution_capped" {
		t.Fatalf("over the ceiling: %v, want execution_capped", err)
	}
	qid, _ := BankPayout.Parse(id)
	if closed, err := book.Closed(ctx, qid); err != nil || closed {
		t.Fatalf("a refused execution left the quote closed (%v)", err)
	}
	if _, err := svc.Execute(ctx, low, pay(id, "Grace Hopper", goodIBAN)); code(err) != "execution_capped" {
		t.Fatalf("another beneficiary over the ceiling: %v, want execution_capped", err)
	}
	p, err := svc.Execute(ctx, acme, pay(id, "Grace Hopper", goodIBAN))
	if err != nil || p.Beneficiary.Name != "Grace Hopper" {
		t.Fatalf("under a ceiling that allows it: %+v %v", p.Beneficiary, err)
	}
	if _, err := svc.Execute(ctx, acme, pay(id, "Ada", goodIBAN)); code(err) != "quote_already_executed" {
		t.Fatalf("Ada after Grace's payout: %v, want quote_already_executed", err)
	}
}

// The same execution sent again once its key's ceiling no longer allows
// it is answered its payout, and leaves the quote closed for its
// beneficiary: the mark was not the retry's to take back.
func TestARetryOverANewCeilingKeepsItsPayoutsMark(t *testing.T) {
	t.Parallel()
	svc, book, _, _ := newCountedService(t)
	ctx := context.Background()
	id := quoteFor(t, svc, acme, QuoteRequest{CryptoCurrency: "USDC", Chain: 84532, FiatCurrency: "EUR", Country: "DE", CryptoAmount: strp("42")})
	first, err := svc.Execute(ctx, acme, pay(id, "Ada", goodIBAN))
	if err != nil {
		t.Fatal(err)
	}
	again, err := svc.Execute(ctx, capped("10"), pay(id, "Ada", goodIBAN))
	if err != nil || again.PayoutID != first.PayoutID {
		t.Fatalf("the same execution under a lower ceiling: %+v %v, want payout %s", again, err, first.PayoutID)
	}
	qid, _ := BankPayout.Parse(id)
	if closed, err := book.Closed(ctx, qid); err != nil || !closed {
		t.Fatalf("the retry took the executed quote's mark back (%v)", err)
	}
}

// A keyed execution (through the route and its idempotency middleware, as
// the gateway forwards it) of a quote in its key's corridor reads and
// closes the offer as it holds the quote, before its claim, and executes
// on what it read: one round trip to Redis. The same request again is its
// answer, replayed.
func TestAKeyedExecutionInItsKeysCorridorTakesOneRedisRoundTrip(t *testing.T) {
	t.Parallel()
	svc, book, hook, db := newCountedService(t, idempotency.Migrations)
	mux, grants := keyedMux(t, svc, db)
	id := quoteFor(t, svc, acme, QuoteRequest{CryptoCurrency: "USDC", Chain: 84532, FiatCurrency: "EUR", Country: "DE", CryptoAmount: strp("42")})
	body := fmt.Sprintf(`{"quoteId":%q,"beneficiary":%s}`, id, pay(id, "Ada Lovelace", goodIBAN).Beneficiary)
	send := func() *httptest.ResponseRecorder {
		w := httptest.NewRecorder()
		mux.ServeHTTP(w, keyedExecution(strings.NewReader(body), grants, "corridor-1"))
		return w
	}
	var w *httptest.ResponseRecorder
	n, seen := hook.during(func() { w = send() })
	if w.Code != http.StatusOK || !strings.Contains(w.Body.String(), `"name":"Ada Lovelace"`) {
		t.Fatalf("keyed execution: %d %s", w.Code, w.Body)
	}
	if n != 1 {
		t.Errorf("a keyed execution made %d Redis round trips (%v), want 1", n, seen)
	}
	qid, _ := BankPayout.Parse(id)
	if closed, err := book.Closed(context.Background(), qid); err != nil || !closed {
		t.Errorf("the keyed execution's quote is not closed (%v)", err)
	}
	again := send()
	if again.Code != http.StatusOK || again.Body.String() != w.Body.String() || again.Header().Get(idempotency.ReplayedHeader) != "true" {
		t.Errorf("the same request again: %d %q %s, want the first answer replayed", again.Code, again.Header().Get(idempotency.ReplayedHeader), again.Body)
	}
}

// A keyed execution checks the quote its Hold read again after its claim:
// one that expired meanwhile (a claim waits for the standby, and may wait
// long) is refused as expired, and nothing is paid, though the offer is
// not read again.
func TestAKeyedExecutionChecksItsHeldQuoteAgainAfterItsClaim(t *testing.T) {
	t.Parallel()
	db := pgtest.Open(t, append([]database.Migrations{idempotency.Migrations}, migrationSets...)...)
	rs := redistest.Start(t)
	rdb := redis.NewClient(&redis.Options{Addr: rs.Addr})
	t.Cleanup(func() { rdb.Close() })
	c := &clock{t: time.Now()}
	secret := []byte("test-secret-0123456789")
	payouts := store.NewStore(db, environment.Sandbox)
	cfg := keyed(Config{Env: environment.Sandbox, TTL: time.Minute, Book: quote.NewBook(rdb, secret, c.now),
		Payouts: payouts, Payee: newFakeProvider(), Now: c.now, Secret: secret})
	cfg.Payouts = slowClaim{Payouts: payouts, clock: c}
	svc := NewService(cfg)
	mux, grants := keyedMux(t, svc, db)
	id := quoteFor(t, svc, acme, QuoteRequest{CryptoCurrency: "USDC", Chain: 84532, FiatCurrency: "EUR", Country: "DE", CryptoAmount: strp("42")})
	body := fmt.Sprintf(`{"quoteId":%q,"beneficiary":%s}`, id, pay(id, "Ada Lovelace", goodIBAN).Beneficiary)
	w := httptest.NewRecorder()
	mux.ServeHTTP(w, keyedExecution(strings.NewReader(body), grants, "slow-claim"))
	if w.Code != http.StatusGone || !strings.Contains(w.Body.String(), `"code":"quote_expired"`) {
		t.Fatalf("a quote that expired between its hold and its execution: %d %s, want 410 quote_expired", w.Code, w.Body)
	}
	if _, err := payouts.ByQuote(context.Background(), id); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("the expired quote's payout: %v, want none", err)
	}
}

// slowClaim is the payouts store under a claim that takes longer than a
// quote's life: once a quote is held, the clock is past its expiry.
type slowClaim struct {
	Payouts
	clock *clock
}

func (s slowClaim) Hold(ctx context.Context, quoteID, beneficiaryDigest string) error {
	err := s.Payouts.Hold(ctx, quoteID, beneficiaryDigest)
	s.clock.add(2 * time.Minute)
	return err
}

// newCountedService is a payout service whose quote book counts the
// commands it sends to Redis.
func newCountedService(t *testing.T, more ...database.Migrations) (Service, *quote.Book, *calls, *database.DB) {
	t.Helper()
	db := pgtest.Open(t, append(more, migrationSets...)...)
	rs := redistest.Start(t)
	rdb := redis.NewClient(&redis.Options{Addr: rs.Addr})
	t.Cleanup(func() { rdb.Close() })
	hook := &calls{}
	rdb.AddHook(hook)
	c := &clock{t: time.Now()}
	book := quote.NewBook(rdb, []byte("test-secret-0123456789"), c.now)
	svc := NewService(keyed(Config{Env: environment.Sandbox, TTL: time.Minute, Book: book,
		Payouts: store.NewStore(db, environment.Sandbox), Payee: newFakeProvider(), Now: c.now, Secret: []byte("test-secret-0123456789")}))
	return svc, book, hook, db
}
