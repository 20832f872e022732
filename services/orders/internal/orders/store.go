package orders

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
	"github.com/partnerpay/api/pkg/idempotency"
	"github.com/partnerpay/api/pkg/listing"
)

//go:embed migrations
var migrations embed.FS

// Migrations is the order service's schema.
var Migrations = database.MigrationsIn("orders", migrations)

// Feed is the service's events feed (DESIGN §9), in tables of its own.
var Feed = events.For("orders")

// DBStore keeps orders in the system of record. The schema holds their
// rules: terms never change, a status only moves forward, completed,
// failed and expired are final.
type DBStore struct {
	db  *database.DB
	env environment.Name // of the events' objects
}

var _ Store = (*DBStore)(nil)

// NewStore returns the store on db, of orders in env. Every status change
// of an order writes its event (pkg/events) in the transaction of the
// change: the order as its status call answers it.
func NewStore(db *database.DB, env environment.Name) *DBStore { return &DBStore{db: db, env: env} }

// event is r's event: its move to its status from previous.
func (s *DBStore) event(r Record, previous string) (events.Event, error) {
	return events.New(s.env, r.Owner, "order."+r.Status, r.ID, r.StatusAt, statusOf(r), previous)
}

// Create writes r and keeps answer with it; a retry after a crash writes
// the same id (idempotency.NewID) and finds its own row.
func (s *DBStore) Create(ctx context.Context, r Record, answer Order) error {
	return s.db.Tx(ctx, func(tx pgx.Tx) error {
		tag, err := tx.Exec(ctx, `INSERT INTO orders (id, key_id, direction, status, crypto_currency, chain, fiat_currency, country,
				crypto_amount, fiat_amount, wallet_address, deposit_address, provider_order_id, expires_at, created_at, reference,
				status_at, next_check_at)
			VALUES ($1, $2, $3, $4, $5, $6, $7, $8, NULLIF($9, ''), NULLIF($10, ''), $11, NULLIF($12, ''), NULLIF($13, ''), $14, $15, NULLIF($16, ''),
				$15, $15) ON CONFLICT (id) DO NOTHING`,
			r.ID, r.Owner, r.Direction, r.Status, r.CryptoCurrency, r.Chain, r.FiatCurrency, r.Country,
			r.CryptoAmount, r.FiatAmount, r.WalletAddress, r.DepositAddress, r.ProviderID, r.ExpiresAt, r.CreatedAt, r.Reference)
		if err != nil {
			return fmt.Errorf("insert order: %w", err)
		}
		if tag.RowsAffected() == 1 { // not a retry finding its own row
			r.StatusAt = r.CreatedAt
			e, err := s.event(r, "")
			if err != nil {
				return err
			}
			if err := Feed.Write(ctx, tx, e); err != nil {
				return err
			}
		}
		return idempotency.Answer(ctx, tx, answer)
	})
}

const columns = `id, key_id, direction, status, crypto_currency, chain, fiat_currency, country, COALESCE(crypto_amount, ''),
	COALESCE(fiat_amount, ''), wallet_address, COALESCE(deposit_address, ''), COALESCE(payment_method, ''), COALESCE(tx_hash, ''),
	COALESCE(failure_reason, ''), COALESCE(provider_order_id, ''), expires_at, created_at, COALESCE(reference, ''), status_at`

func scan(row pgx.Row) (Record, error) {
	var r Record
	err := row.Scan(&r.ID, &r.Owner, &r.Direction, &r.Status, &r.CryptoCurrency, &r.Chain, &r.FiatCurrency, &r.Country,
		&r.CryptoAmount, &r.FiatAmount, &r.WalletAddress, &r.DepositAddress, &r.PaymentMethod, &r.TxHash, &r.FailureReason,
		&r.ProviderID, &r.ExpiresAt, &r.CreatedAt, &r.Reference, &r.StatusAt)
	if errors.Is(err, database.ErrNoRows) {
		return r, ErrNotFound
	}
	return r, err
}

// Get reads an order, confirmed on the standby (an answer rests on it).
func (s *DBStore) Get(ctx context.Context, id string) (Record, error) {
	r, err := scan(s.db.QueryRow(ctx, `SELECT `+columns+` FROM orders WHERE id = $1`, id))
	return r, s.db.ReadBack(ctx, err)
}

// predecessors are the statuses an order may move to each status from.
var predecessors = map[string][]string{
	StatusAwaitingPayment: {StatusAwaitingPayment},
	StatusAwaitingDeposit: {StatusAwaitingDeposit},
	StatusProcessing:      {StatusAwaitingPayment, StatusAwaitingDeposit, StatusProcessing},
	StatusCompleted:       {StatusAwaitingPayment, StatusAwaitingDeposit, StatusProcessing},
	StatusFailed:          {StatusAwaitingPayment, StatusAwaitingDeposit, StatusProcessing},
	StatusExpired:         {StatusAwaitingPayment, StatusAwaitingDeposit},
}

// Advance moves the order to p's status from one that may precede it,
// keeping what it knew (a payment method, a hash) where p says nothing;
// whoever loses a race reads the winner's order. The worker asks about it
// again at once (a final order never again).
func (s *DBStore) Advance(ctx context.Context, id string, p Progress, at time.Time) (Record, error) {
	var r Record
	err := s.db.Tx(ctx, func(tx pgx.Tx) error {
		if _, err := s.advance(ctx, tx, id, p, at); err != nil {
			return err
		}
		var err error
		r, err = scan(tx.QueryRow(ctx, `SELECT `+columns+` FROM orders WHERE id = $1`, id))
		return err
	})
	return r, err
}

