package fiat

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/partnerpay/api/pkg/bankprovider"
	"github.com/partnerpay/api/pkg/consentapi"
	"github.com/partnerpay/api/pkg/envelope"
	"github.com/partnerpay/api/pkg/format"
	"github.com/partnerpay/api/pkg/partner"
)

// memStore is the Store in memory; lookups counts every read, so a test can
// tell an id was refused by its shape alone.
type memStore struct {
	Store    // the lists and the worker's rounds are the store test's (list_test.go): these panic
	mu       sync.Mutex
	accounts map[string]AccountRecord
	vas      map[string]VirtualAccountRecord
	deposits map[string]DepositRecord
	lookups  int
}

func newMemStore() *memStore {
	return &memStore{accounts: map[string]AccountRecord{}, vas: map[string]VirtualAccountRecord{}, deposits: map[string]DepositRecord{}}
}

func (m *memStore) CreateAccount(_ context.Context, r AccountRecord, _ Account) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.accounts[r.ID] = r
	return nil
}

func (m *memStore) Account(_ context.Context, id string) (AccountRecord, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.lookups++
	r, ok := m.accounts[id]
	if !ok {
		return r, ErrNotFound
	}
	return r, nil
}

func (m *memStore) SetConsentSession(_ context.Context, accountID, sessionID string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	r := m.accounts[accountID]
	r.ConsentSessionID = sessionID
	m.accounts[accountID] = r
	return nil
}

func (m *memStore) SetAccountStatus(_ context.Context, accountID, status string, at time.Time) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	r := m.accounts[accountID]
	r.Status, r.StatusAt = status, at
	m.accounts[accountID] = r
	return nil
}

func (m *memStore) VirtualAccountFor(_ context.Context, r VirtualAccountRecord, answer func(VirtualAccountRecord) VirtualAccount) (VirtualAccount, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, have := range m.vas {
		if have.ProviderAccountID == r.ProviderAccountID {
			return answer(have), nil
		}
	}
	m.vas[r.ID] = r
	return answer(r), nil
}

func (m *memStore) VirtualAccount(_ context.Context, id string) (VirtualAccountRecord, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.lookups++
	r, ok := m.vas[id]
	if !ok {
		return r, ErrNotFound
	}
	return r, nil
}

func (m *memStore) CreateDeposit(_ context.Context, r DepositRecord, _ Deposit) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.deposits[r.ID] = r
	return nil
}

func (m *memStore) Deposit(_ context.Context, id string) (DepositRecord, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.lookups++
	r, ok := m.deposits[id]
	if !ok {
		return r, ErrNotFound
	}
	return r, nil
}

// fakeBank is the provider: customers in a status, and transactions per
// virtual account.
type fakeBank struct {
	Provider     // anything a test does not set panics
	status       string
	refuse       error
	created      []bankprovider.NewCustomer
	transactions map[string][]bankprovider.Transaction
}

func (b *fakeBank) CreateCustomer(_ context.Context, in bankprovider.NewCustomer, _ string) (bankprovider.Customer, error) {
	if b.refuse != nil {
		return bankprovider.Customer{}, b.refuse
	}
	b.created = append(b.created, in)
	return bankprovider.Customer{ID: "cus_1", Status: b.status}, nil
}

func (b *fakeBank) Transactions(_ context.Context, id string) ([]bankprovider.Transaction, error) {
	return b.transactions[id], nil
}

type fakeConsent struct{ created []consentapi.CreateSession }

func (c *fakeConsent) Create(_ context.Context, in consentapi.CreateSession) (consentapi.Session, error) {
	c.created = append(c.created, in)
	return consentapi.Session{ConsentSessionID: "cs_" + strings.Repeat("c", format.IDHexLen)}, nil
}

func (c *fakeConsent) Get(context.Context, string, string) (consentapi.Session, error) {
	return consentapi.Session{}, errors.New("not used")
}

var (
	acme   = partner.Caller{KeyID: "acme", Grants: partner.Grants{Products: []string{"fiat"}, Chains: partner.Chains{Destination: []int64{84532}}}}
	globex = partner.Caller{KeyID: "globex", Grants: acme.Grants}
)

func newTestService() (*service, *memStore, *fakeBank, *fakeConsent) {
	st, bank, cons := newMemStore(), &fakeBank{transactions: map[string][]bankprovider.Transaction{}}, &fakeConsent{}
	svc := NewService("sandbox", st, bank, cons, func() time.Time { return time.Unix(1_800_000_000, 0) }, testSecret).(*service)
	return svc, st, bank, cons
}

