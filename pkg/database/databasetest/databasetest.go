// Package databasetest runs a store's tests on both engines the stores
// support: PostgreSQL (a real server, shared by the test binary, a fresh
// database per test) and the embedded SQLite file. A package that uses it
// calls Main from its TestMain, so the shared server stops with the run.
package databasetest

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/partnerpay/api/pkg/database"
	"github.com/partnerpay/api/pkg/pglocal"
)

var shared struct {
	once   sync.Once
	server *pglocal.Server
	dir    string
	err    error
	n      atomic.Int64
}

// Main runs the package's tests, then stops the shared PostgreSQL server
// if one was started: call it from TestMain.
func Main(m *testing.M) {
	code := m.Run()
	Cleanup()
	os.Exit(code)
}

// Cleanup stops the shared server, if one was started: for a TestMain
// that does more than Main.
func Cleanup() {
	if shared.server != nil {
		shared.server.Kill()
		os.RemoveAll(shared.dir)
	}
}

// Server is the test binary's PostgreSQL server, started on first use.
// PostgreSQL must be installed (.ci/run installs Debian's postgresql).
func Server(tb testing.TB) *pglocal.Server {
	tb.Helper()
	shared.once.Do(func() {
		dir, err := pglocal.TempDir("pgtest-")
		if err != nil {
			shared.err = err
			return
		}
		shared.dir = dir
		s, err := pglocal.New(pglocal.Options{Dir: filepath.Join(dir, "data")})
		if err == nil {
			err = s.Start()
		}
		shared.server, shared.err = s, err
	})
	if shared.err != nil {
		tb.Fatalf("postgresql for the tests: %v", shared.err)
	}
	return shared.server
}

// PostgresURL makes a fresh database on the shared server and returns its
// URL.
func PostgresURL(tb testing.TB) string {
	tb.Helper()
	s := Server(tb)
	name := fmt.Sprintf("t%d_%d", os.Getpid(), shared.n.Add(1))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := s.CreateDatabase(ctx, name); err != nil {
		tb.Fatalf("create database: %v", err)
	}
	return s.URL(name)
}

// SQLiteURL is a fresh embedded database file.
func SQLiteURL(tb testing.TB) string {
	return database.EmbeddedScheme + filepath.Join(tb.TempDir(), "test.db")
}

// Open opens url with sets applied, closed when the test ends.
func Open(tb testing.TB, url string, sets ...database.Migrations) *database.DB {
	tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	db, err := database.Open(ctx, url, database.Options{Wait: 10 * time.Second}, sets...)
	if err != nil {
		tb.Fatalf("open %s: %v", url, err)
	}
	tb.Cleanup(db.Close)
	return db
}

// Each runs f on a fresh database of each engine, as subtests named after
// the engine.
func Each(t *testing.T, sets []database.Migrations, f func(t *testing.T, db *database.DB)) {
	t.Helper()
	t.Run("postgres", func(t *testing.T) { f(t, Open(t, PostgresURL(t), sets...)) })
	t.Run("sqlite", func(t *testing.T) { f(t, Open(t, SQLiteURL(t), sets...)) })
}

// Replicated is a PostgreSQL primary of its own whose commits wait for one
// synchronous standby (synchronous_standby_names 'ANY 1 (s1)'), reached
// through a link the test can stall: what DESIGN §6's acknowledgement
// rules are tested against.
type Replicated struct {
	Primary, Standby *pglocal.Server
	Link             *pglocal.Link
}

// StartReplicated starts a Replicated, stopped when the test ends.
func StartReplicated(tb testing.TB) Replicated {
	tb.Helper()
	dir, err := pglocal.TempDir("pgreplicated-")
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { os.RemoveAll(dir) })
	primary, err := pglocal.New(pglocal.Options{Dir: filepath.Join(dir, "primary"),
		Settings: []string{"synchronous_standby_names=ANY 1 (s1)", "synchronous_commit=on"}})
	if err != nil {
		tb.Fatal(err)
	}
	if err := primary.Start(); err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(primary.Kill)
	standby, link, err := primary.StandbyVia(filepath.Join(dir, "s1"), "s1", nil)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { link.Close(); standby.Kill() })
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := primary.WaitStreaming(ctx, 1); err != nil {
		tb.Fatal(err)
	}
	return Replicated{primary, standby, link}
}

// URL is the primary's database, postgres.
func (r Replicated) URL() string { return r.Primary.URL("postgres") }

// CommitLocally runs sql in a transaction that commits on the primary
// alone (synchronous_commit = local): its rows are visible there at once,
// and a stalled standby lacks them, as after a commit whose wait for the
// standby was cancelled.
func (r Replicated) CommitLocally(tb testing.TB, sql string, args ...any) {
	tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, err := pgx.Connect(ctx, r.URL())
	if err != nil {
		tb.Fatal(err)
	}
	defer c.Close(ctx)
	err = pgx.BeginFunc(ctx, c, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, "SET LOCAL synchronous_commit = local"); err != nil {
			return err
		}
		_, err := tx.Exec(ctx, sql, args...)
		return err
	})
	if err != nil {
		tb.Fatalf("%s: %v", sql, err)
	}
}

// ReadsOnlyWhatTheStandbyHas holds a store's read to DESIGN §6: no answer
// rests on a row the standby lacks. With the standby stalled, change
// commits on the primary alone (CommitLocally); read, given a second, must
// then fail with database.ErrNotConfirmed (or run out of its time on a
// starved machine) rather than answer the changed row. Once the standby is
// back, read must succeed: it checks there that it sees the change.
func (r Replicated) ReadsOnlyWhatTheStandbyHas(tb testing.TB, change string, read func(context.Context) error) {
	tb.Helper()
	r.Link.Stall()
	r.CommitLocally(tb, change)
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	err := read(ctx)
	cancel()
	if !errors.Is(err, database.ErrNotConfirmed) && !errors.Is(err, context.DeadlineExceeded) {
		tb.Errorf("read with the standby stalled after %q: %v, want database.ErrNotConfirmed", change, err)
	}
	r.Link.Resume()
	ctx, cancel = context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := read(ctx); err != nil {
		tb.Errorf("read with the standby back: %v", err)
	}
}
