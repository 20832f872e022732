package fiat

import (
	"context"
	"embed"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/partnerpay/api/pkg/database"
	"github.com/partnerpay/api/pkg/environment"
	"github.com/partnerpay/api/pkg/events"
	"github.com/partnerpay/api/pkg/idempotency"
	"github.com/partnerpay/api/pkg/lifecycle"
	"github.com/partnerpay/api/pkg/listing"
)

//go:embed migrations
var migrations embed.FS

// Migrations is the fiat service's schema.
var Migrations = database.MigrationsIn("fiat", migrations)

// Feed is the service's events feed (DESIGN §9), in tables of its own.
var Feed = events.For("fiat")

// ErrNotFound is a record the store does not have.
var ErrNotFound = errors.New("not found")

// DBStore keeps the service's records in the system of record. The
// creating writes keep the request's answer in their transaction
// (idempotency.Answer), and are safe to repeat: a retry after a crash
// writes the same ids (idempotency.NewID) and finds its own rows.
type DBStore struct {
	db  *database.DB
	env environment.Name // of the events' objects
}

var _ Store = (*DBStore)(nil)

// NewStore returns the store on db.
func NewStore(db *database.DB, env environment.Name) *DBStore { return &DBStore{db: db, env: env} }

// Every status change of an account, a virtual account (and its funding)
// or a one-off deposit writes its event (pkg/events) in the transaction of
// the change, with the record as its creating call (the funding: as POST
// /v1/fiat/status) answers it.
func (s *DBStore) event(ctx context.Context, tx pgx.Tx, keyID, typ, id string, at time.Time, object any, previous string) error {
	e, err := events.New(s.env, keyID, typ, id, at, object, previous)
	if err != nil {
		return err
	}
	return Feed.Write(ctx, tx, e)
}

func notFound(err error) error {
	if errors.Is(err, database.ErrNoRows) {
		return ErrNotFound
	}
	return err
}

// CreateAccount writes an account and keeps answer with it.
func (s *DBStore) CreateAccount(ctx context.Context, r AccountRecord, answer Account) error {
	return s.db.Tx(ctx, func(tx pgx.Tx) error {
		// The worker asks about the account until its status is final.
		tag, err := tx.Exec(ctx, `INSERT INTO fiat_accounts (id, key_id, provider_customer_id, consent_session_id, created_at, status, reference,
				status_at, next_check_at)
			VALUES ($1, $2, $3, NULLIF($4, ''), $5, NULLIF($6, ''), NULLIF($7, ''), $5,
				CASE WHEN $6 IN ('active', 'rejected') THEN NULL ELSE $5::timestamptz END) ON CONFLICT (id) DO NOTHING`,
			r.ID, r.Owner, r.ProviderCustomerID, r.ConsentSessionID, r.CreatedAt, r.Status, r.Reference)
		if err != nil {
			return fmt.Errorf("insert account: %w", err)
		}
		if tag.RowsAffected() == 1 && r.Status != "" {
			if err := s.event(ctx, tx, r.Owner, "fiat_account."+r.Status, r.ID, r.CreatedAt, account(r), ""); err != nil {
				return err
			}
		}
		return idempotency.Answer(ctx, tx, answer)
	})
}

const accountColumns = `id, key_id, provider_customer_id, COALESCE(consent_session_id, ''), created_at, COALESCE(status, ''), COALESCE(reference, ''),
	status_at`

func scanAccount(row pgx.Row) (AccountRecord, error) {
	var r AccountRecord
	err := row.Scan(&r.ID, &r.Owner, &r.ProviderCustomerID, &r.ConsentSessionID, &r.CreatedAt, &r.Status, &r.Reference, &r.StatusAt)
	return r, notFound(err)
}

// Account reads an account, confirmed on the standby (an answer rests on
// it).
func (s *DBStore) Account(ctx context.Context, id string) (AccountRecord, error) {
	r, err := scanAccount(s.db.QueryRow(ctx, `SELECT `+accountColumns+` FROM fiat_accounts WHERE id = $1`, id))
	return r, s.db.ReadBack(ctx, err)
}

// SetAccountStatus keeps the provider's newest word on an account, read
// at at; the worker asks again soon, or never once it is final.
func (s *DBStore) SetAccountStatus(ctx context.Context, accountID, status string, at time.Time) error {
	return s.db.Tx(ctx, func(tx pgx.Tx) error { return s.setAccountStatus(ctx, tx, accountID, status, at) })
}

