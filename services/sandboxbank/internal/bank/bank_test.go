package bank

import (
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/partnerpay/api/pkg/bankprovider"
	"github.com/partnerpay/api/pkg/iban"
)

type clock struct{ t time.Time }

func (c *clock) now() time.Time { return c.t }

func newBank(c *clock) *Bank {
	return New(Config{PublicURL: "http://bank.test", LinkTTL: 5 * time.Minute, SettlementDelay: 10 * time.Millisecond, PayoutSettle: 3 * time.Second, Now: c.now})
}

var ada = bankprovider.NewCustomer{Email: "ada@example.com", FullName: "Ada Lovelace", Country: "GB",
	WalletAddress: "0x1111111111111111111111111111111111111111", Chain: 84532}

func failure(t *testing.T, err error) *Failure {
	t.Helper()
	var f *Failure
	if !errors.As(err, &f) {
		t.Fatalf("want a provider failure, got %v", err)
	}
	return f
}

func TestRefusalsNameFieldsAndEchoValues(t *testing.T) {
	t.Parallel()
	b := newBank(&clock{time.Now()})
	in := ada
	in.Email, in.Country, in.Chain = "ada@localhost", "KP", 1
	_, _, err := b.CreateCustomer(in, "")
	f := failure(t, err)
	if f.Status != 422 || f.Body.Error.Type != bankprovider.TypeInvalidRequest || len(f.Body.Error.Details) != 3 {
		t.Fatalf("%+v", f.Body)
	}
	d := f.Body.Error.Details
	if d[0].Field != "email" || d[0].Value != "ada@localhost" || d[1].Constraint != "unsupported_country" || d[2].Field != "chain" {
		t.Errorf("details %+v", d)
	}
}

func TestConsentLinkLifecycle(t *testing.T) {
	t.Parallel()
	c := &clock{time.Now()}
	b := newBank(c)
	cus, _, _ := b.CreateCustomer(ada, "")
	if _, _, err := b.CreateVirtualAccount(cus.ID, "EUR"); failure(t, err).Body.Error.Type != bankprovider.TypeTermsRequired {
		t.Fatal("a virtual account before the terms")
	}
	s, err := b.CreateTermsSession(cus.ID, "http://gw.test/consent/return?state=abc")
	if err != nil || !strings.HasPrefix(s.URL, "http://bank.test/consent/ts_") {
		t.Fatalf("%+v %v", s, err)
	}
	if st := b.Page(s.ID); st.Problem != "" || st.CustomerName != "Ada Lovelace" {
		t.Fatalf("fresh link: %+v", st)
	}
	to, st := b.Decide(s.ID, true)
	if st.Problem != "" || to != "http://gw.test/consent/return?result=accepted&state=abc" {
		t.Fatalf("accept: %q %+v", to, st)
	}
	if st := b.Page(s.ID); st.Status != 410 || !strings.Contains(st.Problem, "already used") {
		t.Errorf("a used link: %+v", st)
	}
	got, _ := b.Customer(cus.ID)
	if got.Status != bankprovider.StatusActive {
		t.Errorf("after acceptance a test-mode applicant is approved: %s", got.Status)
	}
	late, _ := b.CreateTermsSession(cus.ID, "http://gw.test/r")
	c.t = c.t.Add(5 * time.Minute)
	if st := b.Page(late.ID); st.Status != 410 || !strings.Contains(st.Problem, "expired") {
		t.Errorf("a link five minutes old: %+v", st)
	}
	if _, st := b.Decide(late.ID, true); st.Status != 410 {
		t.Errorf("deciding on an expired link: %+v", st)
	}
	for id, want := range map[string]string{s.ID: "accepted", late.ID: "expired"} {
		if got, err := b.TermsSession(id); err != nil || got.Status != want {
			t.Errorf("read back %s: %q %v, want %s", id, got.Status, err, want)
		}
	}
}

