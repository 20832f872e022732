package consent

import (
	"context"
	"embed"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/partnerpay/api/pkg/database"
	"github.com/partnerpay/api/pkg/environment"
	"github.com/partnerpay/api/pkg/events"
	"github.com/partnerpay/api/pkg/hostedlink"
)

//go:embed migrations
var migrations embed.FS

// Migrations is the consent service's schema.
var Migrations = database.MigrationsIn("consent", migrations)

// Feed is the service's events feed (DESIGN §9), in tables of its own.
var Feed = events.For("consent")

// ErrNotFound is a record the store does not have.
var ErrNotFound = errors.New("not found")

// Errors of Return: the attempt was redeemed before, or is no longer its
// session's current one.
var (
	ErrUsed       = hostedlink.ErrUsed
	ErrSuperseded = hostedlink.ErrSuperseded
)

// DBStore keeps sessions and attempts in the system of record.
type DBStore struct {
	db  *database.DB
	env environment.Name // of the events' objects
}

var _ Store = (*DBStore)(nil)

// NewStore returns the store on db, of sessions in env. Every change of a
// session's state writes its event (pkg/events) in the transaction of the
// change: the session as its status call answers it.
func NewStore(db *database.DB, env environment.Name) *DBStore { return &DBStore{db: db, env: env} }

// event is r's event: its state, from previous, at at.
func (s *DBStore) event(ctx context.Context, tx pgx.Tx, r Record, previous string, at time.Time) error {
	e, err := events.New(s.env, r.Owner, "consent."+r.State, r.ID, at, statusOf(r), previous)
	if err != nil {
		return err
	}
	return Feed.Write(ctx, tx, e)
}

// Create writes a new session.
func (s *DBStore) Create(ctx context.Context, r Record) error {
	return s.db.Tx(ctx, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `INSERT INTO consent_sessions (id, key_id, account_id, provider_customer_id, state, created_at)
			VALUES ($1, $2, $3, $4, $5, $6)`, r.ID, r.Owner, r.AccountID, r.ProviderCustomerID, r.State, r.CreatedAt); err != nil {
			return err
		}
		return s.event(ctx, tx, r, "", r.CreatedAt)
	})
}

const sessionColumns = `id, key_id, account_id, provider_customer_id, state, COALESCE(result, ''), COALESCE(current_attempt, ''), created_at, returned_at`

func scanSession(row pgx.Row) (Record, error) {
	var r Record
	var returned *time.Time
	err := row.Scan(&r.ID, &r.Owner, &r.AccountID, &r.ProviderCustomerID, &r.State, &r.Result, &r.CurrentAttempt, &r.CreatedAt, &returned)
	if errors.Is(err, database.ErrNoRows) {
		return r, ErrNotFound
	}
	if returned != nil {
		r.ReturnedAt = *returned
	}
	return r, err
}

// Get reads a session, confirmed on the standby (an answer rests on it).
func (s *DBStore) Get(ctx context.Context, id string) (Record, error) {
	r, err := scanSession(s.db.QueryRow(ctx, `SELECT `+sessionColumns+` FROM consent_sessions WHERE id = $1`, id))
	return r, s.db.ReadBack(ctx, err)
}

// Mint records a as its session's current attempt: every earlier link of
// the session stops counting, in the same transaction.
func (s *DBStore) Mint(ctx context.Context, a Attempt) error {
	return s.db.Tx(ctx, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `INSERT INTO consent_attempts (id, session_id, provider_session_id, return_url, created_at)
			VALUES ($1, $2, $3, NULLIF($4, ''), $5)`, a.ID, a.SessionID, a.ProviderSessionID, a.ReturnURL, a.CreatedAt); err != nil {
			return fmt.Errorf("insert attempt: %w", err)
		}
		tag, err := tx.Exec(ctx, `UPDATE consent_sessions SET current_attempt = $2 WHERE id = $1`, a.SessionID, a.ID)
		if err == nil && tag.RowsAffected() == 0 {
			err = ErrNotFound
		}
		return err
	})
}

// Attempt reads an attempt.
func (s *DBStore) Attempt(ctx context.Context, id string) (Attempt, error) {
	var a Attempt
	var used *time.Time
	err := s.db.QueryRow(ctx, `SELECT id, session_id, provider_session_id, COALESCE(return_url, ''), created_at, used_at
		FROM consent_attempts WHERE id = $1`, id).Scan(&a.ID, &a.SessionID, &a.ProviderSessionID, &a.ReturnURL, &a.CreatedAt, &used)
	if errors.Is(err, database.ErrNoRows) {
		return a, ErrNotFound
	}
	a.Used = used != nil
	return a, err
}

// Return redeems attempt a, once, while it is its session's current one,
// and records result as the session's outcome if the session had none:
// the first return is final. It answers the session as it then is.
func (s *DBStore) Return(ctx context.Context, a Attempt, result string, at time.Time) (Record, error) {
	var r Record
	err := s.db.Tx(ctx, func(tx pgx.Tx) error {
		tag, err := tx.Exec(ctx, `UPDATE consent_attempts SET used_at = $2 WHERE id = $1 AND used_at IS NULL`, a.ID, at)
		if err != nil {
			return fmt.Errorf("redeem attempt: %w", err)
		}
		if tag.RowsAffected() == 0 {
			return ErrUsed
		}
		if r, err = scanSession(tx.QueryRow(ctx, `SELECT `+sessionColumns+` FROM consent_sessions WHERE id = $1`, a.SessionID)); err != nil {
			return err
		}
		if r.CurrentAttempt != a.ID {
			return ErrSuperseded
		}
		if r.State == StateReturned {
			return nil
		}
		if _, err := tx.Exec(ctx, `UPDATE consent_sessions SET state = $2, result = $3, returned_at = $4 WHERE id = $1 AND state = $5`,
			r.ID, StateReturned, result, at, StatePending); err != nil {
			return fmt.Errorf("mark session returned: %w", err)
		}
		r.State, r.Result, r.ReturnedAt = StateReturned, result, at
		return s.event(ctx, tx, r, StatePending, at)
	})
	return r, err
}
