// Package databasetest runs a store's tests on both engines the stores
// support: PostgreSQL (a real server, shared by the test binary, a fresh
// database per test) and the embedded SQLite file. A package that uses it
// calls Main from its TestMain, so the shared server stops with the run.
package databasetest

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

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
