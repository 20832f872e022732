package payout

import (
	"context"
	"embed"
	"errors"
	"fmt"
	"github.com/jackc/pgx/v5"
	"strconv"
	"strings"
	"time"

	"github.com/partnerpay/api/pkg/database"
	"github.com/partnerpay/api/pkg/idempotency"
	"github.com/partnerpay/api/pkg/listing"
)

//go:embed migrations
var migrations embed.FS

// Migrations is the payout service's schema.
var Migrations = database.MigrationsIn("payout", migrations)

// StoredPayout is a payout as the system of record keeps it. It holds the
// beneficiary, which is personal data: it is never logged.
type StoredPayout struct {
	ID               string
	QuoteID          string
	KeyID            string
	BeneficiaryName  string
	Beneficiary      []byte // the rail's fields, canonical JSON (beneficiary.Checked.Fields)
	Chain            int64
	CryptoCurrency   string
	FiatCurrency     string
	Country          string
	CryptoAmount     string // one of the two amounts, as quoted
	FiatAmount       string
	Rail             string
	Settlement       string
	Status           string
	QuoteExpiresAt   time.Time
	CreatedAt        time.Time
	Reference        string
	DepositAddress   string
	DepositExpiresAt time.Time
	DepositTxHash    string
	CompletedAt      *time.Time
	FailureReason    string
	ReturnReason     string
	SandboxOutcome   string // what a sandbox payout comes to (POST /v1/sandbox/payouts/deposit)
	SandboxReason    string
	StatusAt         time.Time
}

// Move is one status a payout has been in, and since when.
type Move struct {
	Status string    `json:"status"`
	At     time.Time `json:"at"`
}

// ErrNotFound is a payout the store does not have.
var ErrNotFound = errors.New("payout not found")

// ErrExpired is a payout refused by the database because its quote had
// expired on the database's clock.
var ErrExpired = errors.New("payout: the quote expired")

// Store keeps payouts in the system of record.
type Store struct{ db *database.DB }

var _ Payouts = (*Store)(nil)

// NewStore returns the store on db.
func NewStore(db *database.DB) *Store { return &Store{db: db} }

const payoutColumns = `id, quote_id, key_id, beneficiary_name, beneficiary, chain, crypto_currency, fiat_currency,
	country, COALESCE(crypto_amount, ''), COALESCE(fiat_amount, ''), rail, estimated_settlement, status, quote_expires_at,
	created_at, COALESCE(reference, ''), deposit_address, deposit_expires_at, COALESCE(deposit_tx_hash, ''), completed_at,
	COALESCE(failure_reason, ''), COALESCE(return_reason, ''), COALESCE(sandbox_outcome, ''), COALESCE(sandbox_reason, ''), status_at`

func scanPayout(row pgx.Row) (StoredPayout, error) {
	var p StoredPayout
	var fields string
	err := row.Scan(&p.ID, &p.QuoteID, &p.KeyID, &p.BeneficiaryName, &fields, &p.Chain, &p.CryptoCurrency,
		&p.FiatCurrency, &p.Country, &p.CryptoAmount, &p.FiatAmount, &p.Rail, &p.Settlement, &p.Status, &p.QuoteExpiresAt,
		&p.CreatedAt, &p.Reference, &p.DepositAddress, &p.DepositExpiresAt, &p.DepositTxHash, &p.CompletedAt,
		&p.FailureReason, &p.ReturnReason, &p.SandboxOutcome, &p.SandboxReason, &p.StatusAt)
	if errors.Is(err, database.ErrNoRows) {
		return p, ErrNotFound
	}
	p.Beneficiary = []byte(fields)
	return p, err
}

// ByQuote is the payout a quote was executed as; ErrNotFound when it was
// not. A payout found is confirmed on a synchronous standby before it is
// returned (database.DB.Confirm): it may have been made by a commit whose
// wait for the standby was cut short, and an answer rests on it.
func (s *Store) ByQuote(ctx context.Context, quoteID string) (StoredPayout, error) {
	p, err := byQuote(ctx, s.db, quoteID)
	return p, s.db.ReadBack(ctx, err)
}

func byQuote(ctx context.Context, q database.Querier, quoteID string) (StoredPayout, error) {
	return scanPayout(q.QueryRow(ctx, `SELECT `+payoutColumns+` FROM payouts WHERE quote_id = $1`, quoteID))
}

