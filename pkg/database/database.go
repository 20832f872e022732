// Package database is the connection to the system of record, PostgreSQL,
// through one pgxpool.Pool per process, and what every store shares: the
// migrations, the commit that is never cancelled (commit.go), the
// confirmation on a synchronous standby, and the database's clock.
//
// Stores speak pgx: their statements, pgx.Tx in DB.Tx, pgx.CollectRows on
// the rows. PostgreSQL is the only engine (DESIGN §6), so a store says
// what it means in PostgreSQL's own terms (now(), FOR UPDATE SKIP LOCKED,
// ON CONFLICT … RETURNING). Each module's schema is a set of versioned
// migrations (goose), applied by Open before the binary serves, under a
// session advisory lock so that replicas starting together apply each
// migration once; the schema they make is committed beside them
// (schema.sql) and held to them by a test.
//
// The money rules live in those schemas, so they hold whatever the code
// does: a quote id executes once (UNIQUE), a payout's row is consistent
// (named CHECK constraints), a status moves only along its arrows and an
// executed payout never changes (triggers, for what a declaration cannot
// say), and an idempotency record commits in the transaction of the
// record it answers for.
package database

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"strings"
	"sync/atomic"
	"time"

	"github.com/exaring/otelpgx"
	metricnoop "go.opentelemetry.io/otel/metric/noop"
	"go.opentelemetry.io/otel/trace"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgtype"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/jackc/pgx/v5/stdlib"
	"github.com/pressly/goose/v3"
	"github.com/pressly/goose/v3/lock"
)

// ErrNoRows is a query that found nothing (pgx's).
var ErrNoRows = pgx.ErrNoRows

// Querier runs statements: the DB (each statement on its own, a write
// detached from its caller like a commit) or a transaction (pgx.Tx). A
// store's function that runs either way takes one.
type Querier interface {
	Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error)
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}

var (
	_ Querier = (*DB)(nil)
	_ Querier = pgx.Tx(nil)
)

// Migrations is one module's schema: versioned goose migrations
// (NNNNN_name.sql), tracked in the table schema_<Name> so that modules
// evolve their schemas independently.
type Migrations struct {
	Name string
	FS   fs.FS
}

// MigrationsIn is the schema named name kept in fsys (a module's embedded
// tree) under migrations/.
func MigrationsIn(name string, fsys fs.FS) Migrations {
	f, err := fs.Sub(fsys, "migrations")
	if err != nil {
		panic(err) // a constant path in an embedded tree
	}
	return Migrations{Name: name, FS: f}
}

// DB is the system of record.
type DB struct {
	pool *pgxpool.Pool
	desc string

	clock       clock
	confirmWait time.Duration
	cancels     syncCancels  // commits whose wait for the standby was cancelled
	barrier     barrier      // Confirm's rounds
	unknown     atomic.Int64 // commits answered as ErrOutcomeUnknown
	stop        chan struct{}
}

// Options tune Open.
type Options struct {
	// Wait is how long Open keeps trying to reach the database before it
	// gives up (a database that starts after the service, a failover in
	// progress). Zero: 60 s.
	Wait time.Duration
	// Log receives the progress lines; nil discards them.
	Log *slog.Logger
	// Clock is this process's clock (nil: time.Now); Now adds the offset
	// of the database's to it. Tests skew it.
	Clock func() time.Time
	// ClockEvery is how often the database clock's offset is measured
	// again. Zero: DefaultClockEvery.
	ClockEvery time.Duration
	// ConfirmWait bounds Confirm: how long an answer that rests on a row
	// read back waits for the synchronous standby before it is answered
	// as in progress. Zero: DefaultConfirmWait.
	ConfirmWait time.Duration
	// Tracer, when not nil, gets a span for each statement, commit and
	// connection taken from the pool (pgx's tracer hooks, through
	// otelpgx), children of the request's span: an execution's trace
	// shows its statement and its commit's wait for the standby. The
	// statements' parameters are never recorded.
	Tracer trace.TracerProvider
}

// DefaultConfirmWait is Confirm's budget: a second or two, shorter than
// every route's timeout (the shortest is 5 s), longer than a healthy
// standby's confirmation under load (milliseconds).
const DefaultConfirmWait = 2 * time.Second

