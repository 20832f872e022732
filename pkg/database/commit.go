package database

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// No acknowledgement rests on a row the standby lacks (DESIGN §6). On
// PostgreSQL with a synchronous standby a COMMIT is written on the primary
// first and then waits for the standby; a cancelled wait (a deadline, a
// statement_timeout, a caller who left) does not undo it: the row becomes
// visible on the primary alone, and a failover loses it. So:
//
//   - a COMMIT, and a statement that commits on its own, runs to its end
//     detached from its caller: the caller's deadline covers the work up
//     to the commit, and when it passes during the commit the caller gets
//     ErrOutcomeUnknown while the commit goes on;
//   - a commit that fails without the server's word that it rolled back
//     (the connection died, the wait for the standby was cancelled by
//     someone else) is ErrOutcomeUnknown too, never "nothing happened";
//   - an answer that rests on a row read back (it may have been made by a
//     commit whose wait was cancelled) waits for Confirm: a commit of our
//     own, after the read, that waits for the standby — WAL is ordered, so
//     its wait covers the row.
//
// Our connections run with statement_timeout off (Open): the caller's
// context is the limit of our statements, and a server-side timeout would
// cancel exactly the wait that must not be cancelled.

// ErrOutcomeUnknown is a write whose commit did not report back: its
// caller's time ran out while it waited for the standby (it goes on), or
// it failed without saying whether it had committed. The write may exist
// now or later; a retry finds out.
var ErrOutcomeUnknown = errors.New("database: the commit's outcome is not known yet")

// ErrNotConfirmed is Confirm giving up: it could not learn in time that
// what was read is on a synchronous standby.
var ErrNotConfirmed = errors.New("database: not yet confirmed on a synchronous standby")

// errSyncWaitCancelled is a commit that returned after its wait for the
// standby was cancelled: committed here, perhaps not there.
var errSyncWaitCancelled = errors.New("the wait for the synchronous standby was cancelled")

// syncCancels notes, per connection, the server's warning that a commit's
// wait for the synchronous standby was cancelled (it is a notice, not an
// error: the commit itself reports success).
type syncCancels struct{ m sync.Map } // *pgconn.PgConn -> *atomic.Bool

func (s *syncCancels) onNotice(c *pgconn.PgConn, n *pgconn.Notice) {
	if !strings.Contains(n.Message, "wait for synchronous replication") {
		return
	}
	if flag, ok := s.m.Load(c); ok {
		flag.(*atomic.Bool).Store(true)
	}
}

// watch starts noting cancelled waits on c; the returned func stops and
// reports whether one came.
func (s *syncCancels) watch(c *pgconn.PgConn) func() bool {
	flag := new(atomic.Bool)
	s.m.Store(c, flag)
	return func() bool {
		s.m.Delete(c)
		return flag.Load()
	}
}

// detached runs commit, a statement that ends in a commit on conn, to its
// end whatever happens to ctx, and waits for it while ctx allows.
func (db *DB) detached(ctx context.Context, conn *pgconn.PgConn, commit func(context.Context) error, after func()) error {
	stop := db.cancels.watch(conn)
	done := make(chan error, 1)
	go func() {
		err := commit(context.WithoutCancel(ctx))
		if cancelled := stop(); err == nil && cancelled {
			err = errSyncWaitCancelled
		}
		if after != nil {
			after()
		}
		done <- err
	}()
	select {
	case err := <-done:
		return outcome(err)
	case <-ctx.Done():
		db.unknown.Add(1)
		return fmt.Errorf("%w: %w", ErrOutcomeUnknown, ctx.Err())
	}
}

// outcome sorts a commit's error: the server's own refusal (an ERROR: it
// rolled back) is returned as it is; anything else that is not success
// leaves the outcome unknown.
func outcome(err error) error {
	var pe *pgconn.PgError
	switch {
	case err == nil:
		return nil
	case errors.Is(err, pgx.ErrTxCommitRollback):
		return err
	case errors.As(err, &pe) && pe.Severity == "ERROR":
		return err
	}
	return fmt.Errorf("%w: %w", ErrOutcomeUnknown, err)
}

// IsOutcomeUnknown reports whether err leaves a write's outcome unknown.
func IsOutcomeUnknown(err error) bool { return errors.Is(err, ErrOutcomeUnknown) }

