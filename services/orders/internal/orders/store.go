package orders

import (
	"context"
	"embed"
	"errors"
	"fmt"
	"time"

	"github.com/partnerpay/api/pkg/database"
	"github.com/partnerpay/api/pkg/idempotency"
)

//go:embed migrations
var migrations embed.FS

// Migrations is the order service's schema.
var Migrations = database.MigrationsIn("orders", migrations)

// DBStore keeps orders in the system of record. The schema holds their
// rules: terms never change, a status only moves forward, completed,
// failed and expired are final.
type DBStore struct{ db *database.DB }

var _ Store = (*DBStore)(nil)

// NewStore returns the store on db.
func NewStore(db *database.DB) *DBStore { return &DBStore{db: db} }

// Create writes r and keeps answer with it; a retry after a crash writes
// the same id (idempotency.NewID) and finds its own row.
func (s *DBStore) Create(ctx context.Context, r Record, answer Order) error {
	return s.db.Tx(ctx, func(tx database.Querier) error {
		if _, err := tx.Exec(ctx, `INSERT INTO orders (id, key_id, direction, status, crypto_currency, chain, fiat_currency, country,
				crypto_amount, fiat_amount, wallet_address, deposit_address, expires_at, created_at)
			VALUES ($1, $2, $3, $4, $5, $6, $7, $8, NULLIF($9, ''), NULLIF($10, ''), $11, NULLIF($12, ''), $13, $14) ON CONFLICT (id) DO NOTHING`,
			r.ID, r.Owner, r.Direction, r.Status, r.CryptoCurrency, r.Chain, r.FiatCurrency, r.Country,
			r.CryptoAmount, r.FiatAmount, r.WalletAddress, r.DepositAddress, r.ExpiresAt, r.CreatedAt); err != nil {
			return fmt.Errorf("insert order: %w", err)
		}
		return idempotency.Answer(ctx, tx, answer)
	})
}

const columns = `id, key_id, direction, status, crypto_currency, chain, fiat_currency, country, COALESCE(crypto_amount, ''),
	COALESCE(fiat_amount, ''), wallet_address, COALESCE(deposit_address, ''), COALESCE(payment_method, ''), COALESCE(tx_hash, ''),
	COALESCE(failure_reason, ''), expires_at, created_at`

func scan(row database.Row) (Record, error) {
	var r Record
	err := row.Scan(&r.ID, &r.Owner, &r.Direction, &r.Status, &r.CryptoCurrency, &r.Chain, &r.FiatCurrency, &r.Country,
		&r.CryptoAmount, &r.FiatAmount, &r.WalletAddress, &r.DepositAddress, &r.PaymentMethod, &r.TxHash, &r.FailureReason,
		&r.ExpiresAt, &r.CreatedAt)
	if errors.Is(err, database.ErrNoRows) {
		return r, ErrNotFound
	}
	return r, err
}

// Get reads an order.
func (s *DBStore) Get(ctx context.Context, id string) (Record, error) {
	return scan(s.db.QueryRow(ctx, `SELECT `+columns+` FROM orders WHERE id = $1`, id))
}

// Expire moves an order still awaiting its payment or deposit at now past
// its expiry to expired; whoever loses a race reads the winner's status.
func (s *DBStore) Expire(ctx context.Context, id string, now time.Time) (Record, error) {
	if _, err := s.db.Exec(ctx, `UPDATE orders SET status = 'expired'
		WHERE id = $1 AND status IN ('awaiting_payment', 'awaiting_deposit') AND expires_at <= $2`, id, now); err != nil {
		return Record{}, err
	}
	return s.Get(ctx, id)
}
