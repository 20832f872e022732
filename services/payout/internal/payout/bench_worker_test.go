package payout

import (
	"context"
	"os"
	"slices"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/partnerpay/api/pkg/database"
	"github.com/partnerpay/api/pkg/environment"
	"github.com/partnerpay/api/services/payout/internal/store"
	"github.com/partnerpay/api/testkit/pgtest"
)

// seedDeposited inserts n payouts of acme whose deposit arrived and whose
// hand-over is due now, as the arrival leaves them (their history rows by
// the trigger).
func seedDeposited(b *testing.B, db *database.DB, n int) {
	b.Helper()
	if _, err := db.Exec(context.Background(), `INSERT INTO payouts (id, quote_id, key_id, beneficiary_name, beneficiary, chain,
			crypto_currency, fiat_currency, country, crypto_amount, rail, estimated_settlement, status, quote_expires_at, created_at,
			deposit_address, deposit_expires_at, status_at, deposit_tx_hash, deposit_amount, handover_at, handover_next_at)
		SELECT 'bpo_' || lpad(to_hex(g), 32, '0'), 'bpq_84532_' || lpad(to_hex(g), 32, '0'), 'acme', 'Ada',
			'{"name":"Ada","iban":"DE89370400440532013000"}', 84532, 'USDC', 'EUR', 'DE', '100', 'sepa_instant', 'PT10S',
			'awaiting_deposit', now() + interval '1 hour', now(), '0x' || lpad(to_hex(g), 40, '0'), now() + interval '30 minutes', now(),
			'0x' || lpad(to_hex(g), 64, '0'), '1234567.89', now(), now()
		FROM generate_series(1, $1::int) AS g`, n); err != nil {
		b.Fatal(err)
	}
	if _, err := db.Exec(context.Background(), `VACUUM ANALYZE payouts`); err != nil {
		b.Fatal(err)
	}
}

// commits is how many transactions the database has committed so far
// (each statement of the worker's on its own, or a transaction).
func commits(b *testing.B, db *database.DB) int64 {
	var n int64
	if err := db.QueryRow(context.Background(), `SELECT xact_commit FROM pg_stat_database WHERE datname = current_database()`).Scan(&n); err != nil {
		b.Fatal(err)
	}
	return n
}

func cpu() time.Duration {
	var u syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &u)
	return time.Duration(u.Utime.Nano() + u.Stime.Nano())
}