// IsNotConfirmed reports whether err is a read held back because what it
// read is not yet known to be on a synchronous standby (Confirm).
func IsNotConfirmed(err error) bool { return errors.Is(err, ErrNotConfirmed) }

// execDetached runs a statement that commits on its own (outside a
// transaction) detached from ctx, like a COMMIT.
func (db *DB) execDetached(ctx context.Context, query string, args []any) (pgconn.CommandTag, error) {
	c, err := db.pool.Acquire(ctx)
	if err != nil {
		return pgconn.CommandTag{}, err
	}
	var tag pgconn.CommandTag
	err = db.detached(ctx, c.Conn().PgConn(), func(ctx context.Context) error {
		var err error
		tag, err = c.Exec(ctx, query, args...)
		return err
	}, c.Release)
	if err != nil {
		return pgconn.CommandTag{}, err
	}
	return tag, nil
}

// CommitRow runs one statement that commits on its own and returns a row
// (an INSERT … RETURNING), detached from ctx like Exec, scanning the row
// into dest; ErrNoRows when it returned none (an INSERT … ON CONFLICT DO
// NOTHING that found the row there). One round trip for a write that
// needs no transaction around it.
func (db *DB) CommitRow(ctx context.Context, dest []any, query string, args ...any) error {
	c, err := db.pool.Acquire(ctx)
	if err != nil {
		return err
	}
	var scanErr error
	err = db.detached(ctx, c.Conn().PgConn(), func(ctx context.Context) error {
		scanErr = c.QueryRow(ctx, query, args...).Scan(dest...)
		if errors.Is(scanErr, ErrNoRows) {
			return nil
		}
		return scanErr
	}, c.Release)
	if err != nil {
		return err
	}
	return scanErr
}

// Confirm returns once every row this process has read so far is on a
// synchronous standby (at once where there is none), or ErrNotConfirmed when ctx ends first or ConfirmWait has
// passed, whichever comes first. An answer that rests on a row read back
// calls it before it is sent; ErrNotConfirmed is answered 409
// idempotency_in_progress with Retry-After (kithttp), so a read held back
// by stalled standbys answers within ConfirmWait, well inside its route's
// timeout, never with a 500 (DESIGN §6).
//
// One statement, one round trip: it asks whether the synchronous standbys
// a commit waits for (caughtUpSQL) have already flushed the primary's WAL
// up to where it is inserted now (pg_stat_replication's flush_lsn against
// pg_current_wal_insert_lsn()).
// Every commit a read saw is before that point, so when nothing has been
// written since the standbys caught up (reads with no write beside them),
// the statement writes nothing and its commit waits for nobody. Otherwise
// (the standbys are behind, or the role may not read flush_lsn: it needs
// pg_read_all_stats or pg_monitor) the same statement writes WAL under a
// transaction id, a transactional logical decoding message that no table
// keeps and any role may write, and its commit waits for the standby: the
// only kind of commit PostgreSQL replicates synchronously. Concurrent
// callers share one round, and a caller joins the next one to start, never
// one already running (which may have begun before its read).
func (db *DB) Confirm(ctx context.Context) error {
	r := db.barrier.join(db)
	wait := time.NewTimer(db.confirmWait)
	defer wait.Stop()
	select {
	case <-wait.C:
		return fmt.Errorf("%w: not within %s", ErrNotConfirmed, db.confirmWait)
	case <-r.done:
		if r.err != nil {
			return fmt.Errorf("%w: %w", ErrNotConfirmed, r.err)
		}
		return nil
	case <-ctx.Done():
		return fmt.Errorf("%w: %w", ErrNotConfirmed, ctx.Err())
	}
}

// ReadBack is err, the outcome of a read, or when the read found its rows,
// Confirm's: for a store's read that an answer rests on (a status, a
// record fetched by id). Not finding a row needs no confirmation.
func (db *DB) ReadBack(ctx context.Context, err error) error {
	if err != nil {
		return err
	}
	return db.Confirm(ctx)
}

// barrier runs the confirmations: at most one at a time, and one waiting
// to start that every new caller joins.
type barrier struct {
	mu      sync.Mutex
	running bool
	next    *round
}