// setAccountStatus sets the account's status in tx, with its event when
// it changed.
func (s *DBStore) setAccountStatus(ctx context.Context, tx pgx.Tx, accountID, status string, at time.Time) error {
	r, err := scanAccount(tx.QueryRow(ctx, `SELECT `+accountColumns+` FROM fiat_accounts WHERE id = $1 FOR UPDATE`, accountID))
	if err != nil {
		return err
	}
	if _, err := tx.Exec(ctx, `UPDATE fiat_accounts SET status = $2,
			status_at = CASE WHEN status IS DISTINCT FROM $2 THEN $3 ELSE status_at END,
			next_check_at = CASE WHEN $2 IN ('active', 'rejected') THEN NULL ELSE $3 END
		WHERE id = $1`, accountID, status, at); err != nil {
		return err
	}
	if r.Status == status {
		return nil
	}
	previous := r.Status
	r.Status, r.StatusAt = status, at
	return s.event(ctx, tx, r.Owner, "fiat_account."+status, r.ID, at, account(r), previous)
}

// CheckSoon has the worker ask about the account, virtual account or
// deposit id (by its prefix) at at.
func (s *DBStore) CheckSoon(ctx context.Context, id string, at time.Time) error {
	table := map[string]string{accountPrefix: "fiat_accounts", virtualAccountPrefix: "fiat_virtual_accounts", depositPrefix: "fiat_deposits"}
	for prefix, t := range table {
		if strings.HasPrefix(id, prefix) {
			_, err := s.db.Exec(ctx, `UPDATE `+t+` SET next_check_at = $2 WHERE id = $1`, id, at)
			return err
		}
	}
	return fmt.Errorf("check soon: %q is no record's id", id)
}

// SetConsentSession points an account at its newest consent session.
func (s *DBStore) SetConsentSession(ctx context.Context, accountID, sessionID string) error {
	tag, err := s.db.Exec(ctx, `UPDATE fiat_accounts SET consent_session_id = $2 WHERE id = $1`, accountID, sessionID)
	if err == nil && tag.RowsAffected() == 0 {
		err = ErrNotFound
	}
	return err
}

// VirtualAccountFor gives a provider account one id of ours for good:
// whoever loses a race reads the winner's record. answer makes the
// request's answer from the record, kept with it.
func (s *DBStore) VirtualAccountFor(ctx context.Context, r VirtualAccountRecord, answer func(VirtualAccountRecord) VirtualAccount) (VirtualAccount, error) {
	var out VirtualAccount
	err := s.db.Tx(ctx, func(tx pgx.Tx) error {
		tag, err := tx.Exec(ctx, `INSERT INTO fiat_virtual_accounts (id, key_id, account_id, provider_account_id, currency, created_at, reference,
				changed_at, next_check_at)
			VALUES ($1, $2, $3, $4, $5, $6, NULLIF($7, ''), $6, $6) ON CONFLICT (provider_account_id) DO NOTHING`,
			r.ID, r.Owner, r.AccountID, r.ProviderAccountID, r.Currency, r.CreatedAt, r.Reference)
		if err != nil {
			return fmt.Errorf("insert virtual account: %w", err)
		}
		stored, err := scanVirtualAccount(tx.QueryRow(ctx, `SELECT `+vaColumns+` FROM fiat_virtual_accounts WHERE provider_account_id = $1`, r.ProviderAccountID))
		if err != nil {
			return fmt.Errorf("read virtual account: %w", err)
		}
		out = answer(stored)
		if tag.RowsAffected() == 1 {
			if err := s.event(ctx, tx, r.Owner, "virtual_account."+lifecycle.VirtualAccountActive, r.ID, r.CreatedAt, out, ""); err != nil {
				return err
			}
			f, err := fundingOf(stored)
			if err != nil {
				return err
			}
			if err := s.event(ctx, tx, r.Owner, "virtual_account.funding."+f.Status, r.ID, r.CreatedAt, f, ""); err != nil {
				return err
			}
		}
		return idempotency.Answer(ctx, tx, out)
	})
	return out, err
}

const vaColumns = `id, key_id, account_id, provider_account_id, currency, created_at, COALESCE(reference, ''), transactions, changed_at`

func scanVirtualAccount(row pgx.Row) (VirtualAccountRecord, error) {
	var r VirtualAccountRecord
	err := row.Scan(&r.ID, &r.Owner, &r.AccountID, &r.ProviderAccountID, &r.Currency, &r.CreatedAt, &r.Reference, &r.Transactions, &r.ChangedAt)
	return r, notFound(err)
}

// VirtualAccount reads a virtual account, confirmed on the standby.
func (s *DBStore) VirtualAccount(ctx context.Context, id string) (VirtualAccountRecord, error) {
	r, err := scanVirtualAccount(s.db.QueryRow(ctx, `SELECT `+vaColumns+` FROM fiat_virtual_accounts WHERE id = $1`, id))
	return r, s.db.ReadBack(ctx, err)
}

