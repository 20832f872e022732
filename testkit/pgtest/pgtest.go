// Package pgtest gives a test package a real PostgreSQL: one server per
// test binary (started on first use, stopped by Main), a fresh database per
// test with the module's schema (Open), so store tests run side by side
// (t.Parallel); and a primary with a
// stallable synchronous standby, for the tests of DESIGN §6's
// acknowledgement rules. PostgreSQL must be installed (.ci/run installs
// Debian's postgresql).
package pgtest

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/partnerpay/api/pkg/database"
	"github.com/partnerpay/api/testkit/pglocal"
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
func Server(tb testing.TB) *pglocal.Server {
	tb.Helper()
	shared.once.Do(func() {
		dir, err := pglocal.TempDir("pgtest-")
		if err != nil {
			shared.err = err
			return
		}
		shared.dir = dir
		// Enough connections for every parallel test's pool.
		s, err := pglocal.New(pglocal.Options{Dir: filepath.Join(dir, "data"), Settings: []string{"max_connections=400"}})
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

// URL makes a fresh database on the shared server and returns its URL.
func URL(tb testing.TB) string {
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

// Open opens a fresh database (URL) with sets applied, closed when the
// test ends: a store test's own system of record.
func Open(tb testing.TB, sets ...database.Migrations) *database.DB {
	tb.Helper()
	return OpenURL(tb, URL(tb), sets...)
}

// OpenWith is Open with opts (a tracer that sees every statement, say).
func OpenWith(tb testing.TB, opts database.Options, sets ...database.Migrations) *database.DB {
	tb.Helper()
	return openURL(tb, URL(tb), opts, sets...)
}

// OpenURL opens url with sets applied, closed when the test ends.
func OpenURL(tb testing.TB, url string, sets ...database.Migrations) *database.DB {
	tb.Helper()
	return openURL(tb, url, database.Options{}, sets...)
}

func openURL(tb testing.TB, url string, opts database.Options, sets ...database.Migrations) *database.DB {
	tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	opts.Wait = 10 * time.Second
	db, err := database.Open(ctx, url, opts, sets...)
	if err != nil {
		tb.Fatalf("open %s: %v", url, err)
	}
	tb.Cleanup(db.Close)
	return db
}

// SchemaFile holds a module's committed schema file (path, relative to the
// test's package) to what sets make of an empty database (Server.Schema,
// without the migrations' own version tables): CI fails when a migration
// changes the schema and the file was not regenerated. With
// UPDATE_SCHEMA=1 in the environment (make schema), it writes the file
// instead, under header.
func SchemaFile(t *testing.T, path, header string, sets ...database.Migrations) {
	t.Helper()
	url := URL(t)
	OpenURL(t, url, sets...).Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	name := url[strings.LastIndexByte(url, '/')+1 : strings.IndexByte(url, '?')]
	live, err := Server(t).Schema(ctx, name, "public.schema_*")
	if err != nil {
		t.Fatal(err)
	}
	want := header + "\n" + live
	if os.Getenv("UPDATE_SCHEMA") == "1" {
		if err := os.WriteFile(path, []byte(want), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	got, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v: regenerate it with make schema", err)
	}
	if string(got) != want {
		t.Errorf("%s is not what the migrations make; regenerate it with make schema (UPDATE_SCHEMA=1). The migrations make:\n%s", path, live)
	}
}

// Replicated is a PostgreSQL primary of its own whose commits wait for
// synchronous standbys (one, s1, under 'ANY 1 (s1)' by default), each
// reached through a link the test can stall: what DESIGN §6's
// acknowledgement rules are tested against.
type Replicated struct {
	Primary, Standby *pglocal.Server // Standby is the first standby
	Link             *pglocal.Link   // and Link its link
	Links            []*pglocal.Link // every standby's link, in order
}

// StartReplicated starts a Replicated, stopped when the test ends.
func StartReplicated(tb testing.TB) Replicated {
	tb.Helper()
	return StartReplicatedAs(tb, "ANY 1 (s1)")
}

// StartReplicatedAs is StartReplicated with synchronous_standby_names
// names, and standbys of those names ("s1" when none is given): "s1" or
// "FIRST 1 (s1)" wait for s1 by priority, as a 'sync' standby, where
// ANY n (…) waits for a quorum of 'quorum' ones.
func StartReplicatedAs(tb testing.TB, names string, standbys ...string) Replicated {
	tb.Helper()
	if len(standbys) == 0 {
		standbys = []string{"s1"}
	}
	dir, err := pglocal.TempDir("pgreplicated-")
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { os.RemoveAll(dir) })
	primary, err := pglocal.New(pglocal.Options{Dir: filepath.Join(dir, "primary"),
		Settings: []string{"synchronous_standby_names=" + names, "synchronous_commit=on"}})
	if err != nil {
		tb.Fatal(err)
	}
	if err := primary.Start(); err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(primary.Kill)
	r := Replicated{Primary: primary}
	for _, name := range standbys {
		standby, link, err := primary.StandbyVia(filepath.Join(dir, name), name, nil)
		if err != nil {
			tb.Fatal(err)
		}
		tb.Cleanup(func() { link.Close(); standby.Kill() })
		if r.Standby == nil {
			r.Standby, r.Link = standby, link
		}
		r.Links = append(r.Links, link)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := primary.WaitStreaming(ctx, len(standbys)); err != nil {
		tb.Fatal(err)
	}
	return r
}

// URL is the primary's database, postgres.
func (r Replicated) URL() string { return r.Primary.URL("postgres") }

// Durable is PostgreSQL as production runs it, for the benchmarks of what a
// partner waits for: a primary and one synchronous standby
// (synchronous_commit = on), both with fsync on, their data on disk (not
// tmpfs, where a flush costs nothing), the standby streaming directly from
// the primary. A commit's floor is the primary's flush and the standby's.
type Durable struct {
	Primary, Standby *pglocal.Server
}

// StartDurable starts a Durable, stopped and removed when the benchmark
// ends.
func StartDurable(tb testing.TB) Durable {
	tb.Helper()
	return startDurable(tb, true)
}

// StartDurableAlone is a Durable's primary with no standby at all (and no
// synchronous_standby_names): PostgreSQL as make run and compose run it,
// with fsync on. Standby is nil.
func StartDurableAlone(tb testing.TB) Durable {
	tb.Helper()
	return startDurable(tb, false)
}

func startDurable(tb testing.TB, withStandby bool) Durable {
	tb.Helper()
	dir, err := os.MkdirTemp(os.Getenv("PGTEST_DURABLE_DIR"), "pgdurable-") // the system's temporary directory by default: on disk here
	if err != nil {
		tb.Fatal(err)
	}
	if err := os.Chmod(dir, 0o711); err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { os.RemoveAll(dir) })
	settings := []string{"synchronous_commit=on", "shared_buffers=256MB"}
	if withStandby {
		settings = append(settings, "synchronous_standby_names=*")
	}
	primary, err := pglocal.New(pglocal.Options{Dir: filepath.Join(dir, "primary"), Fsync: true, Settings: settings})
	if err != nil {
		tb.Fatal(err)
	}
	if err := primary.Start(); err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(primary.Kill)
	if !withStandby {
		return Durable{Primary: primary}
	}
	standby, err := primary.Standby(filepath.Join(dir, "standby"), nil)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(standby.Kill)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := primary.WaitStreaming(ctx, 1); err != nil {
		tb.Fatal(err)
	}
	return Durable{primary, standby}
}

// URL is the primary's database, postgres.
func (d Durable) URL() string { return d.Primary.URL("postgres") }

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
// then fail as not confirmed (database.IsNotConfirmed), or run out of its
// time on a starved machine, rather than answer the changed row. Once the
// standby is back, read must succeed: it checks there that it sees the
// change.
func (r Replicated) ReadsOnlyWhatTheStandbyHas(tb testing.TB, change string, read func(context.Context) error) {
	tb.Helper()
	r.Link.Stall()
	r.CommitLocally(tb, change)
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	err := read(ctx)
	cancel()
	if !database.IsNotConfirmed(err) && ctx.Err() == nil {
		tb.Errorf("read with the standby stalled after %q: %v, want it held back as not confirmed", change, err)
	}
	r.Link.Resume()
	ctx, cancel = context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := read(ctx); err != nil {
		tb.Errorf("read with the standby back: %v", err)
	}
}
