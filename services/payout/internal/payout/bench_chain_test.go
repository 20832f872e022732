package payout

import (
	"context"
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