// CreateDeposit writes a one-off deposit and keeps answer with it.
func (s *DBStore) CreateDeposit(ctx context.Context, r DepositRecord, answer Deposit) error {
	return s.db.Tx(ctx, func(tx pgx.Tx) error {
		tag, err := tx.Exec(ctx, `INSERT INTO fiat_deposits (id, key_id, account_id, provider_instruction_id, created_at, status,
				amount, currency, iban, bic, beneficiary, transfer_reference, expires_at, reference, changed_at, next_check_at)
			VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, NULLIF($14, ''), $5, $5) ON CONFLICT (id) DO NOTHING`,
			r.ID, r.Owner, r.AccountID, r.ProviderInstructionID, r.CreatedAt, r.Status, r.Amount, r.Currency,
			r.BankDetails.IBAN, r.BankDetails.BIC, r.BankDetails.Beneficiary, r.TransferReference, r.ExpiresAt, r.Reference)
		if err != nil {
			return fmt.Errorf("insert deposit: %w", err)
		}
		if tag.RowsAffected() == 1 {
			if err := s.event(ctx, tx, r.Owner, "fiat_deposit."+r.Status, r.ID, r.CreatedAt, deposit(r), ""); err != nil {
				return err
			}
		}
		return idempotency.Answer(ctx, tx, answer)
	})
}

// A deposit kept before its instruction was (migration 00002) answers
// empty strings and the zero time for it.
const depositColumns = `id, key_id, account_id, provider_instruction_id, created_at, status, COALESCE(amount, ''), COALESCE(currency, ''),
	COALESCE(iban, ''), COALESCE(bic, ''), COALESCE(beneficiary, ''), COALESCE(transfer_reference, ''), expires_at, COALESCE(reference, ''),
	transactions, changed_at`

func scanDeposit(row pgx.Row) (DepositRecord, error) {
	var r DepositRecord
	var expires *time.Time
	err := row.Scan(&r.ID, &r.Owner, &r.AccountID, &r.ProviderInstructionID, &r.CreatedAt, &r.Status, &r.Amount, &r.Currency,
		&r.BankDetails.IBAN, &r.BankDetails.BIC, &r.BankDetails.Beneficiary, &r.TransferReference, &expires, &r.Reference,
		&r.Transactions, &r.ChangedAt)
	if expires != nil {
		r.ExpiresAt = *expires
	}
	return r, notFound(err)
}

// Deposit reads a one-off deposit, confirmed on the standby.
func (s *DBStore) Deposit(ctx context.Context, id string) (DepositRecord, error) {
	r, err := scanDeposit(s.db.QueryRow(ctx, `SELECT `+depositColumns+` FROM fiat_deposits WHERE id = $1`, id))
	return r, s.db.ReadBack(ctx, err)
}

// Check is what the worker makes of a due record: the provider's word, if
// it is news (an account's Status; a virtual account's or a deposit's
// Transactions, and a deposit's funding), and when it asks next (Next;
// nil: never again).
type Check struct {
	Status       string
	Transactions []json.RawMessage
	Funded       bool
	Next         *time.Time
}

// due is one worker round on table's rows due at now (database.Round):
// claimed with a lease until until, worked by work (its provider calls
// made with no transaction open), each written by write in a savepoint of
// its own; each row is handed to failed with how its write went, and one
// that failed is backed off alone while the others are written.
func due[R any](ctx context.Context, db *database.DB, table, columns string, scan func(pgx.Row) (R, error),
	now, until time.Time, limit int, work func(context.Context, []R) []Check, write func(ctx context.Context, tx pgx.Tx, r R, c Check) error,
	failed func(ctx context.Context, tx pgx.Tx, r R, err error) error) (int, error) {
	return database.Round(ctx, db, database.LeaseSQL(table, columns), []any{now, limit, until}, scan, work, write, failed)
}

// Failed is the worker's word on each row of a round once written: its
// table and id, and the error its write failed with (nil: it moved). For a
// failure it answers when the row is next due (its backoff, alone).
type Failed func(table, id string, err error) time.Time

// failedRow hands each row of a round to failed, and writes the backoff of
// one whose write failed in the round's transaction.
func failedRow[R any](table string, id func(R) string, failed Failed) func(context.Context, pgx.Tx, R, error) error {
	return func(ctx context.Context, tx pgx.Tx, r R, err error) error {
		next := failed(table, id(r), err)
		if err == nil {
			return nil
		}
		_, e := tx.Exec(ctx, `UPDATE `+table+` SET next_check_at = $2 WHERE id = $1`, id(r), next)
		return e
	}
}

