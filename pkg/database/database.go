// Package database is the connection to the system of record: PostgreSQL
// through one pgxpool.Pool per process, or, for a first look on a machine
// without PostgreSQL, an embedded SQLite file driven by the same store code.
//
// Stores write their SQL once, with $1-style placeholders and the subset
// both engines speak (INSERT … ON CONFLICT … DO NOTHING RETURNING, COALESCE,
// no FOR UPDATE, no server clock in shared SQL: times come from the caller,
// read on the database's clock, DB.Now). Each module's
// schema is a set of versioned migrations (goose) with one directory per
// engine; Open applies every set before the binary serves, on PostgreSQL
// under a session advisory lock so that replicas starting together apply
// each migration once.
//
// The money rules live in those schemas, so they hold whatever the code
// does: a quote id executes once (a unique constraint), a status moves only
// forward (a trigger), an idempotency record commits in the transaction of
// the record it answers for.
package database

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"strings"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/jackc/pgx/v5/stdlib"
	"github.com/pressly/goose/v3"
	"github.com/pressly/goose/v3/lock"
	"modernc.org/sqlite"
	sqlite3 "modernc.org/sqlite/lib"
)

// Engine is the database behind a DB.
type Engine string

// The engines.
const (
	Postgres Engine = "postgres"
	SQLite   Engine = "sqlite"
)

// EmbeddedScheme starts a DATABASE_URL naming an embedded SQLite file:
// sqlite:/path/to/file.db. It is for a first look only (make run on a
// machine without PostgreSQL); production refuses it.
const EmbeddedScheme = "sqlite:"

// ErrNoRows is a query that found nothing, on either engine.
var ErrNoRows = errors.New("database: no rows")

// Querier runs statements: a DB (each statement on its own) or a
// transaction (Tx).
type Querier interface {
	// Exec runs a statement and returns the number of rows it affected.
	Exec(ctx context.Context, query string, args ...any) (int64, error)
	// QueryRow runs a query that returns at most one row; its Scan
	// returns ErrNoRows when there is none.
	QueryRow(ctx context.Context, query string, args ...any) Row
	// Query runs a query that returns rows.
	Query(ctx context.Context, query string, args ...any) (Rows, error)
}

// Row is one row of a result.
type Row interface{ Scan(dest ...any) error }

// Rows is a result being read.
type Rows interface {
	Next() bool
	Scan(dest ...any) error
	Err() error
	Close()
}

// Migrations is one module's schema: versioned goose migrations
// (NNNNN_name.sql), one directory per engine, tracked in the table
// schema_<Name> so that modules evolve their schemas independently.
type Migrations struct {
	Name     string
	Postgres fs.FS
	SQLite   fs.FS
}

// MigrationsIn is the schema named name kept in fsys (a module's embedded
// migrations directory) under migrations/postgres and migrations/sqlite.
func MigrationsIn(name string, fsys fs.FS) Migrations {
	sub := func(dir string) fs.FS {
		f, err := fs.Sub(fsys, "migrations/"+dir)
		if err != nil {
			panic(err) // a constant path in an embedded tree
		}
		return f
	}
	return Migrations{Name: name, Postgres: sub("postgres"), SQLite: sub("sqlite")}
}

// DB is the system of record.
type DB struct {
	engine Engine
	pool   *pgxpool.Pool // Postgres
	sdb    *sql.DB       // SQLite
	desc   string

	clock       clock
	confirmWait time.Duration
	cancels     syncCancels  // commits whose wait for the standby was cancelled
	barrier     barrier      // Confirm's rounds
	unknown     atomic.Int64 // commits answered as ErrOutcomeUnknown
	stop        chan struct{}
}

var _ Querier = (*DB)(nil)

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
}

// DefaultConfirmWait is Confirm's budget: a second or two, shorter than
// every route's timeout (the shortest is 5 s), longer than a healthy
// standby's confirmation under load (milliseconds).
const DefaultConfirmWait = 2 * time.Second

// Open connects to url (a libpq URL or key/value string for PostgreSQL,
// sqlite:/path for the embedded engine), waits until it answers and is
// writable, and applies every set of migrations.
func Open(ctx context.Context, url string, opts Options, sets ...Migrations) (*DB, error) {
	if opts.Wait == 0 {
		opts.Wait = 60 * time.Second
	}
	if opts.Log == nil {
		opts.Log = slog.New(slog.DiscardHandler)
	}
	var db *DB
	var err error
	if path, ok := strings.CutPrefix(url, EmbeddedScheme); ok {
		db, err = openSQLite(path)
	} else {
		db, err = openPostgres(url)
	}
	if err != nil {
		return nil, err
	}
	db.confirmWait = opts.ConfirmWait
	if db.confirmWait <= 0 {
		db.confirmWait = DefaultConfirmWait
	}
	db.clock.every = opts.ClockEvery
	if db.clock.every <= 0 {
		db.clock.every = DefaultClockEvery
	}
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
	if db.engine == Postgres {
		go db.keepClock(db.stop)
	}
	return db, nil
}