type round struct {
	done chan struct{}
	err  error
}

func (b *barrier) join(db *DB) *round {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.next == nil {
		b.next = &round{done: make(chan struct{})}
	}
	r := b.next
	if !b.running {
		b.start(db)
	}
	return r
}

// start runs the waiting round (b.mu held).
func (b *barrier) start(db *DB) {
	r := b.next
	b.next, b.running = nil, true
	go func() {
		r.err = db.confirmOnce()
		close(r.done)
		b.mu.Lock()
		defer b.mu.Unlock()
		b.running = false
		if b.next != nil {
			b.start(db)
		}
	}()
}

// confirmRound bounds one confirmation: a primary that stopped answering
// (a cut network) must not hold every later confirmation behind it. The
// transaction is empty, so ending it early loses nothing.
const confirmRound = 15 * time.Second

func (db *DB) confirmOnce() error {
	ctx, cancel := context.WithTimeout(context.Background(), confirmRound)
	defer cancel()
	c, err := db.pool.Acquire(ctx)
	if err != nil {
		return err
	}
	defer c.Release()
	stop := db.cancels.watch(c.Conn().PgConn())
	_, err = c.Exec(ctx, ConfirmSQL)
	if cancelled := stop(); err == nil && cancelled {
		err = errSyncWaitCancelled
	}
	return err
}

// caughtUpSQL is true when the synchronous standbys a commit waits for
// have flushed the WAL up to the primary's insert position now: every
// 'sync' one (FIRST n, or a plain list), or, with ANY n, at least n of the
// 'quorum' ones (one stalled standby of ANY 1 (s1, s2) does not hold the
// others' confirmation back). NULL (false) when no synchronous standby is
// streaming, when the role may not read pg_stat_replication's columns, or
// when synchronous_standby_names is not read as above.
const caughtUpSQL = `SELECT CASE WHEN bool_or(sync_state = 'sync')
  THEN min(flush_lsn) FILTER (WHERE sync_state = 'sync') >= pg_current_wal_insert_lsn()
  ELSE count(*) FILTER (WHERE flush_lsn >= pg_current_wal_insert_lsn())
    >= substring(current_setting('synchronous_standby_names') FROM '^\s*[Aa][Nn][Yy]\s+([0-9]+)\s*\(')::int END
FROM pg_stat_replication WHERE sync_state IN ('sync', 'quorum')`

// ConfirmSQL confirms in one round trip: it writes nothing when no
// synchronous standby is configured (one node, as make run and compose
// run it: a commit another session sees is already flushed, since every
// commit waits for its local flush before it is visible, and there is
// nobody else to wait for) or when the standbys are caught up
// (caughtUpSQL true), else a transactional message whose commit waits for
// them. CASE evaluates only the branch it takes, and the message is
// volatile, so PostgreSQL never writes it ahead of time. (The benchmarks
// send it too, as the floor of a confirmed read.)
const ConfirmSQL = `SELECT CASE WHEN current_setting('synchronous_standby_names') = '' OR coalesce((` + caughtUpSQL + `), false) THEN NULL ELSE pg_logical_emit_message(true, 'partnerapi.confirm', '') END`

// RoundTimeout bounds a worker's round (Claim): a replica that stops in
// the middle of one (a frozen process) holds its rows' locks no longer
// than this; PostgreSQL then ends its transaction, and another replica's
// next round claims them.
const RoundTimeout = 15 * time.Second

// Claim is one round of a worker that moves records whether or not
// anyone reads them (DESIGN §3): in one transaction, it selects with query
// (a SELECT … FOR UPDATE SKIP LOCKED of the rows due, so two replicas
// never work one row and none waits on another) the rows scan reads, hands
// them to work, which writes through tx what each came to, and commits.
// It returns how many rows it claimed.
func Claim[R any](ctx context.Context, db *DB, query string, args []any, scan func(pgx.Row) (R, error),
	work func(ctx context.Context, tx pgx.Tx, due []R) error) (int, error) {
	ctx, cancel := context.WithTimeout(ctx, RoundTimeout)
	defer cancel()
	n := 0
	err := db.Tx(ctx, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, "SET LOCAL idle_in_transaction_session_timeout = "+strconv.Itoa(int(RoundTimeout/time.Millisecond))); err != nil {
			return err
		}
		rows, err := tx.Query(ctx, query, args...)
		if err != nil {
			return err
		}
		due, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (R, error) { return scan(row) })
		if err != nil || len(due) == 0 {
			return err
		}
		n = len(due)
		return work(ctx, tx, due)
	})
	return n, err
}

