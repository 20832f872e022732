package payout

import (
	"context"
	"math/big"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/ethereum/go-ethereum/common"

	"github.com/partnerpay/api/testkit/chaintest"
	"github.com/partnerpay/api/testkit/pgtest"
)

// BenchmarkWatch has the chain watcher see and record PAYOUT_WATCH_TRANSFERS
// transfers (200 by default; the figure is 10,000), each to a
// payout awaiting its deposit, mined in 100 blocks (fewer when there are
// fewer transfers) of the local testnet, one confirmation. It reports the
// rate, the watcher's CPU and the database commits per deposit, and the
// time from the last block's mining to the last payout recorded.
//
//	PAYOUT_WATCH_TRANSFERS=10000 go test -run '^$' -bench Watch -benchtime 1x ./internal/payout/
func BenchmarkWatch(b *testing.B) {
	n := 200
	if v, err := strconv.Atoi(os.Getenv("PAYOUT_WATCH_TRANSFERS")); err == nil && v > 0 {
		n = v
	}
	blocks := min(100, n)
	ctx := context.Background()
	for b.Loop() {
		b.StopTimer()
		db := pgtest.Open(b, migrationSets...)
		f := newStatusFixture(b, db)
		// n payouts awaiting their deposits, at addresses of decimal
		// digits (the same in EIP-55).
		if _, err := db.Exec(ctx, `INSERT INTO payouts (id, quote_id, key_id, beneficiary_name, beneficiary, chain,
				crypto_currency, fiat_currency, country, crypto_amount, rail, estimated_settlement, status, quote_expires_at, created_at,
				deposit_address, deposit_expires_at, status_at)
			SELECT 'bpo_' || lpad(to_hex(g), 32, '0'), 'bpq_84532_' || lpad(to_hex(g), 32, '0'), 'acme', 'Ada',
				'{"name":"Ada","iban":"DE89370400440532013000"}', 84532, 'USDC', 'EUR', 'DE', '100', 'sepa_instant', 'PT10S',
				'awaiting_deposit', now() + interval '1 hour', now(), '0x' || lpad(g::text, 40, '0'), now() + interval '30 minutes', now()
			FROM generate_series(1, $1::int) AS g`, n); err != nil {
			b.Fatal(err)
		}
		c := f.chain.chain
		units := usdcUnits(b, "1234567.89")
		per := n / blocks
		nonce, err := c.Client().PendingNonceAt(ctx, chaintest.Faucet.Address)
		if err != nil {
			b.Fatal(err)
		}
		for first := 1; first <= n; first += per {
			var to []common.Address
			for i := first; i < first+per && i <= n; i++ {
				to = append(to, common.HexToAddress("0x"+leftPad(strconv.Itoa(i), 40)))
			}
			if _, err := c.Transfers(ctx, chaintest.Faucet, nonce, usdc, to, units); err != nil {
				b.Fatal(err)
			}
			nonce += uint64(len(to))
			c.Commit()
		}
		mined := time.Now()
		commits0, cpu0 := commits(b, db), cpu()
		b.StartTimer()
		start := time.Now()
		for {
			m, err := f.chain.watcher.Round(ctx)
			if err != nil {
				b.Fatal(err)
			}
			if m == 0 {
				break
			}
		}
		took := time.Since(start)
		b.StopTimer()
		var recorded int
		if err := db.QueryRow(ctx, `SELECT count(*) FROM payout_deposits`).Scan(&recorded); err != nil {
			b.Fatal(err)
		}
		if recorded != n {
			b.Fatalf("recorded %d deposits of %d transfers", recorded, n)
		}
		// Other sessions' counts reach pg_stat_database within a second
		// of their last transaction.
		time.Sleep(1500 * time.Millisecond)
		b.ReportMetric(float64(n)/took.Seconds(), "deposits/s")
		b.ReportMetric(float64((cpu()-cpu0).Microseconds())/1000/float64(n), "cpu-ms/deposit")
		b.ReportMetric(float64(commits(b, db)-commits0)/float64(n), "commits/deposit")
		b.ReportMetric(took.Seconds()+start.Sub(mined).Seconds(), "s-mined-to-recorded")
		b.StartTimer()
	}
}

func leftPad(s string, n int) string {
	for len(s) < n {
		s = "0" + s
	}
	return s
}

