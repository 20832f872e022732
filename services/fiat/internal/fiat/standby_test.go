package fiat

import (
	"context"
	"fmt"
	"testing"

	"github.com/partnerpay/api/pkg/bankprovider"
	"github.com/partnerpay/api/pkg/idempotency"
	"github.com/partnerpay/api/testkit/pgtest"
)

// No answer rests on a row the standby lacks (DESIGN §6): an account's, a
// virtual account's and a deposit's reads, which the status calls answer
// from, wait until the synchronous standby has what they read.
func TestFiatReadsAnswerOnlyWhatTheStandbyHas(t *testing.T) {
	t.Parallel()
	r := pgtest.StartReplicated(t)
	f := newFiatFixture(pgtest.OpenURL(t, r.URL(), idempotency.Migrations, Feed.Migrations(), Migrations))
	ctx := context.Background()
	acc := f.account(t, bankprovider.StatusActive, nil)
	d, err := f.svc.CreateDeposit(ctx, acme, DepositRequest{AccountID: acc.AccountID, Currency: "EUR", Amount: "10.00"})
	if err != nil {
		t.Fatal(err)
	}
	r.ReadsOnlyWhatTheStandbyHas(t, `UPDATE fiat_accounts SET status = 'rejected'`, func(ctx context.Context) error {
		got, err := f.svc.store.Account(ctx, acc.AccountID)
		if err == nil && got.Status != StatusRejected {
			err = fmt.Errorf("account status %q, want %q", got.Status, StatusRejected)
		}
		return err
	})
	r.ReadsOnlyWhatTheStandbyHas(t, `INSERT INTO fiat_virtual_accounts (id, key_id, account_id, provider_account_id, currency, created_at, changed_at)
		VALUES ('va_local', 'acme', '`+acc.AccountID+`', 'bva_local', 'EUR', now(), now())`, func(ctx context.Context) error {
		_, err := f.svc.store.VirtualAccount(ctx, "va_local")
		return err
	})
	r.ReadsOnlyWhatTheStandbyHas(t, `UPDATE fiat_deposits SET status = 'funded'`, func(ctx context.Context) error {
		got, err := f.svc.store.Deposit(ctx, d.DepositID)
		if err == nil && got.Status != "funded" {
			err = fmt.Errorf("deposit status %q, want funded", got.Status)
		}
		return err
	})
}