func TestAFreshLinkKillsEarlierOnes(t *testing.T) {
	t.Parallel()
	b := newBank(&clock{time.Now()})
	cus, _, _ := b.CreateCustomer(ada, "")
	first, _ := b.CreateTermsSession(cus.ID, "http://gw.test/r")
	second, _ := b.CreateTermsSession(cus.ID, "http://gw.test/r")
	if st := b.Page(first.ID); st.Status != 410 || !strings.Contains(st.Problem, "newer link") {
		t.Errorf("the earlier link: %+v", st)
	}
	if _, st := b.Decide(first.ID, true); st.Status != 410 {
		t.Errorf("deciding on a superseded link: %+v", st)
	}
	if got, _ := b.TermsSession(first.ID); got.Status != "superseded" {
		t.Errorf("read back the earlier link: %s", got.Status)
	}
	if st := b.Page(second.ID); st.Problem != "" {
		t.Errorf("the fresh link: %+v", st)
	}
	if _, st := b.Decide(second.ID, false); st.Problem != "" {
		t.Fatalf("declining on the fresh link: %+v", st)
	}
	if got, _ := b.TermsSession(second.ID); got.Status != "declined" {
		t.Errorf("read back a decline: %s", got.Status)
	}
}

func TestVirtualAccountDepositAndSettlement(t *testing.T) {
	t.Parallel()
	b := New(Config{PublicURL: "http://bank.test", LinkTTL: time.Minute, SettlementDelay: 20 * time.Millisecond})
	cus, _, _ := b.CreateCustomer(ada, "")
	s, _ := b.CreateTermsSession(cus.ID, "http://gw.test/r")
	b.Decide(s.ID, true)
	va, created, err := b.CreateVirtualAccount(cus.ID, "EUR")
	if err != nil || !created {
		t.Fatal(err)
	}
	if _, err := iban.Validate(va.IBAN); err != nil || va.BeneficiaryName != "Ada Lovelace" {
		t.Errorf("virtual account %+v: %v", va, err)
	}
	again, created, _ := b.CreateVirtualAccount(cus.ID, "EUR")
	if created || again.ID != va.ID {
		t.Error("the same account is read back")
	}
	if _, _, err := b.CreateVirtualAccount(cus.ID, "USD"); failure(t, err).Body.Error.Details[0].Constraint != "unsupported_currency" {
		t.Error("USD accounts exist in sandbox")
	}
	if _, _, err := b.Deposit(bankprovider.Deposit{VirtualAccountID: va.ID, Amount: "10", Currency: "USD"}, ""); failure(t, err).Status != 422 {
		t.Error("a USD pay-in was taken")
	}
	if _, _, err := b.Deposit(bankprovider.Deposit{VirtualAccountID: va.ID, Amount: "10.001", Currency: "EUR"}, ""); failure(t, err).Body.Error.Details[0].Field != "amount" {
		t.Error("an amount finer than a cent was taken")
	}
	tx, _, err := b.Deposit(bankprovider.Deposit{VirtualAccountID: va.ID, Amount: "100.5", Currency: "EUR"}, "k1")
	if err != nil || tx.Status != "received" || tx.Amount != "100.50" {
		t.Fatalf("%+v %v", tx, err)
	}
	if dup, created, _ := b.Deposit(bankprovider.Deposit{VirtualAccountID: va.ID, Amount: "100.5", Currency: "EUR"}, "k1"); created || dup.ID != tx.ID {
		t.Error("an idempotent retry made a second deposit")
	}
	// The settlement delay's timer moves it on.
	var txs []transaction
	eventually(t, func() bool { txs, _ = b.Transactions(va.ID); return len(txs) == 1 && txs[0].Status == "settled" })
	if len(txs) != 1 || txs[0].Status != "settled" || txs[0].DeliveredAmount != "100.50" || txs[0].DeliveredCurrency != "EURC" ||
		len(txs[0].TxHash) != 66 || !strings.HasPrefix(txs[0].TxHash, "0x") || txs[0].Chain != 84532 {
		t.Fatalf("after settlement: %+v", txs)
	}
}

func TestRestartIsSaidClearly(t *testing.T) {
	t.Parallel()
	first := newBank(&clock{time.Now()})
	cus, _, _ := first.CreateCustomer(ada, "")
	second := newBank(&clock{time.Now()})
	f := failure(t, func() error { _, err := second.Customer(cus.ID); return err }())
	if f.Status != 410 || f.Body.Error.Type != bankprovider.TypeStateLost {
		t.Errorf("a customer from before the restart: %+v", f.Body)
	}
	f = failure(t, func() error { _, err := second.Customer("cus_nope"); return err }())
	if f.Status != 404 || f.Body.Error.Type != bankprovider.TypeResourceMissing {
		t.Errorf("a customer that never was: %+v", f.Body)
	}
}