// Open connects to url (a libpq URL or key/value string), waits until the
// database answers and is writable, and applies every set of migrations.
func Open(ctx context.Context, url string, opts Options, sets ...Migrations) (*DB, error) {
	if opts.Wait == 0 {
		opts.Wait = 60 * time.Second
	}
	if opts.Log == nil {
		opts.Log = slog.New(slog.DiscardHandler)
	}
	db, err := connect(url, opts.Tracer)
	if err != nil {
		return nil, err
	}
	db.confirmWait = cmp(opts.ConfirmWait, DefaultConfirmWait)
	db.clock.every = cmp(opts.ClockEvery, DefaultClockEvery)
	db.clock.local = opts.Clock
	if db.clock.local == nil {
		db.clock.local = time.Now
	}
	db.stop = make(chan struct{})
	if err := db.waitWritable(ctx, opts); err != nil {
		db.Close()
		return nil, err
	}
	if err := db.migrate(ctx, opts.Log, sets); err != nil {
		db.Close()
		return nil, err
	}
	if err := db.syncClock(ctx); err != nil {
		db.Close()
		return nil, fmt.Errorf("database %s: reading its clock: %w", db.desc, err)
	}
	go db.keepClock(db.stop)
	return db, nil
}

// cmp is d, or def when d is not positive.
func cmp(d, def time.Duration) time.Duration {
	if d <= 0 {
		return def
	}
	return d
}

func connect(url string, tp trace.TracerProvider) (*DB, error) {
	cfg, err := pgxpool.ParseConfig(url)
	if err != nil {
		// pgx's message can quote the URL, password included: say only what is wrong.
		return nil, errors.New("DATABASE_URL is not a PostgreSQL connection string (postgres://user:password@host:port/db?target_session_attrs=read-write)")
	}
	if !strings.Contains(url, "pool_max_conns") {
		// Above pgx's default of max(4, CPUs): a payout waits on the
		// synchronous standby at commit, and the pool must not queue
		// requests behind those waits.
		cfg.MaxConns = 16
	}
	if cfg.ConnConfig.ConnectTimeout == 0 {
		// A host that does not answer (a partition, a dead primary's
		// address) must not hold a request; the next host is tried.
		cfg.ConnConfig.ConnectTimeout = 2 * time.Second
	}
	// A connection that failed (the primary died) is dropped when it is
	// returned; the health check finds idle ones that died quietly.
	cfg.HealthCheckPeriod = 5 * time.Second
	// Our statements are limited by their callers' contexts. A server-side
	// statement_timeout (from the URL or the role) would also cancel a
	// commit's wait for the synchronous standby, leaving the row committed
	// on the primary alone (commit.go): it is off on our connections.
	cfg.ConnConfig.RuntimeParams["statement_timeout"] = "0"
	// Times read back in UTC, as the API writes them (pgx reads
	// timestamptz in the process's zone otherwise).
	cfg.AfterConnect = func(_ context.Context, c *pgx.Conn) error {
		c.TypeMap().RegisterType(&pgtype.Type{Name: "timestamptz", OID: pgtype.TimestamptzOID,
			Codec: &pgtype.TimestamptzCodec{ScanLocation: time.UTC}})
		return nil
	}
	if tp != nil {
		// Spans named by the statement's operation ("INSERT", "commit"),
		// never its text's values; no metrics (ours are Prometheus').
		cfg.ConnConfig.Tracer = otelpgx.NewTracer(otelpgx.WithTracerProvider(tp), otelpgx.WithMeterProvider(metricnoop.NewMeterProvider()))
	}
	db := &DB{}
	cfg.ConnConfig.OnNotice = db.cancels.onNotice
	pool, err := pgxpool.NewWithConfig(context.Background(), cfg)
	if err != nil {
		return nil, fmt.Errorf("database: %w", err)
	}
	hosts := make([]string, 0, 1+len(cfg.ConnConfig.Fallbacks))
	hosts = append(hosts, fmt.Sprintf("%s:%d", cfg.ConnConfig.Host, cfg.ConnConfig.Port))
	for _, f := range cfg.ConnConfig.Fallbacks {
		hosts = append(hosts, fmt.Sprintf("%s:%d", f.Host, f.Port))
	}
	db.pool, db.desc = pool, "postgresql "+strings.Join(hosts, ",")+"/"+cfg.ConnConfig.Database
	return db, nil
}

// waitWritable waits until the database answers and takes writes.
func (db *DB) waitWritable(ctx context.Context, opts Options) error {
	ctx, cancel := context.WithTimeout(ctx, opts.Wait)
	defer cancel()
	var err error
	for attempt := 0; ; attempt++ {
		if err = db.Writable(ctx); err == nil {
			return nil
		}
		if attempt%10 == 0 {
			opts.Log.Warn("database not writable yet; waiting", "target", db.desc, "err", err)
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("database %s not writable within %s: %w", db.desc, opts.Wait, err)
		case <-time.After(500 * time.Millisecond):
		}
	}
}