// code is the wire code of err, "" for a non-envelope error.
func code(err error) string {
	var e *envelope.Error
	if errors.As(err, &e) {
		return string(e.Code)
	}
	return ""
}

var testSecret = []byte("0123456789abcdef0123456789abcdef")

const wallet = "0x5aAeb6053F3E94C9b9A09f33669435E7Ef1BeAed"

func TestOnboardingAsksForConsentWhenTheBankDoes(t *testing.T) {
	t.Parallel()
	svc, st, bank, cons := newTestService()
	bank.status = bankprovider.StatusTermsRequired
	a, err := svc.CreateAccount(context.Background(), acme, AccountRequest{Email: "ada@example.com", FullName: "Ada Lovelace", Country: "de", WalletAddress: wallet, Chain: 84532})
	if err != nil {
		t.Fatal(err)
	}
	if a.Status != StatusConsentRequired || !format.ValidID(accountPrefix, a.AccountID) || a.ConsentSessionID == "" {
		t.Errorf("account %+v, want consent_required with a session", a)
	}
	if len(cons.created) != 1 || cons.created[0].Owner != "acme" || cons.created[0].AccountID != a.AccountID {
		t.Errorf("consent sessions %+v", cons.created)
	}
	if rec := st.accounts[a.AccountID]; rec.Owner != "acme" || rec.ProviderCustomerID != "cus_1" || rec.ConsentSessionID != a.ConsentSessionID {
		t.Errorf("stored %+v", rec)
	}
	if bank.created[0].Country != "DE" {
		t.Errorf("the bank got country %q; codes are upper-cased first", bank.created[0].Country)
	}

	bank.status = bankprovider.StatusActive
	if a, err := svc.CreateAccount(context.Background(), acme, AccountRequest{Email: "bob@example.com", FullName: "Bob", Country: "DE", WalletAddress: wallet, Chain: 84532}); err != nil ||
		a.Status != StatusActive || a.ConsentSessionID != "" || len(cons.created) != 1 {
		t.Errorf("an account the bank made active: %+v %v (consent sessions %d)", a, err, len(cons.created))
	}
}

// A body that is refused changes nothing: no customer at the bank, no
// record, no consent session.
func TestOnboardingRefusesABadBodyBeforeTheBank(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name   string
		req    AccountRequest
		caller partner.Caller
		code   string
		msg    string
	}{
		{"no email", AccountRequest{FullName: "Ada", Country: "DE", WalletAddress: wallet, Chain: 84532}, acme, "invalid_request", "email is required."},
		{"a display name in the email", AccountRequest{Email: "Ada <ada@example.com>", FullName: "Ada", Country: "DE", WalletAddress: wallet, Chain: 84532}, acme, "invalid_request", "email must be"},
		{"a name too long", AccountRequest{Email: "ada@example.com", FullName: strings.Repeat("a", 141), Country: "DE", WalletAddress: wallet, Chain: 84532}, acme, "invalid_request", "fullName is required"},
		{"a bad checksum", AccountRequest{Email: "ada@example.com", FullName: "Ada", Country: "DE", WalletAddress: "0x5AAeb6053F3E94C9b9A09f33669435E7Ef1BeAed", Chain: 84532}, acme, "invalid_request", "walletAddress"},
		{"not the settlement network", AccountRequest{Email: "ada@example.com", FullName: "Ada", Country: "DE", WalletAddress: wallet, Chain: 11155111}, acme, "invalid_request", "The on-ramp delivers on chain 84532"},
		{"a chain the key may not receive on", AccountRequest{Email: "ada@example.com", FullName: "Ada", Country: "DE", WalletAddress: wallet, Chain: 84532},
			partner.Caller{KeyID: "k", Grants: partner.Grants{Products: []string{"fiat"}}}, "chain_not_allowed", ""},
	} {
		svc, st, bank, cons := newTestService()
		bank.status = bankprovider.StatusTermsRequired
		_, err := svc.CreateAccount(context.Background(), tc.caller, tc.req)
		if code(err) != tc.code || !strings.Contains(err.Error(), tc.msg) {
			t.Errorf("%s: %v, want %s (%q)", tc.name, err, tc.code, tc.msg)
		}
		if len(bank.created) != 0 || len(st.accounts) != 0 || len(cons.created) != 0 {
			t.Errorf("%s: something was made: %d customers, %d accounts, %d sessions", tc.name, len(bank.created), len(st.accounts), len(cons.created))
		}
	}
}

