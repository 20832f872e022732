package payout

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

// Migrations is the payout service's schema.
var Migrations = database.MigrationsIn("payout", migrations)

// StoredPayout is a payout as the system of record keeps it. It holds the
// beneficiary, which is personal data: it is never logged.
type StoredPayout struct {
	ID             string
	QuoteID        string
	KeyID          string
	Beneficiary    Beneficiary // name as sent, IBAN in electronic form
	Chain          int64
	CryptoCurrency string
	FiatCurrency   string
	Country        string
	CryptoAmount   string // one of the two amounts, as quoted
	FiatAmount     string
	Rail           string
	Settlement     string
	Status         string
	QuoteExpiresAt time.Time
	CreatedAt      time.Time
}

// ErrNotFound is a payout the store does not have.
var ErrNotFound = errors.New("payout not found")

// Store keeps payouts in the system of record.
type Store struct{ db *database.DB }

var _ Payouts = (*Store)(nil)

// NewStore returns the store on db.
func NewStore(db *database.DB) *Store { return &Store{db: db} }

const payoutColumns = `id, quote_id, key_id, beneficiary_name, beneficiary_iban, chain, crypto_currency, fiat_currency,
	country, COALESCE(crypto_amount, ''), COALESCE(fiat_amount, ''), rail, estimated_settlement, status, quote_expires_at, created_at`

func scanPayout(row database.Row) (StoredPayout, error) {
	var p StoredPayout
	err := row.Scan(&p.ID, &p.QuoteID, &p.KeyID, &p.Beneficiary.Name, &p.Beneficiary.IBAN, &p.Chain, &p.CryptoCurrency,
		&p.FiatCurrency, &p.Country, &p.CryptoAmount, &p.FiatAmount, &p.Rail, &p.Settlement, &p.Status, &p.QuoteExpiresAt, &p.CreatedAt)
	if errors.Is(err, database.ErrNoRows) {
		return p, ErrNotFound
	}
	return p, err
}

// ErrExpired is a payout refused by the database because its quote had
// expired on the database's clock.
var ErrExpired = errors.New("payout: the quote expired")

// ByQuote is the payout a quote was executed as; ErrNotFound when it was
// not. A payout found is confirmed on a synchronous standby before it is
// returned (database.DB.Confirm): it may have been made by a commit whose
// wait for the standby was cut short, and an answer rests on it.
func (s *Store) ByQuote(ctx context.Context, quoteID string) (StoredPayout, error) {
	p, err := byQuote(ctx, s.db, quoteID)
	if err != nil {
		return p, err
	}
	if err := s.db.Confirm(ctx); err != nil {
		return StoredPayout{}, err
	}
	return p, nil
}

func byQuote(ctx context.Context, q database.Querier, quoteID string) (StoredPayout, error) {
	return scanPayout(q.QueryRow(ctx, `SELECT `+payoutColumns+` FROM payouts WHERE quote_id = $1`, quoteID))
}

// Execute commits p unless its quote was executed already, and answers
// whichever payout the quote was executed as, through answer (which
// refuses another beneficiary). The answer is kept with the payout, in its
// transaction, for a request with an Idempotency-Key. The commit returns
// once a synchronous standby has it, so an acknowledged payout survives
// the primary's loss; when it does not return in time, the outcome is
// unknown (database.ErrOutcomeUnknown) and the commit goes on. A payout
// read back, made by another request, is confirmed on the standby before
// it is answered (a commit of ours that wrote the idempotency answer
// confirms it by itself).
func (s *Store) Execute(ctx context.Context, p StoredPayout, answer func(StoredPayout) (Payout, error)) (Payout, error) {
	var out Payout
	made := false
	err := s.db.Tx(ctx, func(tx database.Querier) error {
		stored, inserted, err := insertPayout(ctx, tx, p)
		if err != nil {
			return err
		}
		made = inserted
		if out, err = answer(stored); err != nil {
			return err
		}
		return idempotency.Answer(ctx, tx, out)
	})
	if err != nil {
		return Payout{}, err
	}
	if !made && !idempotency.Claimed(ctx) {
		if err := s.db.Confirm(ctx); err != nil {
			return Payout{}, err
		}
	}
	return out, nil
}

// insertPayout inserts p unless its quote has a payout, and returns the
// quote's payout: p (inserted), or the one executed before. On PostgreSQL
// created_at is the database's now() (a trigger), and a quote past its
// expiry on that clock is refused (ErrExpired).
func insertPayout(ctx context.Context, q database.Querier, p StoredPayout) (StoredPayout, bool, error) {
	n, err := q.Exec(ctx, `INSERT INTO payouts (id, quote_id, key_id, beneficiary_name, beneficiary_iban, chain,
			crypto_currency, fiat_currency, country, crypto_amount, fiat_amount, rail, estimated_settlement, status,
			quote_expires_at, created_at)
		VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, NULLIF($10, ''), NULLIF($11, ''), $12, $13, $14, $15, $16)
		ON CONFLICT (quote_id) DO NOTHING`,
		p.ID, p.QuoteID, p.KeyID, p.Beneficiary.Name, p.Beneficiary.IBAN, p.Chain, p.CryptoCurrency, p.FiatCurrency,
		p.Country, p.CryptoAmount, p.FiatAmount, p.Rail, p.Settlement, p.Status, p.QuoteExpiresAt, p.CreatedAt)
	if database.Violates(err, "payouts_not_after_expiry") {
		return StoredPayout{}, false, ErrExpired
	}
	if err != nil {
		return StoredPayout{}, false, fmt.Errorf("insert payout: %w", err)
	}
	if n == 1 {
		return p, true, nil
	}
	stored, err := byQuote(ctx, q, p.QuoteID)
	if err != nil {
		return StoredPayout{}, false, fmt.Errorf("read the quote's payout: %w", err)
	}
	return stored, false, nil
}