// Alone runs fn in a savepoint of tx: what fn wrote stays when it returns
// nil, and is undone alone when it fails, so one record's failure does not
// undo the others of a worker's round (DESIGN §3, "Rows fail alone").
//
// A failure of fn undone is the record's alone. A failure that leaves the
// transaction in doubt (the savepoint not opened, not released or not
// undone: ctx ended, the connection lost) is the round's: Alone
// returns it wrapped in ErrInDoubt, and the caller must end the
// transaction with it. (Tx's COMMIT runs whatever happens to ctx: a
// closure that carried on past such a failure would commit what the
// savepoint left half done.)
func Alone(ctx context.Context, tx pgx.Tx, fn func(tx pgx.Tx) error) error {
	sp, err := tx.Begin(ctx)
	if err != nil {
		return inDoubt(err)
	}
	if err := fn(sp); err != nil {
		if rerr := sp.Rollback(ctx); rerr != nil {
			return inDoubt(errors.Join(err, rerr))
		}
		return err // undone: the transaction goes on
	}
	if err := sp.Commit(ctx); err != nil {
		return inDoubt(err)
	}
	return nil
}

// ErrInDoubt is a failure Alone cannot keep to its record: the
// transaction must end with it.
var ErrInDoubt = errors.New("database: the transaction cannot go on")

func inDoubt(err error) error { return fmt.Errorf("%w: %w", ErrInDoubt, err) }

// LeaseSQL is the claim of a worker's round on table: up to $2 rows whose
// next_check_at is due at $1, oldest due first, skipping those another
// replica holds, their next_check_at pushed to $3 (the lease: another
// replica leaves them alone until then, and a replica that dies leaves
// them due again then), returning columns.
func LeaseSQL(table, columns string) string {
	return `UPDATE ` + table + ` SET next_check_at = $3 WHERE id IN (
		SELECT id FROM ` + table + ` WHERE next_check_at <= $1 ORDER BY next_check_at LIMIT $2 FOR UPDATE SKIP LOCKED)
	RETURNING ` + columns
}

// Round is one round of a worker that calls a provider, in the three
// steps of DESIGN §3 ("No transaction spans a provider call"):
//
//  1. claim: lease (a LeaseSQL statement, with args now, limit and the
//     lease's end) runs on its own and commits: the rows are this
//     replica's until the lease ends, and no lock is held after it;
//  2. call: work decides what each row comes to, calling the provider,
//     with no transaction open, so a partner's write to those rows never
//     waits for the provider;
//  3. apply: one transaction writes each row's outcome (write) in a
//     savepoint of its own, and hands settled each row with how its write
//     went: a row whose write failed is undone alone (settled may write
//     its backoff in tx), and every other row of the round is written.
//
// It returns how many rows it claimed.
func Round[R, C any](ctx context.Context, db *DB, lease string, args []any, scan func(pgx.Row) (R, error),
	work func(context.Context, []R) []C, write func(ctx context.Context, tx pgx.Tx, r R, c C) error,
	settled func(ctx context.Context, tx pgx.Tx, r R, err error) error) (int, error) {
	rows, err := db.pool.Query(ctx, lease, args...)
	if err != nil {
		return 0, err
	}
	due, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (R, error) { return scan(row) })
	if err != nil || len(due) == 0 {
		return 0, err
	}
	outcomes := work(ctx, due)
	actx, cancel := context.WithTimeout(context.WithoutCancel(ctx), RoundTimeout)
	defer cancel()
	err = db.Tx(actx, func(tx pgx.Tx) error {
		for i, c := range outcomes {
			err := Alone(actx, tx, func(tx pgx.Tx) error { return write(actx, tx, due[i], c) })
			if errors.Is(err, ErrInDoubt) {
				return err
			}
			if err := settled(actx, tx, due[i], err); err != nil {
				return err
			}
		}
		return nil
	})
	return len(due), err
}
