package fiat

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/partnerpay/api/pkg/bankprovider"
	"github.com/partnerpay/api/pkg/database"
	"github.com/partnerpay/api/pkg/idempotency"
	"github.com/partnerpay/api/testkit/pgtest"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

// bank is a provider with customers, virtual accounts and deposit
// instructions, whose customers' statuses and instructions' settlements a
// test sets.
type bank struct {
	Provider // anything a test does not set panics
	mu       sync.Mutex
	n        int
	next     string            // the status a new customer gets
	status   map[string]string // by customer
	settled  map[string]bool   // by instruction
	refs     map[string]string // instruction by transfer reference
	reads    int               // Customer and DepositTransactions calls
}

func newBank() *bank {
	return &bank{next: bankprovider.StatusTermsRequired, status: map[string]string{}, settled: map[string]bool{}, refs: map[string]string{}}
}

func (b *bank) CreateCustomer(_ context.Context, _ bankprovider.NewCustomer, _ string) (bankprovider.Customer, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.n++
	id := fmt.Sprintf("cus_%d", b.n)
	b.status[id] = b.next
	return bankprovider.Customer{ID: id, Status: b.next}, nil
}

func (b *bank) set(customer, status string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.status[customer] = status
}

func (b *bank) Customer(_ context.Context, id string) (bankprovider.Customer, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.reads++
	return bankprovider.Customer{ID: id, Status: b.status[id]}, nil
}

func (b *bank) CreateVirtualAccount(_ context.Context, customer, currency string) (bankprovider.VirtualAccount, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.status[customer] != bankprovider.StatusActive {
		return bankprovider.VirtualAccount{}, &bankprovider.Error{Status: 409, Body: errorBody(bankprovider.TypeTermsRequired)}
	}
	return bankprovider.VirtualAccount{ID: "bva_" + customer + "_" + currency, Currency: currency, IBAN: "DE89370400440532013000",
		BIC: "SBXBDEB1XXX", BeneficiaryName: "Ada Lovelace"}, nil
}

func errorBody(typ string) bankprovider.ErrorBody {
	var body bankprovider.ErrorBody
	body.Error.Type = typ
	return body
}

func (b *bank) CreateDepositInstruction(_ context.Context, customer string, in bankprovider.NewDepositInstruction, _ string) (bankprovider.DepositInstruction, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.status[customer] != bankprovider.StatusActive {
		return bankprovider.DepositInstruction{}, &bankprovider.Error{Status: 409, Body: errorBody(bankprovider.TypeTermsRequired)}
	}
	b.n++
	b.refs[fmt.Sprintf("SBX%04d", b.n)] = fmt.Sprintf("di_%d", b.n)
	return bankprovider.DepositInstruction{ID: fmt.Sprintf("di_%d", b.n), CustomerID: customer, Currency: in.Currency, Amount: in.Amount,
		Reference: fmt.Sprintf("SBX%04d", b.n), IBAN: "DE02100100100006820101", BIC: "SBXBDEB1XXX", BeneficiaryName: "Sandbox Bank Collections",
		ExpiresAt: "2027-01-01T00:00:00Z"}, nil
}

func (b *bank) DepositTransactions(_ context.Context, id string) ([]bankprovider.Transaction, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.reads++
	if !b.settled[id] {
		return nil, nil
	}
	t := bankprovider.Transaction{ID: "t_" + id, Type: "deposit", Status: "settled", Amount: "10.00", DeliveredAmount: "10.00", TxHash: "0xaa"}
	t.Raw, _ = json.Marshal(t)
	return []bankprovider.Transaction{t}, nil
}

// Transactions lists no transfer to any virtual account.
func (b *bank) Transactions(context.Context, string) ([]bankprovider.Transaction, error) {
	return nil, nil
}

// fiatFixture is the service on a real store, its clock a second on at
// each reading, so records made in a row are newest-last.
type fiatFixture struct {
	svc    *service
	bank   *bank
	db     *database.DB
	worker *Worker
}

func newFiatFixture(db *database.DB) fiatFixture {
	var mu sync.Mutex
	t := time.Date(2026, 11, 26, 9, 0, 0, 0, time.UTC)
	now := func() time.Time {
		mu.Lock()
		defer mu.Unlock()
		t = t.Add(time.Second)
		return t
	}
	b := newBank()
	svc := NewService("sandbox", NewStore(db, "sandbox"), b, &fakeConsent{}, now, testSecret)
	return fiatFixture{svc: svc.(*service), bank: b, db: db, worker: NewWorker(svc, 2*time.Second, slog.New(slog.DiscardHandler), prometheus.NewRegistry())}
}