func TestAOneOffDepositSettlesOnlyItsExactAmountAndReference(t *testing.T) {
	t.Parallel()
	c := &clock{time.Now()}
	b := newBank(c)
	cus, _, _ := b.CreateCustomer(ada, "")
	if _, _, err := b.CreateDepositInstruction(cus.ID, bankprovider.NewDepositInstruction{Currency: "EUR", Amount: "250"}, ""); failure(t, err).Body.Error.Type != bankprovider.TypeTermsRequired {
		t.Fatalf("a deposit before the terms: %v", err)
	}
	s, _ := b.CreateTermsSession(cus.ID, "http://gw.test/r")
	b.Decide(s.ID, true)
	d, created, err := b.CreateDepositInstruction(cus.ID, bankprovider.NewDepositInstruction{Currency: "EUR", Amount: "250"}, "k1")
	if err != nil || !created || d.Amount != "250.00" || d.IBAN != CollectionIBAN || len(d.Reference) != len("SBX-ABCD-EFGH") || d.Status != "awaiting_funds" {
		t.Fatalf("instruction %+v %v", d, err)
	}
	if _, err := iban.Validate(d.IBAN); err != nil {
		t.Errorf("collection IBAN %s: %v", d.IBAN, err)
	}
	if again, created, _ := b.CreateDepositInstruction(cus.ID, bankprovider.NewDepositInstruction{Currency: "EUR", Amount: "250"}, "k1"); created || again.ID != d.ID {
		t.Error("a retry with the same idempotency key made a second instruction")
	}
	pay := func(amount, reference string) *transaction {
		tx, _, err := b.Deposit(bankprovider.Deposit{DepositInstructionID: d.ID, Amount: amount, Currency: "EUR", Reference: reference}, "")
		if err != nil {
			t.Fatal(err)
		}
		return tx
	}
	for _, tt := range []struct{ amount, reference, status, reason string }{
		{"249.99", d.Reference, "unmatched", "wrong_amount"},
		{"250", "SBX-NOPE-NOPE", "unmatched", "wrong_reference"},
		{"250", strings.ToLower(d.Reference), "received", ""},
		{"250", d.Reference, "unmatched", "already_funded"},
	} {
		if tx := pay(tt.amount, tt.reference); tx.Status != tt.status || tx.UnmatchedReason != tt.reason {
			t.Errorf("%s with %q: %s %q, want %s %q", tt.amount, tt.reference, tx.Status, tx.UnmatchedReason, tt.status, tt.reason)
		}
	}
	// The settlement delay's timer moves the matched one on.
	var txs []transaction
	eventually(t, func() bool {
		txs, _ = b.DepositTransactions(d.ID)
		return slices.ContainsFunc(txs, func(tx transaction) bool { return tx.Status == "settled" })
	})
	settled := 0
	for _, tx := range txs {
		if tx.Status == "settled" {
			settled++
		}
	}
	if len(txs) != 4 || settled != 1 {
		t.Errorf("%d transactions, %d settled; want 4 and 1", len(txs), settled)
	}

	late, _, _ := b.CreateDepositInstruction(cus.ID, bankprovider.NewDepositInstruction{Currency: "EUR", Amount: "10"}, "")
	c.t = c.t.Add(DepositLife)
	tx, _, _ := b.Deposit(bankprovider.Deposit{DepositInstructionID: late.ID, Amount: "10", Currency: "EUR", Reference: late.Reference}, "")
	if tx.Status != "unmatched" || tx.UnmatchedReason != "expired" {
		t.Errorf("a transfer after expiry: %s %s", tx.Status, tx.UnmatchedReason)
	}
}

// eventually waits for cond, polling, up to 5 s: a timer of the bank's
// (a settlement delay) moves a record on.
func eventually(t *testing.T, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatal("not within 5 s")
		}
		time.Sleep(5 * time.Millisecond)
	}
}
