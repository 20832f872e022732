package store

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/partnerpay/api/pkg/database"
	"github.com/partnerpay/api/pkg/lifecycle"
	"github.com/partnerpay/api/pkg/worker"
	"github.com/partnerpay/api/services/payout/internal/record"
)

// The store's side of the worker's queues (DESIGN §3, "No transaction spans
// a provider call"): a queue that calls the provider claims its due
// payouts in one short statement that pushes their due time forward as a
// lease (ClaimHandOvers, ClaimReconciles), the worker calls the provider
// with no lock held, and each answer is applied in a short transaction of
// its own that reads the payout as it then stands (Update); a queue that
// calls nobody (expiries, the provider's changes, sandbox refunds) works
// its round in one transaction, each payout in a savepoint of its own, so
// one that the database refuses is backed off alone and the others move.

// claimSQL claims the payouts whose column is due at $1: their column is
// pushed to $2 (the lease), oldest due first, skipping those another
// replica holds. One statement, committed on its own.
func claimSQL(column string) string {
	return `UPDATE payouts p SET ` + column + ` = $2 WHERE p.id IN (
		SELECT id FROM payouts WHERE ` + column + ` <= $1 ORDER BY ` + column + ` LIMIT $3 FOR UPDATE SKIP LOCKED)
	RETURNING ` + payoutColumns
}

var (
	claimHandOversSQL  = claimSQL("handover_next_at")
	claimReconcilesSQL = claimSQL("reconcile_at")
)

// ClaimHandOvers claims up to limit payouts whose hand-over is due at now,
// leasing each until until: no other replica calls the provider for them
// meanwhile, and a replica that dies leaves them due again then.
func (s *Store) ClaimHandOvers(ctx context.Context, now, until time.Time, limit int) ([]record.StoredPayout, error) {
	return s.claim(ctx, claimHandOversSQL, now, until, limit)
}

// ClaimReconciles claims up to limit payouts due to be asked about on
// their own at now, leasing each until until.
func (s *Store) ClaimReconciles(ctx context.Context, now, until time.Time, limit int) ([]record.StoredPayout, error) {
	return s.claim(ctx, claimReconcilesSQL, now, until, limit)
}

func (s *Store) claim(ctx context.Context, query string, now, until time.Time, limit int) ([]record.StoredPayout, error) {
	rows, err := s.db.Query(ctx, query, now, until, limit)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, func(row pgx.CollectableRow) (record.StoredPayout, error) { return scanPayout(row) })
}

// Failed backs payout id off alone after its n-th failure in a row in a
// queue: retry_at for the expiry queue, and its hand-over or
// reconciliation, whichever it is in, pushed to the same time.
func (s *Store) Failed(ctx context.Context, id string, n int, at time.Time) error {
	_, err := s.db.Exec(ctx, failedSQL, id, at)
	return err
}

const failedSQL = `UPDATE payouts SET failures = failures + 1, retry_at = $2::timestamptz,
		handover_next_at = CASE WHEN handover_next_at IS NULL THEN NULL ELSE $2::timestamptz END,
		reconcile_at = CASE WHEN reconcile_at IS NULL THEN NULL ELSE $2::timestamptz END
	WHERE id = $1`

// ExpireDue closes the deposit windows due at now (the database's clock),
// up to limit, oldest first, skipping what another replica holds and what
// is backed off: each payout is expired in a savepoint of its own, with
// its event, and one the database refuses is backed off alone (failed is
// told of it). It returns how many it claimed.
// SeenHold is how long past its window (or past the transfer, seen after
// it) a transfer seen on its way to a payout (mined, its confirmations not
// all there yet) holds the payout's expiry: one mined before the window
// closed is in time, however long its confirmations take; one that
// vanished (a reorganisation) lets the payout expire after it.
const SeenHold = 10 * time.Minute

// SeenOnTheWay notes, at at, that a transfer to each of addresses
// (EIP-55) was mined and waits for its confirmations: a payout awaiting
// its deposit there is not expired for SeenHold after (ExpireDue).
func (s *Store) SeenOnTheWay(ctx context.Context, addresses []string, at time.Time) error {
	if len(addresses) == 0 {
		return nil
	}
	_, err := s.db.Exec(ctx, `UPDATE payouts SET deposit_seen_at = $2 WHERE deposit_address = ANY($1)
		AND status = 'awaiting_deposit' AND handover_at IS NULL AND deposit_seen_at IS NULL`, addresses, at)
	return err
}

func (s *Store) ExpireDue(ctx context.Context, now time.Time, limit int, failed func(id string, n int, err error)) (int, error) {
	var moved []record.Change
	n, err := database.Claim(ctx, s.db, `SELECT p.id, p.failures FROM payouts p
		WHERE p.status = 'awaiting_deposit' AND p.handover_at IS NULL AND p.deposit_expires_at <= $1
			AND (p.retry_at IS NULL OR p.retry_at <= $1) AND (p.deposit_seen_at IS NULL OR greatest(p.deposit_seen_at, p.deposit_expires_at) <= $3)
		ORDER BY p.deposit_expires_at LIMIT $2 FOR UPDATE SKIP LOCKED`, []any{now, limit, now.Add(-SeenHold)}, scanDue,
		func(ctx context.Context, tx pgx.Tx, due []dueRow) error {
			for _, d := range due {
				c := record.Change{Steps: []record.Step{{To: lifecycle.PayoutExpired, At: now}}}
				err := database.Alone(ctx, tx, func(tx pgx.Tx) error { return s.apply(ctx, tx, d.id, lifecycle.PayoutAwaitingDeposit, c) })
				if err == nil {
					moved = append(moved, c)
					continue
				}
				if errors.Is(err, database.ErrInDoubt) {
					return err
				}
				failed(d.id, d.failures+1, err)
				if _, err := tx.Exec(ctx, failedSQL, d.id, now.Add(worker.Backoff(d.failures+1, time.Hour))); err != nil {
					return err
				}
			}
			return nil
		})
	if err == nil {
		s.counted(moved...)
	}
	return n, err
}

