package payout

import (
	"context"
	"strconv"
	"sync/atomic"
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

// replica is one payout process: its own clock (skewed by the test), on a
// shared PostgreSQL and Redis, wired as main wires it (the database's
// clock for the quote book and the service).
func replica(t *testing.T, url string, rdb redis.UniversalClient, skew time.Duration, ttl time.Duration) (Service, *database.DB) {
	t.Helper()
	db, err := database.Open(context.Background(), url, database.Options{Wait: 10 * time.Second,
		Clock: func() time.Time { return time.Now().Add(skew) }}, idempotency.Migrations, store.Feed.Migrations(), store.Migrations)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(db.Close)
	book := quote.NewBook(rdb, []byte("test-secret-0123456789"), db.Now)
	return NewService(keyed(Config{Env: environment.Sandbox, TTL: ttl, Book: book, Payouts: store.NewStore(db, environment.Sandbox), Now: db.Now, Secret: []byte("s")})), db
}

// A payout replica whose clock runs two minutes ahead or behind neither
// executes an expired quote nor refuses a valid one, whichever replica
// quoted it: expiry is read on PostgreSQL's clock (DESIGN §3).
func TestAReplicaWithASkewedClockReadsExpiryOnTheDatabases(t *testing.T) {
	t.Parallel()
	url := pgtest.URL(t)
	rs := redistest.Start(t)
	rdb := redis.NewClient(&redis.Options{Addr: rs.Addr})
	t.Cleanup(func() { rdb.Close() })
	const ttl = 2 * time.Second
	right, db := replica(t, url, rdb, 0, ttl)
	var amount atomic.Int64
	amount.Store(100)
	// Each quote is for an amount of its own: a new offer, whatever the
	// cases running beside it quote.
	quoteOn := func(t *testing.T, svc Service) (string, time.Time) {
		q, err := svc.Quote(context.Background(), acme, QuoteRequest{CryptoCurrency: "USDC", Chain: 84532, FiatCurrency: "EUR",
			Country: "DE", CryptoAmount: strp(strconv.FormatInt(amount.Add(1), 10))})
		if err != nil {
			t.Fatal(err)
		}
		at, _ := time.Parse(time.RFC3339, q.ExpiresAt)
		return q.QuoteID, at
	}
	// dbClockPast waits, on PostgreSQL's clock, until at has passed.
	dbClockPast := func(t *testing.T, at time.Time) {
		for {
			var past bool
			if err := db.QueryRow(context.Background(), "SELECT now() >= $1", at).Scan(&past); err != nil {
				t.Fatal(err)
			}
			if past {
				return
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	for _, skew := range []time.Duration{2 * time.Minute, -2 * time.Minute} {
		skewed, _ := replica(t, url, rdb, skew, ttl)
		for _, c := range []struct {
			name          string
			quoter, payer Service
		}{
			{"quoted on a right clock, executed on one " + skew.String() + " off", right, skewed},
			{"quoted and executed on a clock " + skew.String() + " off", skewed, skewed},
			{"quoted on a clock " + skew.String() + " off, executed on a right one", skewed, right},
		} {
			t.Run(c.name, func(t *testing.T) {
				// The cases wait for quotes to expire: side by side.
				t.Parallel()
				id, expires := quoteOn(t, c.quoter)
				if d := time.Until(expires); d < -2*time.Second || d > ttl+2*time.Second {
					t.Fatalf("expiresAt %s is %s from now: not creation + QUOTE_TTL on the database's clock", expires, d)
				}
				if p, err := c.payer.Execute(context.Background(), acme, pay(id, "Ada Lovelace", goodIBAN)); err != nil || p.PayoutID == "" {
					t.Fatalf("a valid quote: %+v %v", p, err)
				}
				late, expires := quoteOn(t, c.quoter)
				dbClockPast(t, expires)
				if _, err := c.payer.Execute(context.Background(), acme, pay(late, "Ada Lovelace", goodIBAN)); code(err) != "quote_expired" {
					t.Fatalf("an expired quote: %v, want quote_expired", err)
				}
			})
		}
	}
}