// advance moves order id as Advance says, in tx, with its event when its
// status changed; it reports whether the order moved.
func (s *DBStore) advance(ctx context.Context, tx pgx.Tx, id string, p Progress, at time.Time) (bool, error) {
	from := predecessors[p.Status]
	if len(from) == 0 {
		return false, fmt.Errorf("advance order %s: unknown status", id)
	}
	for len(from) < 3 {
		from = append(from, from[0])
	}
	var previous string
	switch err := tx.QueryRow(ctx, `SELECT status FROM orders WHERE id = $1 FOR UPDATE`, id).Scan(&previous); {
	case errors.Is(err, database.ErrNoRows):
		return false, ErrNotFound
	case err != nil:
		return false, fmt.Errorf("advance order: %w", err)
	}
	tag, err := tx.Exec(ctx, `UPDATE orders SET status = $2, payment_method = COALESCE(NULLIF($3, ''), payment_method),
			tx_hash = COALESCE(NULLIF($4, ''), tx_hash), failure_reason = NULLIF($5, ''),
			status_at = CASE WHEN status = $2 THEN status_at ELSE $9 END,
			next_check_at = CASE WHEN $2 IN ('completed', 'failed', 'expired') THEN NULL ELSE $9 END
		WHERE id = $1 AND status IN ($6, $7, $8)`,
		id, p.Status, p.PaymentMethod, p.TxHash, p.FailureReason, from[0], from[1], from[2], at)
	if err != nil {
		return false, fmt.Errorf("advance order: %w", err)
	}
	if tag.RowsAffected() != 1 {
		return false, nil
	}
	if previous != p.Status {
		r, err := scan(tx.QueryRow(ctx, `SELECT `+columns+` FROM orders WHERE id = $1`, id))
		if err != nil {
			return false, err
		}
		e, err := s.event(r, previous)
		if err != nil {
			return false, err
		}
		if err := Feed.Write(ctx, tx, e); err != nil {
			return false, err
		}
	}
	return true, nil
}

// Check is what the worker makes of a due order: a move (Progress), and
// when it is next asked about (Next; nil: never again).
type Check struct {
	Progress *Progress
	Next     *time.Time
}

// Due is the worker's round on the orders due at now (database.Round):
// claimed in one short statement with a lease until until, worked by work
// with no transaction open (its calls to the card provider hold no lock),
// and each written in a savepoint of its own; each order is handed to
// failed with how its write went (nil: it moved), and one that failed is
// backed off alone, to when failed says, while the others are written.
// It returns how many it claimed.
func (s *DBStore) Due(ctx context.Context, now, until time.Time, limit int, work func(ctx context.Context, due []Record) []Check,
	failed func(id string, err error) time.Time) (int, error) {
	return database.Round(ctx, s.db, database.LeaseSQL("orders", columns), []any{now, limit, until}, scan, work,
		func(ctx context.Context, tx pgx.Tx, r Record, c Check) error {
			if c.Progress != nil {
				if _, err := s.advance(ctx, tx, r.ID, *c.Progress, now); err != nil {
					return err
				}
				if Final(c.Progress.Status) {
					return nil // advance took it out of the queue
				}
			}
			_, err := tx.Exec(ctx, `UPDATE orders SET next_check_at = $2 WHERE id = $1`, r.ID, c.Next)
			return err
		},
		func(ctx context.Context, tx pgx.Tx, r Record, err error) error {
			next := failed(r.ID, err)
			if err == nil {
				return nil
			}
			_, e := tx.Exec(ctx, `UPDATE orders SET next_check_at = $2 WHERE id = $1`, r.ID, next)
			return e
		})
}

// Mint records l as its order's current link: every earlier link of the
// order stops counting, in the same transaction.
func (s *DBStore) Mint(ctx context.Context, l LinkRecord) error {
	return s.db.Tx(ctx, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `UPDATE order_links SET is_current = false WHERE order_id = $1 AND is_current`, l.OrderID); err != nil {
			return fmt.Errorf("supersede links: %w", err)
		}
		_, err := tx.Exec(ctx, `INSERT INTO order_links (id, order_id, provider_session_id, return_url, is_current, created_at)
			VALUES ($1, $2, $3, NULLIF($4, ''), true, $5)`, l.ID, l.OrderID, l.ProviderSessionID, l.ReturnURL, l.CreatedAt)
		return err
	})
}

// Link reads a link.
func (s *DBStore) Link(ctx context.Context, id string) (LinkRecord, error) {
	var l LinkRecord
	var used *time.Time
	err := s.db.QueryRow(ctx, `SELECT id, order_id, provider_session_id, COALESCE(return_url, ''), is_current, created_at, used_at
		FROM order_links WHERE id = $1`, id).Scan(&l.ID, &l.OrderID, &l.ProviderSessionID, &l.ReturnURL, &l.Current, &l.CreatedAt, &used)
	if errors.Is(err, database.ErrNoRows) {
		return l, ErrNotFound
	}
	l.Used = used != nil
	return l, err
}

// Redeem uses link id once, while it is its order's current one.
func (s *DBStore) Redeem(ctx context.Context, id string, at time.Time) error {
	tag, err := s.db.Exec(ctx, `UPDATE order_links SET used_at = $2 WHERE id = $1 AND used_at IS NULL AND is_current`, id, at)
	if err != nil || tag.RowsAffected() == 1 {
		return err
	}
	l, err := s.Link(ctx, id)
	switch {
	case err != nil:
		return err
	case l.Used:
		return ErrUsed
	}
	return ErrSuperseded
}

// List reads a page of the key's orders, newest first, as p says
// (listing.Read).
func (s *DBStore) List(ctx context.Context, keyID string, p listing.Params) ([]Record, error) {
	return listing.Read(ctx, s.db, "orders", columns, scan, keyID, p)
}
