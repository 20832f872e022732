package fiat

import (
	"context"
	"embed"
	"errors"
	"fmt"
	"github.com/jackc/pgx/v5"
	"time"

	"github.com/partnerpay/api/pkg/database"
	"github.com/partnerpay/api/pkg/idempotency"
	"github.com/partnerpay/api/pkg/listing"
)

//go:embed migrations
var migrations embed.FS

// Migrations is the fiat service's schema.
var Migrations = database.MigrationsIn("fiat", migrations)

// ErrNotFound is a record the store does not have.
var ErrNotFound = errors.New("not found")

// DBStore keeps the service's records in the system of record. The
// creating writes keep the request's answer in their transaction
// (idempotency.Answer), and are safe to repeat: a retry after a crash
// writes the same ids (idempotency.NewID) and finds its own rows.
type DBStore struct{ db *database.DB }

var _ Store = (*DBStore)(nil)

// NewStore returns the store on db.
func NewStore(db *database.DB) *DBStore { return &DBStore{db: db} }

func notFound(err error) error {
	if errors.Is(err, database.ErrNoRows) {
		return ErrNotFound
	}
	return err
}

// CreateAccount writes an account and keeps answer with it.
func (s *DBStore) CreateAccount(ctx context.Context, r AccountRecord, answer Account) error {
	return s.db.Tx(ctx, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `INSERT INTO fiat_accounts (id, key_id, provider_customer_id, consent_session_id, created_at, status, reference)
			VALUES ($1, $2, $3, NULLIF($4, ''), $5, NULLIF($6, ''), NULLIF($7, '')) ON CONFLICT (id) DO NOTHING`,
			r.ID, r.Owner, r.ProviderCustomerID, r.ConsentSessionID, r.CreatedAt, r.Status, r.Reference); err != nil {
			return fmt.Errorf("insert account: %w", err)
		}
		return idempotency.Answer(ctx, tx, answer)
	})
}

const accountColumns = `id, key_id, provider_customer_id, COALESCE(consent_session_id, ''), created_at, COALESCE(status, ''), COALESCE(reference, '')`

func scanAccount(row pgx.Row) (AccountRecord, error) {
	var r AccountRecord
	err := row.Scan(&r.ID, &r.Owner, &r.ProviderCustomerID, &r.ConsentSessionID, &r.CreatedAt, &r.Status, &r.Reference)
	return r, notFound(err)
}

// Account reads an account, confirmed on the standby (an answer rests on
// it).
func (s *DBStore) Account(ctx context.Context, id string) (AccountRecord, error) {
	r, err := scanAccount(s.db.QueryRow(ctx, `SELECT `+accountColumns+` FROM fiat_accounts WHERE id = $1`, id))
	return r, s.db.ReadBack(ctx, err)
}

// SetAccountStatus keeps the provider's newest word on an account.
func (s *DBStore) SetAccountStatus(ctx context.Context, accountID, status string) error {
	_, err := s.db.Exec(ctx, `UPDATE fiat_accounts SET status = $2 WHERE id = $1`, accountID, status)
	return err
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
		if _, err := tx.Exec(ctx, `INSERT INTO fiat_virtual_accounts (id, key_id, account_id, provider_account_id, currency, created_at, reference)
			VALUES ($1, $2, $3, $4, $5, $6, NULLIF($7, '')) ON CONFLICT (provider_account_id) DO NOTHING`,
			r.ID, r.Owner, r.AccountID, r.ProviderAccountID, r.Currency, r.CreatedAt, r.Reference); err != nil {
			return fmt.Errorf("insert virtual account: %w", err)
		}
		stored, err := scanVirtualAccount(tx.QueryRow(ctx, `SELECT `+vaColumns+` FROM fiat_virtual_accounts WHERE provider_account_id = $1`, r.ProviderAccountID))
		if err != nil {
			return fmt.Errorf("read virtual account: %w", err)
		}
		out = answer(stored)
		return idempotency.Answer(ctx, tx, out)
	})
	return out, err
}

const vaColumns = `id, key_id, account_id, provider_account_id, currency, created_at, COALESCE(reference, '')`

func scanVirtualAccount(row pgx.Row) (VirtualAccountRecord, error) {
	var r VirtualAccountRecord
	err := row.Scan(&r.ID, &r.Owner, &r.AccountID, &r.ProviderAccountID, &r.Currency, &r.CreatedAt, &r.Reference)
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
		if _, err := tx.Exec(ctx, `INSERT INTO fiat_deposits (id, key_id, account_id, provider_instruction_id, created_at, status,
				amount, currency, iban, bic, beneficiary, transfer_reference, expires_at, reference)
			VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, NULLIF($14, '')) ON CONFLICT (id) DO NOTHING`,
			r.ID, r.Owner, r.AccountID, r.ProviderInstructionID, r.CreatedAt, r.Status, r.Amount, r.Currency,
			r.BankDetails.IBAN, r.BankDetails.BIC, r.BankDetails.Beneficiary, r.TransferReference, r.ExpiresAt, r.Reference); err != nil {
			return fmt.Errorf("insert deposit: %w", err)
		}
		return idempotency.Answer(ctx, tx, answer)
	})
}

// A deposit kept before its instruction was (migration 00002) answers
// empty strings and the zero time for it.
const depositColumns = `id, key_id, account_id, provider_instruction_id, created_at, status, COALESCE(amount, ''), COALESCE(currency, ''),
	COALESCE(iban, ''), COALESCE(bic, ''), COALESCE(beneficiary, ''), COALESCE(transfer_reference, ''), expires_at, COALESCE(reference, '')`

func scanDeposit(row pgx.Row) (DepositRecord, error) {
	var r DepositRecord
	var expires *time.Time
	err := row.Scan(&r.ID, &r.Owner, &r.AccountID, &r.ProviderInstructionID, &r.CreatedAt, &r.Status, &r.Amount, &r.Currency,
		&r.BankDetails.IBAN, &r.BankDetails.BIC, &r.BankDetails.Beneficiary, &r.TransferReference, &expires, &r.Reference)
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

// SetDepositFunded records that a deposit's money settled (once: the
// database refuses a funded deposit any other status).
func (s *DBStore) SetDepositFunded(ctx context.Context, id string) error {
	_, err := s.db.Exec(ctx, `UPDATE fiat_deposits SET status = 'funded' WHERE id = $1 AND status <> 'funded'`, id)
	return err
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