// BenchmarkDrain hands PAYOUT_DRAIN_ROWS deposited payouts (2,000 by
// default; the figure is 100,000) to a provider that completes
// each at once, on one replica's worker loops, until every one is
// completed; then, with them all in their return window, it measures the
// idle worker (provider calls, database commits and CPU a second) and a
// new payout's time from deposit to completed. It reports the drain's
// rate and the provider calls per payout.
func BenchmarkDrain(b *testing.B) {
	rows := 2000
	if v, err := strconv.Atoi(os.Getenv("PAYOUT_DRAIN_ROWS")); err == nil && v > 0 {
		rows = v
	}
	idle := 5 * time.Second
	if v, err := time.ParseDuration(os.Getenv("PAYOUT_DRAIN_IDLE")); err == nil && v > 0 {
		idle = v
	}
	for b.Loop() {
		db := pgtest.Open(b, migrationSets...)
		f := newStatusFixture(b, db)
		f.provider.set(func(p *fakeProvider) { p.settles = true })
		svc, w := withMover(Config{Env: environment.Sandbox, TTL: time.Hour, Book: f.svc.(*service).book, Now: db.Now,
			Secret: []byte("test-secret-0123456789"), Faucet: f.chain.faucet}, store.NewStore(db, environment.Sandbox), f.provider,
			prometheus.NewRegistry())
		seedDeposited(b, db, rows)
		ctx, stop := context.WithCancel(context.Background())
		done := make(chan struct{})
		start, cpu0 := time.Now(), cpu()
		go func() { w.Run(ctx); close(done) }()
		completed := func() int {
			var n int
			if err := db.QueryRow(context.Background(), `SELECT count(*) FROM payouts WHERE status = 'completed'`).Scan(&n); err != nil {
				b.Fatal(err)
			}
			return n
		}
		for completed() < rows {
			time.Sleep(100 * time.Millisecond)
		}
		took, spent := time.Since(start), cpu()-cpu0
		creates, asked, _ := f.provider.counts()
		calls := creates + asked + f.provider.feeds()
		b.ReportMetric(float64(rows)/took.Seconds(), "payouts/s")
		b.ReportMetric(float64(calls)/float64(rows), "calls/payout")
		b.Logf("drain: %d payouts completed in %s (%.0f/s), %d provider calls (%.2f a payout), %.2f ms CPU a payout",
			rows, took.Round(time.Millisecond), float64(rows)/took.Seconds(), calls, float64(calls)/float64(rows),
			float64(spent.Microseconds())/1000/float64(rows))

		// Idle: every payout completed, in its return window, and the
		// provider's feed read to its end.
		last := f.provider.lastChange()
		for {
			var after string
			if err := db.QueryRow(context.Background(), `SELECT after FROM payout_provider_feed`).Scan(&after); err != nil {
				b.Fatal(err)
			}
			if after == last {
				break
			}
			time.Sleep(100 * time.Millisecond)
		}
		creates, asked, _ = f.provider.counts()
		calls = creates + asked + f.provider.feeds()
		c0, k0, cpu1, t0 := calls, commits(b, db), cpu(), time.Now()
		time.Sleep(idle)
		creates, asked, _ = f.provider.counts()
		c1, k1, cpu2, secs := creates+asked+f.provider.feeds(), commits(b, db), cpu(), time.Since(t0).Seconds()
		b.ReportMetric(float64(c1-c0)/secs, "idle-calls/s")
		b.Logf("idle, %d payouts in their return window: %.2f provider calls/s, %.1f commits/s, %.2f%% of a core (creates %d, asked %d, feeds %d)",
			rows, float64(c1-c0)/secs, float64(k1-k0)/secs, 100*(cpu2-cpu1).Seconds()/secs, creates, asked, f.provider.feeds())

		// A new payout: deposit to completed.
		p := f.payout(b, "77")
		t1 := time.Now()
		if _, err := svc.SandboxDeposit(context.Background(), acme, DepositRequest{PayoutID: p.PayoutID}); err != nil {
			b.Fatal(err)
		}
		f.chain.seen(b) // mined, and recorded by the watcher
		w.WakeHandOver()
		for {
			st, err := svc.Status(context.Background(), acme, StatusRequest{PayoutID: p.PayoutID})
			if err != nil {
				b.Fatal(err)
			}
			if st.Status == "completed" {
				break
			}
			time.Sleep(10 * time.Millisecond)
		}
		b.Logf("a new payout beside them: deposit to completed in %s (its transfer mined and recorded, the provider settling at once)",
			time.Since(t1).Round(time.Millisecond))
		stop()
		<-done
	}
}

// BenchmarkRefundAddressWhileTheProviderIsSlow sets refund addresses on
// payouts whose hand-overs the worker is making, with the provider taking
// 2 s an answer: a partner's write never waits for the provider.
func BenchmarkRefundAddressWhileTheProviderIsSlow(b *testing.B) {
	for b.Loop() {
		db := pgtest.Open(b, migrationSets...)
		f := newStatusFixture(b, db)
		f.provider.set(func(p *fakeProvider) { p.latency = 2 * time.Second })
		svc, w := withMover(Config{Env: environment.Sandbox, TTL: time.Hour, Book: f.svc.(*service).book, Now: db.Now,
			Secret: []byte("test-secret-0123456789")}, store.NewStore(db, environment.Sandbox), f.provider, prometheus.NewRegistry())
		seedDeposited(b, db, 200)
		ctx, stop := context.WithCancel(context.Background())
		done := make(chan struct{})
		go func() { w.Run(ctx); close(done) }()
		for f.provider.creating() == 0 { // the worker's first calls are out
			time.Sleep(5 * time.Millisecond)
		}
		var took []time.Duration
		for i := 1; i <= 200; i++ {
			id := "bpo_" + pad32(strconv.FormatInt(int64(i), 16))
			t := time.Now()
			if _, err := svc.SetRefundAddress(context.Background(), acme, RefundAddressRequest{PayoutID: id,
				Address: "0x5aAeb6053F3E94C9b9A09f33669435E7Ef1BeAed"}); err != nil {
				b.Fatal(id, err)
			}
			took = append(took, time.Since(t))
		}
		slices.Sort(took)
		p99 := took[len(took)*99/100]
		b.ReportMetric(float64(p99.Microseconds())/1000, "p99-ms")
		b.Logf("refund address while the provider takes 2 s an answer: p50 %s, p99 %s, max %s (200 payouts being handed over)",
			took[len(took)/2], p99, took[len(took)-1])
		stop()
		<-done
	}
}

func pad32(s string) string {
	for len(s) < 32 {
		s = "0" + s
	}
	return s
}
