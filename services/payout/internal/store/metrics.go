package store

import (
	"context"
	"log/slog"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/partnerpay/api/pkg/catalog"
	"github.com/partnerpay/api/pkg/database"
	"github.com/partnerpay/api/pkg/lifecycle"
	"github.com/partnerpay/api/pkg/obs"
)

// The money, visible to the on-call: what the system of record holds in
// flight, read at each scrape (two index-only reads of the in-flight
// payouts and the refunds owed: migration 00008), and the moves as they
// commit. Every replica exports the same figures (the database's); a
// dashboard takes their max.

// Metrics are the payout service's figures of the payouts.
type Metrics struct {
	db    *database.DB
	log   *slog.Logger
	moves *prometheus.CounterVec

	inFlight    *prometheus.Desc
	oldest      *prometheus.Desc
	refundsOwed *prometheus.Desc
	estimate    *prometheus.Desc
	missing     *prometheus.Desc
	up          *prometheus.Desc
}

// scrapeWait bounds a scrape's reads.
const scrapeWait = time.Second

// NewMetrics registers the payout figures of db in reg.
func NewMetrics(db *database.DB, log *slog.Logger, reg prometheus.Registerer) *Metrics {
	name := func(n string) string { return prometheus.BuildFQName(obs.Namespace, "payout", n) }
	m := &Metrics{db: db, log: log,
		moves: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: obs.Namespace, Subsystem: "payout", Name: "moves_total",
			Help: "Payouts moved to each status, as the moves commit (a payout made counts under awaiting_deposit)."}, []string{"status"}),
		inFlight: prometheus.NewDesc(name("in_flight"),
			"Payouts in each status that is not final, by rail, on the database's word at the scrape.", []string{"status", "rail"}, nil),
		oldest: prometheus.NewDesc(name("oldest_seconds"),
			"How long the oldest payout in each status that is not final has been in it, by rail (the database's clock).", []string{"status", "rail"}, nil),
		refundsOwed: prometheus.NewDesc(name("refunds_owed"),
			"Refunds owed and not yet sent, by status (awaiting_address: the payout has no refund address; pending: being sent).", []string{"status"}, nil),
		estimate: prometheus.NewDesc(name("settlement_estimate_seconds"),
			"Each rail's normal settlement time, as GET /v1/limits publishes it.", []string{"rail"}, nil),
		missing: prometheus.NewDesc(name("provider_missing"),
			"Payouts processing that the bank provider confirmed and no longer knows, now: an incident each (DESIGN §3).", nil, nil),
		up: prometheus.NewDesc(name("figures_up"),
			"1 when the last scrape read the payout figures from the database; 0 when it could not (they are then missing).", nil, nil),
	}
	for _, s := range lifecycle.PayoutStatuses {
		m.moves.WithLabelValues(s)
	}
	reg.MustRegister(m.moves, m)
	return m
}

// Moved counts payouts moved to status.
func (m *Metrics) Moved(status string, n int) {
	if m != nil && n > 0 {
		m.moves.WithLabelValues(status).Add(float64(n))
	}
}

// Describe is prometheus.Collector's.
func (m *Metrics) Describe(ch chan<- *prometheus.Desc) {
	ch <- m.inFlight
	ch <- m.oldest
	ch <- m.refundsOwed
	ch <- m.estimate
	ch <- m.missing
	ch <- m.up
}

// Collect reads the figures: in flight and oldest, by status and rail
// (every pair is answered, 0 when there is none), and refunds owed.
func (m *Metrics) Collect(ch chan<- prometheus.Metric) {
	for _, r := range catalog.Rails() {
		ch <- prometheus.MustNewConstMetric(m.estimate, prometheus.GaugeValue, r.SettlesIn().Seconds(), r.Name)
	}
	ctx, cancel := context.WithTimeout(context.Background(), scrapeWait)
	defer cancel()
	type key struct{ status, rail string }
	count, oldest := map[key]float64{}, map[key]float64{}
	owed := map[string]float64{}
	var missing float64
	err := func() error {
		if err := m.db.QueryRow(ctx, `SELECT count(*) FROM payouts WHERE provider_missing_at IS NOT NULL AND status = 'processing'`).Scan(&missing); err != nil {
			return err
		}
		rows, err := m.db.Query(ctx, `SELECT status, rail, count(*), EXTRACT(EPOCH FROM now() - min(status_at))
			FROM payouts WHERE status IN ('awaiting_deposit', 'processing') GROUP BY status, rail`)
		if err != nil {
			return err
		}
		for rows.Next() {
			var k key
			var n, age float64
			if err := rows.Scan(&k.status, &k.rail, &n, &age); err != nil {
				rows.Close()
				return err
			}
			count[k], oldest[k] = n, max(age, 0)
		}
		if err := rows.Err(); err != nil {
			return err
		}
		rows, err = m.db.Query(ctx, `SELECT status, count(*) FROM payout_refunds WHERE status IN ('awaiting_address', 'pending') GROUP BY status`)
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			var s string
			var n float64
			if err := rows.Scan(&s, &n); err != nil {
				return err
			}
			owed[s] = n
		}
		return rows.Err()
	}()
	if err != nil {
		m.log.Warn("payout figures not read at this scrape", "err", err)
		ch <- prometheus.MustNewConstMetric(m.up, prometheus.GaugeValue, 0)
		return
	}
	ch <- prometheus.MustNewConstMetric(m.up, prometheus.GaugeValue, 1)
	ch <- prometheus.MustNewConstMetric(m.missing, prometheus.GaugeValue, missing)
	for _, s := range []string{lifecycle.PayoutAwaitingDeposit, lifecycle.PayoutProcessing} {
		for _, r := range catalog.Rails() {
			k := key{s, r.Name}
			ch <- prometheus.MustNewConstMetric(m.inFlight, prometheus.GaugeValue, count[k], s, r.Name)
			ch <- prometheus.MustNewConstMetric(m.oldest, prometheus.GaugeValue, oldest[k], s, r.Name)
		}
	}
	for _, s := range []string{lifecycle.RefundAwaitingAddress, lifecycle.RefundPending} {
		ch <- prometheus.MustNewConstMetric(m.refundsOwed, prometheus.GaugeValue, owed[s], s)
	}
}