// The funding status checks the account first (a wrong accountId is
// account_not_found whatever the other id), answers another key's records
// as unknown, and refuses ids by their shape without a lookup.
func TestFundingStatusNamesTheRightUnknownID(t *testing.T) {
	t.Parallel()
	svc, st, _, _ := newTestService()
	id := func(prefix, c string) string { return prefix + strings.Repeat(c, format.IDHexLen) }
	acc, other, va := id(accountPrefix, "1"), id(accountPrefix, "2"), id(virtualAccountPrefix, "3")
	st.accounts[acc] = AccountRecord{ID: acc, Owner: "acme"}
	st.accounts[other] = AccountRecord{ID: other, Owner: "acme"}
	st.vas[va] = VirtualAccountRecord{ID: va, Owner: "acme", AccountID: acc, ProviderAccountID: "bva_1"}
	ctx := context.Background()
	for _, tc := range []struct {
		name   string
		caller partner.Caller
		req    StatusRequest
		code   string
	}{
		{"both ids", acme, StatusRequest{VirtualAccountID: va, DepositID: id(depositPrefix, "4")}, "invalid_request"},
		{"neither id", acme, StatusRequest{AccountID: acc}, "invalid_request"},
		{"an unknown account with a real virtual account", acme, StatusRequest{AccountID: id(accountPrefix, "9"), VirtualAccountID: va}, "account_not_found"},
		{"a malformed account with a real virtual account", acme, StatusRequest{AccountID: "acc_x", VirtualAccountID: va}, "account_not_found"},
		{"another key's virtual account", globex, StatusRequest{VirtualAccountID: va}, "virtual_account_not_found"},
		{"another key asking with the owner's account", globex, StatusRequest{AccountID: acc, VirtualAccountID: va}, "account_not_found"},
		{"the virtual account of another account", acme, StatusRequest{AccountID: other, VirtualAccountID: va}, "virtual_account_not_found"},
		{"an unknown deposit", acme, StatusRequest{AccountID: acc, DepositID: id(depositPrefix, "5")}, "deposit_not_found"},
	} {
		if _, err := svc.Status(ctx, tc.caller, tc.req); code(err) != tc.code {
			t.Errorf("%s: %v, want %s", tc.name, err, tc.code)
		}
	}
	before := st.lookups
	for _, bad := range []string{"va_", "va_" + strings.Repeat("g", format.IDHexLen), "acc_" + strings.Repeat("1", format.IDHexLen), strings.Repeat("x", 10000)} {
		if _, err := svc.Status(ctx, acme, StatusRequest{VirtualAccountID: bad}); code(err) != "virtual_account_not_found" {
			t.Errorf("id %.20q: %v", bad, err)
		}
	}
	if st.lookups != before {
		t.Errorf("ids of the wrong shape were looked up (%d lookups)", st.lookups-before)
	}
}

// funding adds up what settled, passes every raw record on, and refuses a
// settled record without its amounts or hash rather than call it funded.
func TestFundingAddsUpWhatSettled(t *testing.T) {
	t.Parallel()
	raw := func(s string) json.RawMessage { return json.RawMessage(`{"id":"` + s + `"}`) }
	got, err := funding([]bankprovider.Transaction{
		{ID: "t1", Type: "deposit", Status: "settled", Amount: "100.50", DeliveredAmount: "100.50", TxHash: "0xaa", Raw: raw("t1")},
		{ID: "t2", Type: "deposit", Status: "received", Amount: "5", Raw: raw("t2")},
		{ID: "t3", Type: "deposit", Status: "settled", Amount: "0.25", DeliveredAmount: "0.24", TxHash: "0xbb", Raw: raw("t3")},
	})
	if err != nil || got.Status != "funded" || got.DepositedAmount != "100.75" || got.DeliveredAmount != "100.74" || got.TxHash != "0xbb" || len(got.Transactions) != 3 {
		t.Errorf("%+v %v", got, err)
	}
	if got, err := funding(nil); err != nil || got.Status != "awaiting_deposit" || got.Transactions == nil || got.TxHash != "" {
		t.Errorf("no transactions: %+v %v (transactions must be [] on the wire, not null)", got, err)
	}
	if _, err := funding([]bankprovider.Transaction{{ID: "t4", Type: "deposit", Status: "settled", Amount: "1"}}); err == nil || code(err) != "" {
		t.Errorf("a settled record without a hash: %v, want an internal error", err)
	}
}
