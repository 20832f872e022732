package fiat

import (
	"context"
	"strings"
	"testing"

	"github.com/partnerpay/api/pkg/bankprovider"
	"github.com/partnerpay/api/pkg/idempotency"
	"github.com/partnerpay/api/testkit/pgtest"
)

// Every refusal of the fiat calls, on the real store: its
// code and message, and nothing made (the fake bank panics on a call a
// refusal should never reach: a pay-in, an identity result).
func TestFiatRefusalsChangeNothing(t *testing.T) {
	t.Parallel()
	db := pgtest.Open(t, idempotency.Migrations, Feed.Migrations(), Migrations)
	f := newFiatFixture(db)
	ctx := context.Background()
	active := f.account(t, bankprovider.StatusActive, nil)
	pending := f.account(t, bankprovider.StatusTermsRequired, nil)
	va, err := f.svc.CreateVirtualAccount(ctx, acme, VirtualAccountRequest{AccountID: active.AccountID, Currency: "EUR"})
	if err != nil {
		t.Fatal(err)
	}
	dep, err := f.svc.CreateDeposit(ctx, acme, DepositRequest{AccountID: active.AccountID, Currency: "EUR", Amount: "10"})
	if err != nil {
		t.Fatal(err)
	}
	unknownAcc := accountPrefix + strings.Repeat("0", 24)
	count := func() (n int) {
		for _, table := range []string{"fiat_accounts", "fiat_virtual_accounts", "fiat_deposits"} {
			var k int
			if err := db.QueryRow(ctx, `SELECT count(*) FROM `+table).Scan(&k); err != nil {
				t.Fatal(err)
			}
			n += k
		}
		return n
	}
	before := count()
	for _, tc := range []struct {
		name string
		call func() error
		code string
		msg  string
	}{
		{"a virtual account without an account", func() error {
			_, err := f.svc.CreateVirtualAccount(ctx, acme, VirtualAccountRequest{Currency: "EUR"})
			return err
		}, "invalid_request", "accountId is required."},
		{"a virtual account in a currency that is no code", func() error {
			_, err := f.svc.CreateVirtualAccount(ctx, acme, VirtualAccountRequest{AccountID: active.AccountID, Currency: "EURO"})
			return err
		}, "invalid_request", "currency"},
		{"a virtual account for a malformed account id", func() error {
			_, err := f.svc.CreateVirtualAccount(ctx, acme, VirtualAccountRequest{AccountID: "acc_x", Currency: "EUR"})
			return err
		}, "account_not_found", "No account with this accountId exists for this key."},
		{"a virtual account for another key's account", func() error {
			_, err := f.svc.CreateVirtualAccount(ctx, globex, VirtualAccountRequest{AccountID: active.AccountID, Currency: "EUR"})
			return err
		}, "account_not_found", "No account with this accountId exists for this key."},
		{"a deposit of no amount", func() error {
			_, err := f.svc.CreateDeposit(ctx, acme, DepositRequest{AccountID: active.AccountID, Currency: "EUR", Amount: "0"})
			return err
		}, "invalid_request", "amount"},
		{"a deposit of a negative amount", func() error {
			_, err := f.svc.CreateDeposit(ctx, acme, DepositRequest{AccountID: active.AccountID, Currency: "EUR", Amount: "-5"})
			return err
		}, "invalid_request", "amount"},
		{"a deposit for an unknown account", func() error {
			_, err := f.svc.CreateDeposit(ctx, acme, DepositRequest{AccountID: unknownAcc, Currency: "EUR", Amount: "5"})
			return err
		}, "account_not_found", "No account with this accountId exists for this key."},
		{"a deposit for an account that has not consented", func() error {
			_, err := f.svc.CreateDeposit(ctx, acme, DepositRequest{AccountID: pending.AccountID, Currency: "EUR", Amount: "5"})
			return err
		}, "account_not_active", "The account is not active"},
		{"a pay-in with both ids", func() error {
			_, err := f.svc.SandboxPayin(ctx, acme, PayinRequest{VirtualAccountID: va.VirtualAccountID, DepositID: dep.DepositID, Amount: "5", Currency: "EUR"})
			return err
		}, "invalid_request", "Send exactly one of virtualAccountId and depositId."},
		{"a pay-in with neither id", func() error {
			_, err := f.svc.SandboxPayin(ctx, acme, PayinRequest{Amount: "5", Currency: "EUR"})
			return err
		}, "invalid_request", "Send exactly one of virtualAccountId and depositId."},
		{"a deposit's pay-in without its reference", func() error {
			_, err := f.svc.SandboxPayin(ctx, acme, PayinRequest{DepositID: dep.DepositID, Amount: "10", Currency: "EUR"})
			return err
		}, "invalid_request", "reference is required with depositId"},
		{"a deposit's pay-in with a reference too long", func() error {
			_, err := f.svc.SandboxPayin(ctx, acme, PayinRequest{DepositID: dep.DepositID, Amount: "10", Currency: "EUR", Reference: strings.Repeat("R", 141)})
			return err
		}, "invalid_request", "reference must be at most 140 characters."},
		{"a pay-in to another key's virtual account", func() error {
			_, err := f.svc.SandboxPayin(ctx, globex, PayinRequest{VirtualAccountID: va.VirtualAccountID, Amount: "5", Currency: "EUR"})
			return err
		}, "virtual_account_not_found", "No virtual account with this virtualAccountId exists for this key."},
		{"a pay-in to another key's deposit", func() error {
			_, err := f.svc.SandboxPayin(ctx, globex, PayinRequest{DepositID: dep.DepositID, Amount: "10", Currency: "EUR", Reference: dep.Reference})
			return err
		}, "deposit_not_found", "No deposit with this depositId exists for this key."},
		{"an identity result that is neither", func() error {
			_, err := f.svc.SandboxIdentity(ctx, acme, IdentityRequest{AccountID: active.AccountID, Result: "maybe"})
			return err
		}, "invalid_request", `result must be "approved" or "rejected".`},
		{"an identity result for another key's account", func() error {
			_, err := f.svc.SandboxIdentity(ctx, globex, IdentityRequest{AccountID: active.AccountID, Result: "approved"})
			return err
		}, "account_not_found", "No account with this accountId exists for this key."},
	} {
		err := tc.call()
		if code(err) != tc.code || !strings.Contains(err.Error(), tc.msg) {
			t.Errorf("%s: %v, want %s (%q)", tc.name, err, tc.code, tc.msg)
		}
	}
	if n := count(); n != before {
		t.Errorf("refusals made %d records", n-before)
	}
	// In production the sandbox calls do not exist.
	prod := NewService("production", NewStore(db, "production"), f.bank, &fakeConsent{}, f.svc.now, testSecret)
	if _, err := prod.SandboxPayin(ctx, acme, PayinRequest{VirtualAccountID: va.VirtualAccountID, Amount: "5", Currency: "EUR"}); code(err) != "not_found" {
		t.Errorf("a production pay-in: %v", err)
	}
	if _, err := prod.SandboxIdentity(ctx, acme, IdentityRequest{AccountID: active.AccountID, Result: "approved"}); code(err) != "not_found" {
		t.Errorf("a production identity result: %v", err)
	}
}