// ByID is a payout and its history, oldest first; ErrNotFound when there
// is none. Like ByQuote, what it returns is confirmed on the standby.
func (s *Store) ByID(ctx context.Context, id string) (StoredPayout, []Move, error) {
	p, err := scanPayout(s.db.QueryRow(ctx, `SELECT `+payoutColumns+` FROM payouts WHERE id = $1`, id))
	if err != nil {
		return p, nil, err
	}
	rows, err := s.db.Query(ctx, `SELECT status, at FROM payout_history WHERE payout_id = $1 ORDER BY at, status`, id)
	if err != nil {
		return p, nil, err
	}
	defer rows.Close()
	var history []Move
	for rows.Next() {
		var m Move
		if err := rows.Scan(&m.Status, &m.At); err != nil {
			return p, nil, err
		}
		history = append(history, m)
	}
	if err := rows.Err(); err != nil {
		return p, nil, err
	}
	if err := s.db.Confirm(ctx); err != nil {
		return StoredPayout{}, nil, err
	}
	return p, orderMoves(history), nil
}

// orderMoves puts moves made in the same instant in the order of the
// arrows (a read that learns of a completion and a return at once).
func orderMoves(m []Move) []Move {
	rank := map[string]int{"awaiting_deposit": 0, "processing": 1, "expired": 1, "completed": 2, "failed": 2, "returned": 3}
	for i := 1; i < len(m); i++ {
		for j := i; j > 0 && m[j].At.Equal(m[j-1].At) && rank[m[j].Status] < rank[m[j-1].Status]; j-- {
			m[j], m[j-1] = m[j-1], m[j]
		}
	}
	return m
}

// Execute commits p unless its quote was executed already, and answers
// whichever payout the quote was executed as, through answer (which
// refuses another beneficiary). The payout, its first history row (a
// trigger) and, for a request with an Idempotency-Key, the answer commit
// together, once. The commit returns once a synchronous standby has it, so
// an acknowledged payout survives the primary's loss; when it does not
// return in time, the outcome is unknown (database.ErrOutcomeUnknown) and
// the commit goes on. A payout read back, made by another request, is
// confirmed on the standby before it is answered (a commit of ours that
// wrote the idempotency answer confirms it by itself).
func (s *Store) Execute(ctx context.Context, p StoredPayout, answer func(StoredPayout) (Payout, error)) (Payout, error) {
	if !idempotency.Claimed(ctx) {
		// Nothing to keep beside the payout: one statement (its history row
		// is a trigger's), committed on its own, one round trip.
		err := s.db.CommitRow(ctx, []any{&p.CreatedAt}, insertSQL, insertArgs(p)...)
		switch {
		case err == nil:
			return answer(p)
		case database.Violates(err, "payouts_not_after_expiry"):
			return Payout{}, ErrExpired
		case !errors.Is(err, database.ErrNoRows):
			return Payout{}, fmt.Errorf("insert payout: %w", err)
		}
		stored, err := s.ByQuote(ctx, p.QuoteID) // confirmed on the standby
		if err != nil {
			return Payout{}, fmt.Errorf("read the quote's payout: %w", err)
		}
		return answer(stored)
	}
	var out Payout
	err := s.db.Tx(ctx, func(tx pgx.Tx) error {
		stored, _, err := insertPayout(ctx, tx, p)
		if err != nil {
			return err
		}
		if out, err = answer(stored); err != nil {
			return err
		}
		// The answer commits with the payout: this commit waits for the
		// standby, and so confirms a payout read back as well.
		return idempotency.Answer(ctx, tx, out)
	})
	if err != nil {
		return Payout{}, err
	}
	return out, nil
}

const insertSQL = `INSERT INTO payouts (id, quote_id, key_id, beneficiary_name, beneficiary, chain,
		crypto_currency, fiat_currency, country, crypto_amount, fiat_amount, rail, estimated_settlement, status,
		quote_expires_at, created_at, reference, deposit_address, deposit_expires_at, status_at)
	VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, NULLIF($10, ''), NULLIF($11, ''), $12, $13, $14, $15, $16, NULLIF($17, ''), $18, $19, $20)
	ON CONFLICT (quote_id) DO NOTHING RETURNING created_at`

func insertArgs(p StoredPayout) []any {
	return []any{p.ID, p.QuoteID, p.KeyID, p.BeneficiaryName, string(p.Beneficiary), p.Chain, p.CryptoCurrency, p.FiatCurrency,
		p.Country, p.CryptoAmount, p.FiatAmount, p.Rail, p.Settlement, p.Status, p.QuoteExpiresAt, p.CreatedAt,
		p.Reference, p.DepositAddress, p.DepositExpiresAt, p.StatusAt}
}

