package database

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"go.opentelemetry.io/otel/trace"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/partnerpay/api/pkg/config"
	"github.com/partnerpay/api/pkg/obs"
)

// Config is the system of record's part of a binary's configuration
// (config.Load), a field of every binary that keeps records.
type Config struct {
	// The PostgreSQL system of record:
	// postgres://user:password@host1:5432,host2:5432/db?target_session_attrs=read-write
	URL string `env:"DATABASE_URL, required"`
	// How long a starting binary waits for the database to take writes.
	StartTimeout time.Duration `env:"DATABASE_START_TIMEOUT, default=60s"`
}

// Validate checks the wait.
func (c Config) Validate() error { return config.Positive("DATABASE_START_TIMEOUT", c.StartTimeout) }

// ForBinary opens the system of record of a service binary: cfg's
// DATABASE_URL, with sets applied. The binary's readiness (kit) then fails
// while the database takes no writes, and its metrics include the pool's.
func ForBinary(ctx context.Context, cfg Config, log *slog.Logger, kit *obs.Kit, sets ...Migrations) (*DB, error) {
	var tp trace.TracerProvider
	if kit.Tracing.Recording() {
		tp = kit.Tracing.Provider
	}
	db, err := Open(ctx, cfg.URL, Options{Wait: cfg.StartTimeout, Log: log, Tracer: tp}, sets...)
	if err != nil {
		return nil, err
	}
	log.Info("database", "target", db.String())
	kit.ReadyWhen(func(ctx context.Context) error {
		if err := db.Writable(ctx); err != nil {
			return fmt.Errorf("database not writable: %w", err)
		}
		return nil
	})
	kit.Registry.MustRegister(NewCollector(db))
	return db, nil
}

// collector reports the pool's state at each scrape: what an SRE reads
// when payouts slow down (waits for a connection) or fail (the database is
// not writable), and how far the database's clock is from this process's.
type collector struct {
	db                                   *DB
	writable, conns, maxConns            *prometheus.Desc
	acquires, waits, waitSeconds, failed *prometheus.Desc
	unknown, clockOffset                 *prometheus.Desc
}

// NewCollector is db's metrics (ForBinary registers them): the pool, the
// commits answered as in progress, and the database clock's offset.
func NewCollector(db *DB) prometheus.Collector {
	d := func(name, help string, labels ...string) *prometheus.Desc {
		return prometheus.NewDesc(obs.Namespace+"_db_"+name, help, labels, nil)
	}
	return &collector{
		db:          db,
		writable:    d("writable", "1 when the system of record answers and takes writes (checked at each scrape), 0 otherwise."),
		conns:       d("connections", "Connections of the pool, by state.", "state"),
		maxConns:    d("max_connections", "Most connections the pool opens."),
		acquires:    d("acquires_total", "Connections taken from the pool."),
		waits:       d("acquire_waits_total", "Connections taken after waiting: none was idle and the pool was full or growing."),
		waitSeconds: d("acquire_wait_seconds_total", "Time spent waiting for a connection."),
		failed:      d("acquire_failures_total", "Connection waits that ended without one (cancelled or the database unreachable)."),
		unknown:     d("commit_outcome_unknown_total", "Commits whose caller was answered before they reported back (the synchronous standby did not confirm in time) or that failed without saying whether they committed: answered 409 idempotency_in_progress, never 200."),
		clockOffset: d("clock_offset_seconds", "PostgreSQL's clock minus this process's, as last measured (at start, then every 10 s): quote expiry, deposit windows and createdAt are read on PostgreSQL's clock, so a wrong one shows in every answer."),
	}
}

func (c *collector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{c.writable, c.conns, c.maxConns, c.acquires, c.waits, c.waitSeconds, c.failed, c.unknown, c.clockOffset} {
		ch <- d
	}
}

func (c *collector) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	up := 0.0
	if c.db.Writable(ctx) == nil {
		up = 1
	}
	ch <- prometheus.MustNewConstMetric(c.writable, prometheus.GaugeValue, up)
	ch <- prometheus.MustNewConstMetric(c.unknown, prometheus.CounterValue, float64(c.db.OutcomesUnknown()))
	ch <- prometheus.MustNewConstMetric(c.clockOffset, prometheus.GaugeValue, c.db.ClockOffset().Seconds())
	st := c.db.Pool().Stat()
	ch <- prometheus.MustNewConstMetric(c.conns, prometheus.GaugeValue, float64(st.AcquiredConns()), "acquired")
	ch <- prometheus.MustNewConstMetric(c.conns, prometheus.GaugeValue, float64(st.IdleConns()), "idle")
	ch <- prometheus.MustNewConstMetric(c.conns, prometheus.GaugeValue, float64(st.ConstructingConns()), "constructing")
	ch <- prometheus.MustNewConstMetric(c.maxConns, prometheus.GaugeValue, float64(st.MaxConns()))
	ch <- prometheus.MustNewConstMetric(c.acquires, prometheus.CounterValue, float64(st.AcquireCount()))
	ch <- prometheus.MustNewConstMetric(c.waits, prometheus.CounterValue, float64(st.EmptyAcquireCount()))
	ch <- prometheus.MustNewConstMetric(c.waitSeconds, prometheus.CounterValue, st.AcquireDuration().Seconds())
	ch <- prometheus.MustNewConstMetric(c.failed, prometheus.CounterValue, float64(st.CanceledAcquireCount()))
}