// dueRow is a payout claimed by id, with its failures in a row.
type dueRow struct {
	id       string
	failures int
}

func scanDue(row pgx.Row) (dueRow, error) {
	var d dueRow
	return d, row.Scan(&d.id, &d.failures)
}

// FeedChange is one of the provider's changes, for the payout PayoutID
// (its reference at the provider: our id).
type FeedChange struct {
	ID       string
	PayoutID string
}

// ErrLeaseLost is a page of the provider's changes whose lease another
// replica took: nothing of it was applied, and the place did not move.
var ErrLeaseLost = errors.New("payout: the provider feed's lease was taken by another replica")

// LeaseFeed takes the provider's changes feed for owner until until,
// unless another replica holds it (ok false), and answers the place: the
// id of the last change applied ("" before the first).
func (s *Store) LeaseFeed(ctx context.Context, owner string, now, until time.Time) (after string, ok bool, err error) {
	err = s.db.QueryRow(ctx, `UPDATE payout_provider_feed SET lease_owner = $1, leased_until = $3
		WHERE provider = 'bank' AND (leased_until IS NULL OR leased_until <= $2) RETURNING after`, owner, now, until).Scan(&after)
	if errors.Is(err, database.ErrNoRows) {
		return "", false, nil
	}
	return after, err == nil, err
}

// ApplyChanges applies a page of the provider's changes in one
// transaction, each once (by its id) in a savepoint of its own, and moves
// the feed's place to next, while owner still holds the lease (else
// ErrLeaseLost). decide makes of each change what it does to its payout,
// locked, as it stands. A change the database refuses is undone alone and
// its payout backed off to be asked about on its own (failed is told of
// it): nothing of the provider's word is lost. It returns the changes
// that moved a payout.
func (s *Store) ApplyChanges(ctx context.Context, owner, next string, at time.Time, changes []FeedChange,
	decide func(record.Record, FeedChange) (record.Change, error), failed func(FeedChange, int, error)) (int, error) {
	var moved []record.Change
	err := s.db.Tx(ctx, func(tx pgx.Tx) error {
		tag, err := tx.Exec(ctx, `UPDATE payout_provider_feed SET after = $2, updated_at = $3, lease_owner = NULL, leased_until = NULL
			WHERE provider = 'bank' AND lease_owner = $1`, owner, next, at)
		switch {
		case err != nil:
			return err
		case tag.RowsAffected() == 0:
			return ErrLeaseLost
		}
		for _, ch := range changes {
			var c record.Change
			failures := 0
			err := database.Alone(ctx, tx, func(tx pgx.Tx) error {
				tag, err := tx.Exec(ctx, `INSERT INTO payout_provider_changes (change_id, payout_id, applied_at) VALUES ($1, $2, $3)
					ON CONFLICT (change_id) DO NOTHING`, ch.ID, ch.PayoutID, at)
				if err != nil || tag.RowsAffected() == 0 {
					return err // applied already
				}
				r, err := byID(ctx, tx, ch.PayoutID, " FOR UPDATE OF p")
				switch {
				case errors.Is(err, ErrNotFound):
					return nil // not one of ours
				case err != nil:
					return err
				}
				failures = r.Failures
				if c, err = decide(r, ch); err != nil {
					return err
				}
				return s.apply(ctx, tx, r.ID, r.Status, c)
			})
			if err == nil {
				moved = append(moved, c)
				continue
			}
			if errors.Is(err, database.ErrInDoubt) {
				return err
			}
			failed(ch, failures+1, err)
			// Asked about on its own, later: the provider's word is read
			// again then.
			if _, err := tx.Exec(ctx, `UPDATE payouts SET failures = failures + 1, retry_at = $2::timestamptz,
					reconcile_at = CASE WHEN status IN ('awaiting_deposit', 'processing', 'completed') THEN $2::timestamptz END WHERE id = $1`,
				ch.PayoutID, at.Add(worker.Backoff(failures+1, time.Hour))); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return 0, err
	}
	s.counted(moved...)
	n := 0
	for _, c := range moved {
		if len(c.Steps) > 0 {
			n++
		}
	}
	return n, nil
}

// ForgetChanges deletes up to a batch of the applied changes' ids older
// than before: the feed's place is past them for good.
func (s *Store) ForgetChanges(ctx context.Context, before time.Time) (int, error) {
	tag, err := s.db.Exec(ctx, `DELETE FROM payout_provider_changes WHERE change_id IN (
		SELECT change_id FROM payout_provider_changes WHERE applied_at < $1 ORDER BY applied_at LIMIT 1000)`, before)
	if err != nil {
		return 0, fmt.Errorf("forget applied changes: %w", err)
	}
	return int(tag.RowsAffected()), nil
}

// ReleaseFeed gives the provider feed's lease back without moving its
// place (the provider did not answer).
func (s *Store) ReleaseFeed(ctx context.Context, owner string) error {
	_, err := s.db.Exec(ctx, `UPDATE payout_provider_feed SET lease_owner = NULL, leased_until = NULL WHERE provider = 'bank' AND lease_owner = $1`, owner)
	return err
}