// insertPayout inserts p unless its quote has a payout, and returns the
// quote's payout: p (inserted, with the database's created_at), or the one
// executed before. On PostgreSQL created_at is the database's now() (a
// trigger), and a quote past its expiry on that clock is refused
// (ErrExpired).
func insertPayout(ctx context.Context, q database.Querier, p StoredPayout) (StoredPayout, bool, error) {
	err := q.QueryRow(ctx, insertSQL, insertArgs(p)...).Scan(&p.CreatedAt)
	switch {
	case err == nil:
		return p, true, nil
	case database.Violates(err, "payouts_not_after_expiry"):
		return StoredPayout{}, false, ErrExpired
	case !errors.Is(err, database.ErrNoRows):
		return StoredPayout{}, false, fmt.Errorf("insert payout: %w", err)
	}
	stored, err := byQuote(ctx, q, p.QuoteID)
	if err != nil {
		return StoredPayout{}, false, fmt.Errorf("read the quote's payout: %w", err)
	}
	return stored, false, nil
}

// Change is one move of a payout's status, with what it brings.
type Change struct {
	From, To      string
	At            time.Time
	DepositTxHash string
	CompletedAt   *time.Time
	FailureReason string
	ReturnReason  string
	// What the sandbox provider is to make of the payout, chosen with its
	// deposit (POST /v1/sandbox/payouts/deposit).
	SandboxOutcome, SandboxReason string
}

// Move makes the change if the payout is still in c.From, and reports
// whether it did: of two readers racing to make it, one does. Its history
// row commits with it (a trigger); the database refuses any move that is
// not an arrow of DESIGN §3.
func (s *Store) Move(ctx context.Context, id string, c Change) (bool, error) {
	var moved bool
	err := s.db.Tx(ctx, func(tx pgx.Tx) error {
		tag, err := tx.Exec(ctx, `UPDATE payouts SET status = $3, status_at = $4,
				deposit_tx_hash = COALESCE(NULLIF($5, ''), deposit_tx_hash), completed_at = COALESCE($6, completed_at),
				failure_reason = COALESCE(NULLIF($7, ''), failure_reason), return_reason = COALESCE(NULLIF($8, ''), return_reason),
				sandbox_outcome = COALESCE(NULLIF($9, ''), sandbox_outcome), sandbox_reason = COALESCE(NULLIF($10, ''), sandbox_reason)
			WHERE id = $1 AND status = $2`,
			id, c.From, c.To, c.At, c.DepositTxHash, c.CompletedAt, c.FailureReason, c.ReturnReason, c.SandboxOutcome, c.SandboxReason)
		moved = tag.RowsAffected() == 1
		return err
	})
	if err != nil {
		return false, fmt.Errorf("move payout %s → %s: %w", c.From, c.To, err)
	}
	return moved, nil
}

// List reads a page of the key's payouts, newest first, as p says (Limit+1
// rows at most: the extra one says there are more), with their histories;
// what it returns is confirmed on the standby.
func (s *Store) List(ctx context.Context, keyID string, p listing.Params) ([]StoredPayout, map[string][]Move, error) {
	where, args := p.Where(keyID)
	rows, err := s.db.Query(ctx, `SELECT `+payoutColumns+` FROM payouts WHERE `+where+
		` ORDER BY created_at DESC, id DESC LIMIT `+strconv.Itoa(p.Limit+1), args...)
	if err != nil {
		return nil, nil, err
	}
	var out []StoredPayout
	for rows.Next() {
		sp, err := scanPayout(rows)
		if err != nil {
			rows.Close()
			return nil, nil, err
		}
		out = append(out, sp)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return nil, nil, err
	}
	history := map[string][]Move{}
	if len(out) > 0 {
		ph := make([]string, len(out))
		idArgs := make([]any, len(out))
		for i, sp := range out {
			ph[i], idArgs[i] = "$"+strconv.Itoa(i+1), sp.ID
		}
		hrows, err := s.db.Query(ctx, `SELECT payout_id, status, at FROM payout_history WHERE payout_id IN (`+strings.Join(ph, ", ")+`) ORDER BY at, status`, idArgs...)
		if err != nil {
			return nil, nil, err
		}
		for hrows.Next() {
			var id string
			var m Move
			if err := hrows.Scan(&id, &m.Status, &m.At); err != nil {
				hrows.Close()
				return nil, nil, err
			}
			history[id] = append(history[id], m)
		}
		hrows.Close()
		if err := hrows.Err(); err != nil {
			return nil, nil, err
		}
		for id, h := range history {
			history[id] = orderMoves(h)
		}
	}
	if err := s.db.Confirm(ctx); err != nil {
		return nil, nil, err
	}
	return out, history, nil
}