func openPostgres(url string) (*DB, error) {
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
	db := &DB{engine: Postgres}
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

func openSQLite(path string) (*DB, error) {
	if path == "" {
		return nil, errors.New("DATABASE_URL sqlite: needs a file path (sqlite:/path/to/file.db)")
	}
	// WAL lets readers run beside the writer; synchronous=FULL fsyncs each
	// commit; busy_timeout waits for another connection's write instead of
	// failing. One connection: SQLite has one writer at a time anyway, and a
	// single connection cannot deadlock upgrading a read to a write.
	dsn := "file:" + path + "?_pragma=busy_timeout(10000)&_pragma=journal_mode(WAL)&_pragma=synchronous(FULL)&_pragma=foreign_keys(1)"
	sdb, err := sql.Open("sqlite", dsn)
	if err != nil {
		return nil, fmt.Errorf("database: %w", err)
	}
	sdb.SetMaxOpenConns(1)
	return &DB{engine: SQLite, sdb: sdb, desc: "embedded sqlite " + path}, nil
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
	if db.engine == SQLite {
		return db.sdb.PingContext(ctx)
	}
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
	var sdb *sql.DB
	var dialect goose.Dialect
	var opts []goose.ProviderOption
	switch db.engine {
	case Postgres:
		sdb, dialect = stdlib.OpenDBFromPool(db.pool), goose.DialectPostgres
		defer sdb.Close()
		// One lock for every set: replicas and services starting together
		// take turns, and each migration is applied once.
		locker, err := lock.NewPostgresSessionLocker(lock.WithLockTimeout(1, 120))
		if err != nil {
			return err
		}
		opts = append(opts, goose.WithSessionLocker(locker))
	case SQLite:
		sdb, dialect = db.sdb, goose.DialectSQLite3
	}
	for _, set := range sets {
		dir := set.Postgres
		if db.engine == SQLite {
			dir = set.SQLite
		}
		p, err := goose.NewProvider(dialect, sdb, dir, append(opts, goose.WithTableName("schema_"+set.Name))...)
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

// Engine is the engine behind db.
func (db *DB) Engine() Engine { return db.engine }

// String says what db is connected to, without credentials.
func (db *DB) String() string { return db.desc }

// Pool is the PostgreSQL pool (nil on the embedded engine): for its
// statistics.
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
	if db.pool != nil {
		db.pool.Close()
	}
	if db.sdb != nil {
		db.sdb.Close()
	}
}

// Exec runs one statement on its own: it commits on its own, so, like a
// COMMIT, it runs to its end whatever happens to ctx, and ctx ending first
// is ErrOutcomeUnknown (commit.go).
func (db *DB) Exec(ctx context.Context, query string, args ...any) (int64, error) {
	if db.engine == SQLite {
		return sqliteExec(ctx, db.sdb, query, args)
	}
	return db.pgExecDetached(ctx, query, args)
}

// QueryRow runs a one-row query on its own.
func (db *DB) QueryRow(ctx context.Context, query string, args ...any) Row {
	if db.engine == SQLite {
		return sqliteRow{db.sdb.QueryRowContext(ctx, query, sqliteArgs(args)...)}
	}
	return pgRow{db.pool.QueryRow(ctx, query, args...)}
}

// Query runs a query on its own.
func (db *DB) Query(ctx context.Context, query string, args ...any) (Rows, error) {
	if db.engine == SQLite {
		return sqliteQuery(ctx, db.sdb, query, args)
	}
	return pgQuery(ctx, db.pool, query, args)
}

// Tx runs fn in a transaction: committed when fn returns nil, rolled back
// otherwise (its error is returned as it is). The commit is the moment
// the records fn wrote exist; on PostgreSQL with a synchronous standby it
// returns only once the standby has them too. ctx limits fn's work; the
// COMMIT runs to its end whatever happens to ctx, and when ctx ends first,
// or the commit fails without the server saying it rolled back, Tx
// returns ErrOutcomeUnknown: the records may exist.
func (db *DB) Tx(ctx context.Context, fn func(tx Querier) error) error {
	if db.engine == SQLite {
		tx, err := db.sdb.BeginTx(ctx, nil)
		if err != nil {
			return err
		}
		if err := fn(sqliteTx{tx}); err != nil {
			_ = tx.Rollback()
			return err
		}
		return tx.Commit()
	}
	return db.pgTxRun(ctx, fn)
}

// OutcomesUnknown counts the commits answered as ErrOutcomeUnknown.
func (db *DB) OutcomesUnknown() int64 { return db.unknown.Load() }

// IsUniqueViolation reports whether err is a unique or primary key
// constraint refusing a second row.
func IsUniqueViolation(err error) bool {
	var pe *pgconn.PgError
	if errors.As(err, &pe) {
		return pe.Code == "23505"
	}
	var se *sqlite.Error
	if errors.As(err, &se) {
		return se.Code() == sqlite3.SQLITE_CONSTRAINT_UNIQUE || se.Code() == sqlite3.SQLITE_CONSTRAINT_PRIMARYKEY
	}
	return false
}

// IsRuleViolation reports whether err is the schema refusing a write that
// breaks one of its rules: a check constraint, or a trigger such as "a
// status moves only forward".
func IsRuleViolation(err error) bool {
	var pe *pgconn.PgError
	if errors.As(err, &pe) {
		return pe.Code == "23514" || pe.Code == "P0001"
	}
	var se *sqlite.Error
	if errors.As(err, &se) {
		return se.Code() == sqlite3.SQLITE_CONSTRAINT_CHECK || se.Code() == sqlite3.SQLITE_CONSTRAINT_TRIGGER
	}
	return false
}

// Violates reports whether err is the schema refusing a write by its
// constraint or trigger named name (the names are the same on both
// engines).
func Violates(err error, name string) bool {
	if !IsRuleViolation(err) {
		return false
	}
	var pe *pgconn.PgError
	if errors.As(err, &pe) {
		return pe.ConstraintName == name || strings.Contains(pe.Message, name)
	}
	return strings.Contains(err.Error(), name)
}