// BenchmarkRefunds has the signer send PAYOUT_BENCH_REFUNDS refunds (100
// by default; the figure is 1,000), all pending at once, from the
// local testnet's treasury, and mines a block whenever one is broadcast,
// until every refund is confirmed (one confirmation). It reports the rate,
// the process's CPU per refund (the in-process chain's mining included),
// the nonces used (exactly one per refund unless one was replaced) and the
// replacements.
//
//	PAYOUT_BENCH_REFUNDS=1000 go test -run '^$' -bench Refunds -benchtime 1x ./internal/payout/
func BenchmarkRefunds(b *testing.B) {
	n := 100
	if v, err := strconv.Atoi(os.Getenv("PAYOUT_BENCH_REFUNDS")); err == nil && v > 0 {
		n = v
	}
	ctx := context.Background()
	for b.Loop() {
		b.StopTimer()
		db := pgtest.Open(b, migrationSets...)
		f := newStatusFixture(b, db)
		if _, err := db.Exec(ctx, `INSERT INTO payouts (id, quote_id, key_id, beneficiary_name, beneficiary, chain,
				crypto_currency, fiat_currency, country, crypto_amount, rail, estimated_settlement, status, quote_expires_at, created_at,
				deposit_address, deposit_expires_at, status_at, refund_address)
			SELECT 'bpo_' || lpad(to_hex(g), 32, '0'), 'bpq_84532_' || lpad(to_hex(g), 32, '0'), 'acme', 'Ada',
				'{"name":"Ada","iban":"DE89370400440532013000"}', 84532, 'USDC', 'EUR', 'DE', '100', 'sepa_instant', 'PT10S',
				'awaiting_deposit', now() + interval '1 hour', now(), '0x' || lpad(g::text, 40, '0'), now() + interval '30 minutes', now(), $2
			FROM generate_series(1, $1::int) AS g;`, n, refundTo); err != nil {
			b.Fatal(err)
		}
		if _, err := db.Exec(ctx, `INSERT INTO payout_refunds (id, payout_id, reason, status, amount, crypto_currency, chain,
				deposit_tx_hash, address, created_at, pending_at)
			SELECT 'rf_' || lpad(to_hex(g), 32, '0'), 'bpo_' || lpad(to_hex(g), 32, '0'), 'deposit_wrong_token', 'pending', '1.50', 'USDC',
				84532, '0x' || lpad(to_hex(g), 64, '0'), $2, now(), now()
			FROM generate_series(1, $1::int) AS g`, n, refundTo); err != nil {
			b.Fatal(err)
		}
		s := f.chain.signer
		cpu0 := cpu()
		b.StartTimer()
		start := time.Now()
		confirmed := 0
		for rounds := 0; confirmed < n; rounds++ {
			if rounds > 50*n {
				b.Fatalf("%d of %d refunds confirmed after %d rounds", confirmed, n, rounds)
			}
			if _, err := s.Round(ctx); err != nil {
				b.Fatal(err)
			}
			f.chain.chain.Commit()
			if err := db.QueryRow(ctx, `SELECT count(*) FROM payout_refunds WHERE status = 'confirmed'`).Scan(&confirmed); err != nil {
				b.Fatal(err)
			}
		}
		took := time.Since(start)
		b.StopTimer()
		var nonces, versions int
		if err := db.QueryRow(ctx, `SELECT (SELECT count(DISTINCT nonce) FROM payout_chain_sends), (SELECT count(*) FROM payout_chain_send_versions)`).
			Scan(&nonces, &versions); err != nil {
			b.Fatal(err)
		}
		if got := balance(b, f.chain.chain, usdc, common.HexToAddress(refundTo)); got.Cmp(new(big.Int).Mul(big.NewInt(int64(n)), usdcUnits(b, "1.5"))) != 0 {
			b.Fatalf("the refund address holds %s units after %d refunds of 1.5", got, n)
		}
		b.ReportMetric(float64(n)/took.Seconds(), "refunds/s")
		b.ReportMetric(float64((cpu()-cpu0).Microseconds())/1000/float64(n), "cpu-ms/refund")
		b.ReportMetric(float64(nonces), "nonces")
		b.ReportMetric(float64(versions-nonces), "replacements")
		b.StartTimer()
	}
}