// work runs a few of the worker's rounds (the fixture's clock moves a
// second at each reading, so records in flight are always due again).
func (f fiatFixture) work(t *testing.T) {
	t.Helper()
	for range 3 {
		if _, err := f.worker.Round(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
}

func ptr(s string) *string { return &s }

func (f fiatFixture) account(t *testing.T, status string, ref *string) Account {
	t.Helper()
	f.bank.next = status
	a, err := f.svc.CreateAccount(context.Background(), acme,
		AccountRequest{Email: "ada@example.com", FullName: "Ada Lovelace", Country: "DE", WalletAddress: wallet, Chain: 84532, Reference: ref})
	if err != nil {
		t.Fatal(err)
	}
	return a
}

// The three fiat lists: each record carries the partner's
// reference, newest first, filtered, paged; an unsettled status is read
// again from the provider and kept; another key sees nothing, not even
// with this key's cursor.
func TestFiatRecordsAreListedWithTheirReference(t *testing.T) {
	t.Parallel()
	db := pgtest.Open(t, idempotency.Migrations, Feed.Migrations(), Migrations)
	f := newFiatFixture(db)
	ctx := context.Background()
	pending := f.account(t, bankprovider.StatusTermsRequired, ptr("user-1"))
	active := f.account(t, bankprovider.StatusActive, ptr("user-2"))
	plain := f.account(t, bankprovider.StatusActive, nil)
	if pending.Reference != "user-1" || pending.Status != StatusConsentRequired || pending.CreatedAt != "2026-11-26T09:00:01Z" || plain.Reference != "" {
		t.Fatalf("answers %+v %+v", pending, plain)
	}
	accounts := func(caller string, query string) (AccountList, error) {
		c := acme
		c.KeyID = caller
		q, _ := url.ParseQuery(query)
		return f.svc.ListAccounts(ctx, c, q)
	}
	page, err := accounts("acme", "limit=2")
	if err != nil || !page.HasMore || len(page.Data) != 2 || page.Data[0] != plain || page.Data[1] != active {
		t.Fatalf("first page %+v %v", page, err)
	}
	// The user accepted the terms and passed: the worker reads it, and the
	// next page answers it.
	f.bank.set("cus_1", bankprovider.StatusActive)
	if next, _ := accounts("acme", "limit=2&startingAfter="+url.QueryEscape(page.NextCursor)); len(next.Data) != 1 || next.Data[0].Status != StatusConsentRequired {
		t.Fatalf("a list read before the worker's round: %+v, want the status last kept", next)
	}
	f.work(t)
	next, err := accounts("acme", "limit=2&startingAfter="+url.QueryEscape(page.NextCursor))
	if err != nil || next.HasMore || len(next.Data) != 1 || next.Data[0].AccountID != pending.AccountID || next.Data[0].Status != StatusActive ||
		next.Data[0].ConsentSessionID != "" || next.Data[0].Reference != "user-1" {
		t.Fatalf("second page %+v %v", next, err)
	}
	reads := f.bank.reads
	if got, _ := accounts("acme", "status=active"); len(got.Data) != 3 || f.bank.reads != reads {
		t.Errorf("status=active: %d accounts, %d provider reads (a list never asks the provider)", len(got.Data), f.bank.reads-reads)
	}
	if got, _ := accounts("acme", "reference=user-2"); len(got.Data) != 1 || got.Data[0].AccountID != active.AccountID {
		t.Errorf("reference=user-2: %+v", got)
	}
	if got, err := accounts("globex", ""); err != nil || len(got.Data) != 0 {
		t.Errorf("another key: %+v %v", got, err)
	}
	if _, err := accounts("globex", "startingAfter="+url.QueryEscape(page.NextCursor)); code(err) != "invalid_request" ||
		!strings.Contains(err.Error(), "startingAfter") {
		t.Errorf("another key's cursor: %v", err)
	}

	va, err := f.svc.CreateVirtualAccount(ctx, acme, VirtualAccountRequest{AccountID: active.AccountID, Currency: "EUR", Reference: ptr("wallet-top-up")})
	if err != nil || va.Reference != "wallet-top-up" || va.BankDetails == nil {
		t.Fatalf("virtual account %+v %v", va, err)
	}
	again, err := f.svc.CreateVirtualAccount(ctx, acme, VirtualAccountRequest{AccountID: active.AccountID, Currency: "EUR", Reference: ptr("other")})
	if err != nil || again.VirtualAccountID != va.VirtualAccountID || again.Reference != "wallet-top-up" {
		t.Errorf("the same provider account again: %+v %v (one record, its first reference)", again, err)
	}
	vas, err := f.svc.ListVirtualAccounts(ctx, acme, url.Values{"reference": {"wallet-top-up"}})
	want := va
	want.BankDetails = nil
	if err != nil || len(vas.Data) != 1 || vas.Data[0] != want {
		t.Errorf("virtual accounts %+v %v, want %+v", vas, err, want)
	}

	var deps []Deposit
	for _, ref := range []string{"inv-1", "inv-2"} {
		d, err := f.svc.CreateDeposit(ctx, acme, DepositRequest{AccountID: active.AccountID, Currency: "EUR", Amount: "10.00", PartnerReference: ptr(ref)})
		if err != nil || d.PartnerReference != ref || d.Reference == "" || d.Reference == ref || d.AccountID != active.AccountID {
			t.Fatalf("deposit %+v %v", d, err)
		}
		deps = append(deps, d)
	}
	f.bank.mu.Lock()
	f.bank.settled[f.bank.refs[deps[0].Reference]] = true
	f.bank.mu.Unlock()
	f.work(t)
	list, err := f.svc.ListDeposits(ctx, acme, url.Values{})
	if err != nil || len(list.Data) != 2 || list.Data[1].DepositID != deps[0].DepositID || list.Data[1].Status != "funded" ||
		list.Data[0].Status != "awaiting_deposit" {
		t.Fatalf("deposits %+v %v", list, err)
	}
	deps[1].Status = "awaiting_deposit"
	if list.Data[0] != deps[1] {
		t.Errorf("a listed deposit %+v is not its creating answer %+v", list.Data[0], deps[1])
	}
	if got, _ := f.svc.ListDeposits(ctx, acme, url.Values{"status": {"funded"}}); len(got.Data) != 1 || got.Data[0].DepositID != deps[0].DepositID {
		t.Errorf("status=funded: %+v", got)
	}
	if got, _ := f.svc.ListDeposits(ctx, acme, url.Values{"reference": {"inv-2"}}); len(got.Data) != 1 || got.Data[0].DepositID != deps[1].DepositID {
		t.Errorf("reference=inv-2: %+v", got)
	}
}

// A reference that is not 1-64 printable ASCII characters is refused, and
// nothing is made.
func TestFiatReferencesAreChecked(t *testing.T) {
	t.Parallel()
	db := pgtest.Open(t, idempotency.Migrations, Feed.Migrations(), Migrations)
	f := newFiatFixture(db)
	ctx := context.Background()
	active := f.account(t, bankprovider.StatusActive, nil)
	for _, bad := range []string{"", strings.Repeat("a", 65), "tab\there", "naïve"} {
		_, err := f.svc.CreateAccount(ctx, acme, AccountRequest{Email: "ada@example.com", FullName: "Ada", Country: "DE", WalletAddress: wallet, Chain: 84532, Reference: &bad})
		if code(err) != "invalid_request" || !strings.Contains(err.Error(), "reference") {
			t.Errorf("account reference %q: %v", bad, err)
		}
		_, err = f.svc.CreateVirtualAccount(ctx, acme, VirtualAccountRequest{AccountID: active.AccountID, Currency: "EUR", Reference: &bad})
		if code(err) != "invalid_request" || !strings.Contains(err.Error(), "reference") {
			t.Errorf("virtual account reference %q: %v", bad, err)
		}
		_, err = f.svc.CreateDeposit(ctx, acme, DepositRequest{AccountID: active.AccountID, Currency: "EUR", Amount: "1", PartnerReference: &bad})
		if code(err) != "invalid_request" || !strings.Contains(err.Error(), "partnerReference") {
			t.Errorf("deposit partnerReference %q: %v", bad, err)
		}
	}
	for _, table := range []string{"fiat_accounts", "fiat_virtual_accounts", "fiat_deposits"} {
		var n int
		if err := db.QueryRow(ctx, `SELECT count(*) FROM `+table).Scan(&n); err != nil || n > 1 || (table == "fiat_accounts" && n != 1) {
			t.Errorf("%s: %d rows %v", table, n, err)
		}
	}
}

// The store's rules hold in the database itself: one
// record per provider object, the owner and terms of a record never
// change, an account's status cannot be unset, a virtual account is
// active, a funded deposit stays funded.
func TestFiatStoreRulesHoldInTheDatabase(t *testing.T) {
	t.Parallel()
	db := pgtest.Open(t, idempotency.Migrations, Feed.Migrations(), Migrations)
	f := newFiatFixture(db)
	ctx := context.Background()
	acc := f.account(t, bankprovider.StatusActive, ptr("user-1"))
	va, err := f.svc.CreateVirtualAccount(ctx, acme, VirtualAccountRequest{AccountID: acc.AccountID, Currency: "EUR"})
	if err != nil {
		t.Fatal(err)
	}
	d, err := f.svc.CreateDeposit(ctx, acme, DepositRequest{AccountID: acc.AccountID, Currency: "EUR", Amount: "10.00"})
	if err != nil {
		t.Fatal(err)
	}
	f.bank.mu.Lock()
	f.bank.settled[f.bank.refs[d.Reference]] = true
	f.bank.mu.Unlock()
	f.work(t)
	if st, err := f.svc.Status(ctx, acme, StatusRequest{DepositID: d.DepositID}); err != nil || st.Status != "funded" {
		t.Fatalf("the deposit, once the worker read its money: %+v %v", st, err)
	}
	for _, tc := range []struct {
		name, sql string
		args      []any
	}{
		{"a second account for one customer", `INSERT INTO fiat_accounts (id, key_id, provider_customer_id, created_at) VALUES ('acc_x', 'k', 'cus_1', $1)`, []any{time.Now()}},
		{"a second record for one provider account", `INSERT INTO fiat_virtual_accounts (id, key_id, account_id, provider_account_id, currency, created_at)
			VALUES ('va_x', 'acme', $1, 'bva_cus_1_EUR', 'EUR', $2)`, []any{acc.AccountID, time.Now()}},
		{"a deposit of an account that does not exist", `INSERT INTO fiat_deposits (id, key_id, account_id, provider_instruction_id, created_at)
			VALUES ('dep_x', 'acme', 'acc_none', 'di_x', $1)`, []any{time.Now()}},
		{"an account given to another key", `UPDATE fiat_accounts SET key_id = 'globex'`, nil},
		{"an account's reference changed", `UPDATE fiat_accounts SET reference = 'other'`, nil},
		{"an account's status unset", `UPDATE fiat_accounts SET status = NULL`, nil},
		{"an account status not in the list", `UPDATE fiat_accounts SET status = 'closed'`, nil},
		{"a virtual account's currency changed", `UPDATE fiat_virtual_accounts SET currency = 'USD'`, nil},
		{"a virtual account closed", `UPDATE fiat_virtual_accounts SET status = 'closed'`, nil},
		{"a deposit's amount changed", `UPDATE fiat_deposits SET amount = '1000000.00'`, nil},
		{"a deposit's transfer reference changed", `UPDATE fiat_deposits SET transfer_reference = 'X'`, nil},
		{"a funded deposit back to awaiting", `UPDATE fiat_deposits SET status = 'awaiting_deposit'`, nil},
		{"a reference too long", `UPDATE fiat_deposits SET reference = $1 WHERE reference IS NULL`, []any{strings.Repeat("r", 65)}},
	} {
		if _, err := db.Exec(ctx, tc.sql, tc.args...); err == nil {
			t.Errorf("%s: the database took it", tc.name)
		}
	}
	// What may change does.
	if err := f.svc.store.SetAccountStatus(ctx, acc.AccountID, StatusRejected, time.Now()); err != nil {
		t.Errorf("an account's status: %v", err)
	}
	if err := f.svc.store.SetConsentSession(ctx, acc.AccountID, "cs_new"); err != nil {
		t.Errorf("an account's consent session: %v", err)
	}
	got, err := f.svc.store.Deposit(ctx, d.DepositID)
	if err != nil || got.Status != "funded" || got.Amount != "10" || got.TransferReference != d.Reference || !got.ExpiresAt.Equal(time.Date(2027, 1, 1, 0, 0, 0, 0, time.UTC)) {
		t.Errorf("the deposit as kept: %+v %v", got, err)
	}
	if _, err := f.svc.store.VirtualAccount(ctx, va.VirtualAccountID); err != nil {
		t.Error(err)
	}
}
