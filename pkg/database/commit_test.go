package database_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/partnerpay/api/pkg/database"
	"github.com/partnerpay/api/testkit/pgtest"
)

// replicated is a primary whose commits wait for one synchronous standby
// reached through a link the test can stall, with a table t.
type replicated struct{ pgtest.Replicated }

func startReplicated(t *testing.T) replicated {
	t.Helper()
	r := pgtest.StartReplicated(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := r.Primary.Exec(ctx, "postgres", "CREATE TABLE t (id int PRIMARY KEY)"); err != nil {
		t.Fatal(err)
	}
	return replicated{r}
}

func (r replicated) open(t *testing.T, query string, clock func() time.Time) *database.DB {
	t.Helper()
	db, err := database.Open(context.Background(), r.URL()+query, database.Options{Wait: 10 * time.Second, Clock: clock})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(db.Close)
	return db
}

// rows counts t's rows as another session sees them.
func (r replicated) rows(t *testing.T) int {
	t.Helper()
	ctx := context.Background()
	c, err := pgx.Connect(ctx, r.URL())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close(ctx)
	var n int
	if err := c.QueryRow(ctx, "SELECT count(*) FROM t").Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// A commit waiting for a stalled standby is not cut short by its caller's
// deadline, nor by a statement_timeout in the URL: the caller hears that
// the outcome is unknown, the row stays invisible (not committed on the
// primary alone), and it commits once the standby has it.
func TestACommitRunsToItsEndWhateverItsCallerDoes(t *testing.T) {
	t.Parallel()
	r := startReplicated(t)
	db := r.open(t, "&statement_timeout=100", nil)
	for i, write := range []func(ctx context.Context) error{
		func(ctx context.Context) error {
			return db.Tx(ctx, func(tx pgx.Tx) error {
				_, err := tx.Exec(ctx, "INSERT INTO t VALUES (1)")
				return err
			})
		},
		func(ctx context.Context) error { _, err := db.Exec(ctx, "INSERT INTO t VALUES (2)"); return err },
	} {
		r.Link.Stall()
		ctx, cancel := context.WithTimeout(context.Background(), 400*time.Millisecond)
		err := write(ctx)
		cancel()
		if !errors.Is(err, database.ErrOutcomeUnknown) || !database.IsOutcomeUnknown(err) {
			t.Fatalf("write %d with the standby stalled: %v, want ErrOutcomeUnknown", i, err)
		}
		if n := r.rows(t); n != i {
			t.Fatalf("write %d: %d rows visible while the standby lacks the last: its wait was cancelled", i, n)
		}
		ctx, cancel = context.WithTimeout(context.Background(), 300*time.Millisecond)
		if err := db.Confirm(ctx); !errors.Is(err, database.ErrNotConfirmed) {
			t.Errorf("Confirm with the standby stalled: %v", err)
		}
		cancel()
		r.Link.Resume()
		deadline := time.Now().Add(10 * time.Second)
		for r.rows(t) != i+1 {
			if time.Now().After(deadline) {
				t.Fatalf("write %d never committed once the standby was back", i)
			}
			time.Sleep(10 * time.Millisecond)
		}
		if err := db.Confirm(context.Background()); err != nil {
			t.Errorf("Confirm with the standby back: %v", err)
		}
	}
	if db.OutcomesUnknown() != 2 {
		t.Errorf("%d outcomes counted unknown, want 2", db.OutcomesUnknown())
	}
}

// A confirmation with nothing written since the standby caught up needs no
// commit of its own: it answers at once, even while the standby is
// stalled, since everything a read could have seen is on it. One after a
// row the standby lacks (committed on the primary alone) still waits for
// the standby, and is answered not confirmed while it is stalled.
//
// Under either kind of synchronous_standby_names: a quorum (ANY 1, a
// 'quorum' standby) and a priority (a 'sync' standby).
func TestAConfirmationWithNothingNewCommitsNothing(t *testing.T) {
	t.Parallel()
	for _, names := range []string{"ANY 1 (s1)", "s1"} {
		t.Run(names, func(t *testing.T) {
			t.Parallel()
			confirmsWithNothingNew(t, replicated{pgtest.StartReplicatedAs(t, names)})
		})
	}
}

func confirmsWithNothingNew(t *testing.T, r replicated) {
	setup, done := context.WithTimeout(context.Background(), 30*time.Second)
	defer done()
	if err := r.Primary.Exec(setup, "postgres", "CREATE TABLE t (id int PRIMARY KEY)"); err != nil {
		t.Fatal(err)
	}
	db := r.open(t, "", nil)
	caughtUp := func() bool {
		c, err := pgx.Connect(context.Background(), r.URL())
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close(context.Background())
		var ok *bool
		err = c.QueryRow(context.Background(), `SELECT pg_current_wal_insert_lsn() <= min(flush_lsn) FROM pg_stat_replication WHERE sync_state IN ('sync', 'quorum')`).Scan(&ok)
		return err == nil && ok != nil && *ok
	}
	// The server writes a little WAL of its own now and then (a record of
	// running transactions): a confirmation that meets one commits, and
	// with the standby stalled cannot. Three tries.
	confirmed := false
	for try := 0; try < 3 && !confirmed; try++ {
		deadline := time.Now().Add(10 * time.Second)
		for !caughtUp() {
			if time.Now().After(deadline) {
				t.Fatal("the standby never caught up with the primary")
			}
			time.Sleep(10 * time.Millisecond)
		}
		r.Link.Stall()
		ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
		confirmed = db.Confirm(ctx) == nil
		cancel()
		if !confirmed {
			r.Link.Resume()
		}
	}
	if !confirmed {
		t.Fatal("with nothing written since the standby caught up, Confirm with the standby stalled was not answered at once")
	}
	r.CommitLocally(t, "INSERT INTO t VALUES (7)")
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	if err := db.Confirm(ctx); !errors.Is(err, database.ErrNotConfirmed) {
		t.Errorf("Confirm after a row the stalled standby lacks: %v, want ErrNotConfirmed", err)
	}
	cancel()
	r.Link.Resume()
	if err := db.Confirm(context.Background()); err != nil {
		t.Errorf("Confirm with the standby back: %v", err)
	}
}

// With ANY 1 (s1, s2), one standby stalled does not cost every read a
// commit: once s2 has everything, a confirmation with nothing new answers
// at once, even when s2 then stalls too (a commit would then wait for
// ever). Reading it as "every standby" would commit, and be answered not
// confirmed.
func TestAConfirmationCountsTheQuorum(t *testing.T) {
	t.Parallel()
	r := pgtest.StartReplicatedAs(t, "ANY 1 (s1, s2)", "s1", "s2")
	s1, s2 := r.Links[0], r.Links[1]
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	db, err := database.Open(ctx, r.URL(), database.Options{Wait: 10 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(db.Close)
	s1.Stall()
	if _, err := db.Exec(ctx, "CREATE TABLE t (id int PRIMARY KEY)"); err != nil {
		t.Fatal(err) // committed: s2 has it
	}
	s2CaughtUp := func() bool {
		var ok *bool
		err := db.QueryRow(ctx, `SELECT flush_lsn >= pg_current_wal_insert_lsn() FROM pg_stat_replication WHERE application_name = 's2'`).Scan(&ok)
		return err == nil && ok != nil && *ok
	}
	// The server writes a little WAL of its own now and then: a
	// confirmation that meets one commits, and with both stalled cannot.
	// Three tries.
	confirmed := false
	for try := 0; try < 3 && !confirmed; try++ {
		for !s2CaughtUp() {
			if ctx.Err() != nil {
				t.Fatal("s2 never caught up with the primary")
			}
			time.Sleep(10 * time.Millisecond)
		}
		s2.Stall()
		c, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
		confirmed = db.Confirm(c) == nil
		cancel()
		if !confirmed {
			s2.Resume()
		}
	}
	if !confirmed {
		t.Fatal("with s2 holding everything and s1 stalled, Confirm was not answered at once under ANY 1 (s1, s2)")
	}
}

// A commit the server refused is a refusal, not an unknown outcome.
func TestARefusedCommitIsNotUnknown(t *testing.T) {
	t.Parallel()
	r := startReplicated(t)
	db := r.open(t, "", nil)
	if _, err := db.Exec(context.Background(), "INSERT INTO t VALUES (1)"); err != nil {
		t.Fatal(err)
	}
	_, err := db.Exec(context.Background(), "INSERT INTO t VALUES (1)")
	if !database.IsUniqueViolation(err) || database.IsOutcomeUnknown(err) {
		t.Fatalf("a duplicate: %v", err)
	}
}

// Now is PostgreSQL's clock, whatever this process's reads.
func TestNowIsTheDatabasesClock(t *testing.T) {
	t.Parallel()
	r := startReplicated(t)
	for _, skew := range []time.Duration{2 * time.Minute, -2 * time.Minute} {
		db := r.open(t, "", func() time.Time { return time.Now().Add(skew) })
		var server time.Time
		if err := db.QueryRow(context.Background(), "SELECT clock_timestamp()").Scan(&server); err != nil {
			t.Fatal(err)
		}
		if d := db.Now().Sub(server); d < -time.Second || d > time.Second {
			t.Errorf("a clock %s off: Now is %s from PostgreSQL's", skew, d)
		}
	}
}

// A record's failure in Alone is its own, and the transaction goes on; a
// savepoint Alone could not close (the round's context ended) leaves the
// transaction in doubt: ErrInDoubt, and a closure that ends with it
// commits nothing, though Tx's COMMIT runs whatever happens to the
// context.
func TestAloneKeepsAFailureToItsRecordOnlyWhenItCan(t *testing.T) {
	t.Parallel()
	db := pgtest.Open(t)
	ctx := context.Background()
	if _, err := db.Exec(ctx, "CREATE TABLE a (n int PRIMARY KEY CHECK (n > 0))"); err != nil {
		t.Fatal(err)
	}
	insert := func(n int) func(tx pgx.Tx) error {
		return func(tx pgx.Tx) error { _, err := tx.Exec(ctx, "INSERT INTO a VALUES ($1)", n); return err }
	}
	if err := db.Tx(ctx, func(tx pgx.Tx) error {
		if err := database.Alone(ctx, tx, insert(1)); err != nil {
			return err
		}
		if err := database.Alone(ctx, tx, insert(-1)); err == nil || errors.Is(err, database.ErrInDoubt) {
			t.Errorf("a row the database refuses: %v, want its own failure", err)
		}
		return database.Alone(ctx, tx, insert(2))
	}); err != nil {
		t.Fatal(err)
	}
	// The round's context ends after the write, before the savepoint is
	// released.
	rctx, cancel := context.WithCancel(ctx)
	err := db.Tx(rctx, func(tx pgx.Tx) error {
		err := database.Alone(rctx, tx, func(tx pgx.Tx) error {
			err := insert(3)(tx)
			cancel()
			return err
		})
		if !errors.Is(err, database.ErrInDoubt) {
			t.Errorf("a savepoint not released: %v, want ErrInDoubt", err)
		}
		return err
	})
	if err == nil {
		t.Error("the transaction went on past a savepoint in doubt")
	}
	var n int
	if err := db.QueryRow(ctx, "SELECT count(*) FROM a").Scan(&n); err != nil || n != 2 {
		t.Errorf("%d rows (%v), want 2: the refused one undone alone, nothing of the transaction in doubt", n, err)
	}
}

// On one node (no synchronous standby configured, as make run and compose
// run PostgreSQL) a read's confirmation writes nothing: every commit is
// flushed before another session sees it, and there is nobody else to
// wait for. The confirmation's statement takes its no-write branch (NULL;
// the message it would write answers its LSN), however much was written
// just before.
func TestAConfirmationOnOneNodeWritesNothing(t *testing.T) {
	t.Parallel()
	db := pgtest.Open(t)
	ctx := context.Background()
	if _, err := db.Pool().Exec(ctx, `CREATE TABLE t (id int PRIMARY KEY); INSERT INTO t VALUES (1)`); err != nil {
		t.Fatal(err)
	}
	var names string
	if err := db.Pool().QueryRow(ctx, `SHOW synchronous_standby_names`).Scan(&names); err != nil || names != "" {
		t.Fatalf("the test's server has synchronous standbys %q (%v)", names, err)
	}
	var wrote *string
	if err := db.Pool().QueryRow(ctx, database.ConfirmSQL).Scan(&wrote); err != nil {
		t.Fatal(err)
	}
	if wrote != nil {
		t.Errorf("the confirmation wrote a message at %s on a node with no standby", *wrote)
	}
	if err := db.Confirm(ctx); err != nil {
		t.Errorf("Confirm on one node: %v", err)
	}
}