// ErrReadOnly is a database that answers but takes no writes (a standby).
var ErrReadOnly = errors.New("database: connected to a read-only server (a standby)")

// Writable reports whether the database answers and takes writes: the
// readiness of every binary that keeps records.
func (db *DB) Writable(ctx context.Context) error {
	var recovering bool
	if err := db.pool.QueryRow(ctx, "SELECT pg_is_in_recovery()").Scan(&recovering); err != nil {
		return err
	}
	if recovering {
		return ErrReadOnly
	}
	return nil
}

func (db *DB) migrate(ctx context.Context, log *slog.Logger, sets []Migrations) error {
	sdb := stdlib.OpenDBFromPool(db.pool)
	defer sdb.Close()
	// One lock for every set: replicas and services starting together
	// take turns, and each migration is applied once.
	locker, err := lock.NewPostgresSessionLocker(lock.WithLockTimeout(1, 120))
	if err != nil {
		return err
	}
	for _, set := range sets {
		p, err := goose.NewProvider(goose.DialectPostgres, sdb, set.FS,
			goose.WithSessionLocker(locker), goose.WithTableName("schema_"+set.Name))
		if err != nil {
			return fmt.Errorf("migrations %s: %w", set.Name, err)
		}
		results, err := p.Up(ctx)
		if err != nil {
			return fmt.Errorf("migrations %s: %w", set.Name, err)
		}
		version, err := p.GetDBVersion(ctx)
		if err != nil {
			return fmt.Errorf("migrations %s: %w", set.Name, err)
		}
		log.Info("database schema", "set", set.Name, "version", version, "applied_now", len(results))
	}
	return nil
}

// String says what db is connected to, without credentials.
func (db *DB) String() string { return db.desc }

// Pool is the pool: for its statistics, and for a store's reads.
func (db *DB) Pool() *pgxpool.Pool { return db.pool }

// Close closes every connection.
func (db *DB) Close() {
	if db.stop != nil {
		select {
		case <-db.stop:
		default:
			close(db.stop)
		}
	}
	db.pool.Close()
}

// Exec runs one statement on its own: it commits on its own, so, like a
// COMMIT, it runs to its end whatever happens to ctx, and ctx ending first
// is ErrOutcomeUnknown (commit.go).
func (db *DB) Exec(ctx context.Context, query string, args ...any) (pgconn.CommandTag, error) {
	return db.execDetached(ctx, query, args)
}

// QueryRow runs a one-row query on its own.
func (db *DB) QueryRow(ctx context.Context, query string, args ...any) pgx.Row {
	return db.pool.QueryRow(ctx, query, args...)
}

// Query runs a query on its own.
func (db *DB) Query(ctx context.Context, query string, args ...any) (pgx.Rows, error) {
	return db.pool.Query(ctx, query, args...)
}

// Tx runs fn in a transaction: committed when fn returns nil, rolled back
// otherwise (its error is returned as it is). The commit is the moment
// the records fn wrote exist; with a synchronous standby it returns only
// once the standby has them too. ctx limits fn's work; the COMMIT runs to
// its end whatever happens to ctx, and when ctx ends first, or the commit
// fails without the server saying it rolled back, Tx returns
// ErrOutcomeUnknown: the records may exist.
func (db *DB) Tx(ctx context.Context, fn func(tx pgx.Tx) error) error {
	tx, err := db.pool.Begin(ctx)
	if err != nil {
		return err
	}
	if err := fn(tx); err != nil {
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer cancel()
		_ = tx.Rollback(rctx)
		return err
	}
	return db.detached(ctx, tx.Conn().PgConn(), tx.Commit, nil)
}

// OutcomesUnknown counts the commits answered as ErrOutcomeUnknown.
func (db *DB) OutcomesUnknown() int64 { return db.unknown.Load() }

// IsUniqueViolation reports whether err is a unique or primary key
// constraint refusing a second row.
func IsUniqueViolation(err error) bool {
	var pe *pgconn.PgError
	return errors.As(err, &pe) && pe.Code == "23505"
}

// IsRuleViolation reports whether err is the schema refusing a write that
// breaks one of its rules: a check constraint, or a trigger such as "a
// status moves only forward".
func IsRuleViolation(err error) bool {
	var pe *pgconn.PgError
	return errors.As(err, &pe) && (pe.Code == "23514" || pe.Code == "P0001")
}

// Violates reports whether err is the schema refusing a write by its
// constraint or trigger named name.
func Violates(err error, name string) bool {
	var pe *pgconn.PgError
	if !errors.As(err, &pe) || !IsRuleViolation(err) {
		return false
	}
	return pe.ConstraintName == name || strings.Contains(pe.Message, name)
}