// DueAccounts is the worker's round on the accounts due at now.
func (s *DBStore) DueAccounts(ctx context.Context, now, until time.Time, limit int, work func(context.Context, []AccountRecord) []Check, failed Failed) (int, error) {
	return due(ctx, s.db, "fiat_accounts", accountColumns, scanAccount, now, until, limit, work,
		func(ctx context.Context, tx pgx.Tx, r AccountRecord, c Check) error {
			id := r.ID
			if c.Status != "" {
				if err := s.setAccountStatus(ctx, tx, id, c.Status, now); err != nil {
					return err
				}
				if c.Status == StatusActive || c.Status == StatusRejected {
					return nil
				}
			}
			_, err := tx.Exec(ctx, `UPDATE fiat_accounts SET next_check_at = $2 WHERE id = $1`, id, c.Next)
			return err
		}, failedRow("fiat_accounts", func(r AccountRecord) string { return r.ID }, failed))
}

// DueVirtualAccounts is the worker's round on the virtual accounts due at
// now.
func (s *DBStore) DueVirtualAccounts(ctx context.Context, now, until time.Time, limit int, work func(context.Context, []VirtualAccountRecord) []Check, failed Failed) (int, error) {
	return due(ctx, s.db, "fiat_virtual_accounts", vaColumns, scanVirtualAccount, now, until, limit, work,
		func(ctx context.Context, tx pgx.Tx, r VirtualAccountRecord, c Check) error {
			if _, err := tx.Exec(ctx, `UPDATE fiat_virtual_accounts SET next_check_at = $2,
					transactions = COALESCE($3, transactions), changed_at = CASE WHEN $3::jsonb IS NULL THEN changed_at ELSE $4 END
				WHERE id = $1`, r.ID, c.Next, transactionsArg(c.Transactions), now); err != nil || c.Transactions == nil {
				return err
			}
			before, err := fundingOf(r)
			if err != nil {
				return err
			}
			r.Transactions = c.Transactions
			after, err := fundingOf(r)
			if err != nil || after.Status == before.Status {
				return err
			}
			return s.event(ctx, tx, r.Owner, "virtual_account.funding."+after.Status, r.ID, now, after, before.Status)
		}, failedRow("fiat_virtual_accounts", func(r VirtualAccountRecord) string { return r.ID }, failed))
}

// DueDeposits is the worker's round on the one-off deposits due at now.
func (s *DBStore) DueDeposits(ctx context.Context, now, until time.Time, limit int, work func(context.Context, []DepositRecord) []Check, failed Failed) (int, error) {
	return due(ctx, s.db, "fiat_deposits", depositColumns, scanDeposit, now, until, limit, work,
		func(ctx context.Context, tx pgx.Tx, r DepositRecord, c Check) error {
			if _, err := tx.Exec(ctx, `UPDATE fiat_deposits SET next_check_at = $2,
					transactions = COALESCE($3, transactions), changed_at = CASE WHEN $3::jsonb IS NULL THEN changed_at ELSE $4 END,
					status = CASE WHEN $5 THEN 'funded' ELSE status END
				WHERE id = $1`, r.ID, c.Next, transactionsArg(c.Transactions), now, c.Funded); err != nil {
				return err
			}
			if !c.Funded || r.Status == lifecycle.Funded {
				return nil
			}
			previous := r.Status
			r.Status = lifecycle.Funded
			if c.Transactions != nil {
				r.Transactions = c.Transactions
			}
			return s.event(ctx, tx, r.Owner, "fiat_deposit."+lifecycle.Funded, r.ID, now, deposit(r), previous)
		}, failedRow("fiat_deposits", func(r DepositRecord) string { return r.ID }, failed))
}

// transactionsArg is txs as the store keeps them (a JSON array), or nil
// when they are not news.
func transactionsArg(txs []json.RawMessage) any {
	if txs == nil {
		return nil
	}
	b, _ := json.Marshal(txs)
	return b
}

// Accounts reads a page of the key's accounts.
func (s *DBStore) Accounts(ctx context.Context, keyID string, p listing.Params) ([]AccountRecord, error) {
	return listing.Read(ctx, s.db, "fiat_accounts", accountColumns, scanAccount, keyID, p)
}

// VirtualAccounts reads a page of the key's virtual accounts.
func (s *DBStore) VirtualAccounts(ctx context.Context, keyID string, p listing.Params) ([]VirtualAccountRecord, error) {
	return listing.Read(ctx, s.db, "fiat_virtual_accounts", vaColumns, scanVirtualAccount, keyID, p)
}

// Deposits reads a page of the key's one-off deposits.
func (s *DBStore) Deposits(ctx context.Context, keyID string, p listing.Params) ([]DepositRecord, error) {
	return listing.Read(ctx, s.db, "fiat_deposits", depositColumns, scanDeposit, keyID, p)
}
