// Package bank is the sandbox bank: a stand-in for the external bank
// provider, with the provider's rules and none of its money. It keeps its
// state in memory; every id it issues carries the boot it was issued in, so
// after a restart it says "this record was lost" rather than "never heard of
// it".
package bank

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"math/big"
	"net/url"
	"regexp"
	"strings"
	"sync"
	"time"

	"github.com/partnerpay/api/pkg/bankprovider"
	"github.com/partnerpay/api/pkg/iban"
)

// Config tunes the simulator.
type Config struct {
	PublicURL       string        // where browsers reach the hosted consent and card pages
	LinkTTL         time.Duration // life of a consent or card page link (five minutes)
	SettlementDelay time.Duration // pay-in received or card approved → stablecoins delivered; sell deposit → card credited
	IdentityDelay   time.Duration // terms accepted → identity result
	PayoutSettle    time.Duration // payout handed over → its outcome (a return: one more)
	Latency         time.Duration // added to every provider API call: a slow provider, for fault tests
	Now             func() time.Time
}

// Bank is the simulator's state.
type Bank struct {
	cfg    Config
	epoch  string
	booted time.Time

	mu        sync.Mutex
	customers map[string]*customer
	sessions  map[string]*session
	accounts  map[string]*account
	deposits  map[string]*instruction
	txs       map[string]*transaction
	// The card side (cards.go).
	cardOrders   map[string]*cardOrder
	cardSessions map[string]*cardSession
	// The payout side (payouts.go).
	payouts    map[string]*payout
	payoutRefs map[string]string // our payout id → the provider's
	changes    []change          // the changes feed, oldest first
	upcoming   []upcoming        // changes to come, in the order they happen
	idem       map[string]string // Idempotency-Key → record id
	seq        int64
}

type customer struct {
	bankprovider.Customer
	presetIdentity string // a forced result waiting for the terms to be accepted
	accounts       map[string]string
}

type session struct {
	bankprovider.TermsSession
	created time.Time
	expires time.Time
	used    bool
}

type account struct {
	bankprovider.VirtualAccount
	txs []string
}

// instruction is a one-off deposit: money the bank expects on its
// collection account, recognised by its exact amount and reference.
type instruction struct {
	bankprovider.DepositInstruction
	expires time.Time
	txs     []string
}

type transaction struct {
	ID                string `json:"id"`
	Object            string `json:"object"`
	Type              string `json:"type"`
	Status            string `json:"status"`
	VirtualAccountID  string `json:"virtual_account_id"`
	Amount            string `json:"amount"`
	Currency          string `json:"currency"`
	Rate              string `json:"rate,omitempty"`
	DeliveredAmount   string `json:"delivered_amount,omitempty"`
	DeliveredCurrency string `json:"delivered_currency,omitempty"`
	Chain             int64  `json:"chain,omitempty"`
	WalletAddress     string `json:"wallet_address,omitempty"`
	TxHash            string `json:"tx_hash,omitempty"`
	Reference         string `json:"reference,omitempty"`
	DepositID         string `json:"deposit_instruction_id,omitempty"`
	UnmatchedReason   string `json:"unmatched_reason,omitempty"`
	CreatedAt         string `json:"created_at"`
	SettledAt         string `json:"settled_at,omitempty"`
}

// New returns an empty bank.
func New(cfg Config) *Bank {
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	var e [3]byte
	_, _ = rand.Read(e[:])
	return &Bank{
		cfg: cfg, epoch: hex.EncodeToString(e[:]), booted: cfg.Now().UTC(),
		customers: map[string]*customer{}, sessions: map[string]*session{},
		accounts: map[string]*account{}, deposits: map[string]*instruction{}, txs: map[string]*transaction{}, idem: map[string]string{},
		cardOrders: map[string]*cardOrder{}, cardSessions: map[string]*cardSession{},
		payouts: map[string]*payout{}, payoutRefs: map[string]string{},
	}
}

// Failure is a refusal in the provider's words.
type Failure struct {
	Status int
	Body   bankprovider.ErrorBody
}

func (f *Failure) Error() string { return f.Body.Error.Type + ": " + f.Body.Error.Message }

func fail(status int, typ, msg string, details ...bankprovider.FieldDetail) *Failure {
	f := &Failure{Status: status}
	f.Body.Error.Type, f.Body.Error.Message, f.Body.Error.Details = typ, msg, details
	return f
}

// invalid names the fields a request got wrong and, as real providers do,
// echoes what was sent.
func invalid(details ...bankprovider.FieldDetail) *Failure {
	return fail(422, bankprovider.TypeInvalidRequest, "The request has invalid fields.", details...)
}

func (b *Bank) newID(prefix string) string {
	var r [8]byte
	_, _ = rand.Read(r[:])
	return prefix + "_" + b.epoch + hex.EncodeToString(r[:])
}

// missing tells a record lost in a restart from one that never existed.
func (b *Bank) missing(kind, id string) *Failure {
	if i := strings.IndexByte(id, '_'); i > 0 && len(id) == i+1+6+16 && id[i+1:i+7] != b.epoch {
		return fail(410, bankprovider.TypeStateLost, fmt.Sprintf(
			"The sandbox bank keeps its state in memory and was restarted at %s; %s %s is gone. Create it again.",
			b.booted.Format(time.RFC3339), kind, id))
	}
	return fail(404, bankprovider.TypeResourceMissing, fmt.Sprintf("No such %s: %s", kind, id))
}

func (b *Bank) now() time.Time { return b.cfg.Now().UTC() }

var (
	emailRe  = regexp.MustCompile(`^[^@\s]+@[^@\s]+\.[^@\s.]+$`)
	walletRe = regexp.MustCompile(`^0x[0-9a-fA-F]{40}$`)
	amountRe = regexp.MustCompile(`^\d+(\.\d{1,2})?$`)
)

// The provider does not onboard residents of comprehensively sanctioned countries.
var sanctioned = map[string]bool{"CU": true, "IR": true, "KP": true, "SY": true}

// Testnets the sandbox bank settles on.
var settlementChains = map[int64]bool{84532: true, 11155111: true}

// CreateCustomer onboards a user; they must accept the terms next.
func (b *Bank) CreateCustomer(in bankprovider.NewCustomer, idempotencyKey string) (bankprovider.Customer, bool, error) {
	var details []bankprovider.FieldDetail
	if !emailRe.MatchString(in.Email) {
		details = append(details, bankprovider.FieldDetail{Field: "email", Constraint: "invalid_format", Value: in.Email})
	}
	if n := len([]rune(strings.TrimSpace(in.FullName))); n == 0 || n > 140 {
		details = append(details, bankprovider.FieldDetail{Field: "full_name", Constraint: "invalid_length", Value: in.FullName})
	}
	switch {
	case len(in.Country) != 2 || strings.ToUpper(in.Country) != in.Country:
		details = append(details, bankprovider.FieldDetail{Field: "country", Constraint: "invalid_format", Value: in.Country})
	case sanctioned[in.Country]:
		details = append(details, bankprovider.FieldDetail{Field: "country", Constraint: "unsupported_country", Value: in.Country})
	}
	if !walletRe.MatchString(in.WalletAddress) {
		details = append(details, bankprovider.FieldDetail{Field: "wallet_address", Constraint: "invalid_format", Value: in.WalletAddress})
	}
	if !settlementChains[in.Chain] {
		details = append(details, bankprovider.FieldDetail{Field: "chain", Constraint: "unsupported_chain", Value: in.Chain})
	}
	if len(details) > 0 {
		return bankprovider.Customer{}, false, invalid(details...)
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if id, ok := b.idem["customer:"+idempotencyKey]; ok && idempotencyKey != "" {
		return b.customers[id].Customer, false, nil
	}
	c := &customer{Customer: bankprovider.Customer{
		ID: b.newID("cus"), Email: in.Email, FullName: strings.TrimSpace(in.FullName), Country: in.Country,
		WalletAddress: in.WalletAddress, Chain: in.Chain, Status: bankprovider.StatusTermsRequired,
		CreatedAt: b.now().Format(time.RFC3339),
	}, accounts: map[string]string{}}
	b.customers[c.ID] = c
	if idempotencyKey != "" {
		b.idem["customer:"+idempotencyKey] = c.ID
	}
	return c.Customer, true, nil
}

func (b *Bank) customer(id string) (*customer, error) {
	c, ok := b.customers[id]
	if !ok {
		return nil, b.missing("customer", id)
	}
	return c, nil
}

// Customer reads a customer.
func (b *Bank) Customer(id string) (bankprovider.Customer, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	c, err := b.customer(id)
	if err != nil {
		return bankprovider.Customer{}, err
	}
	return c.Customer, nil
}

// CreateTermsSession mints a fresh hosted-page link for the customer.
func (b *Bank) CreateTermsSession(customerID, returnURL string) (bankprovider.TermsSession, error) {
	u, err := url.Parse(returnURL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return bankprovider.TermsSession{}, invalid(bankprovider.FieldDetail{Field: "return_url", Constraint: "invalid_url", Value: returnURL})
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	c, err := b.customer(customerID)
	if err != nil {
		return bankprovider.TermsSession{}, err
	}
	now := b.now()
	// A fresh link is a fresh attempt: every earlier link of the customer
	// that is still open dies now.
	for _, old := range b.sessions {
		if old.CustomerID == customerID && old.Status == "open" {
			old.Status = "superseded"
		}
	}
	s := &session{created: now, expires: now.Add(b.cfg.LinkTTL)}
	s.ID = b.newID("ts")
	s.CustomerID = c.ID
	s.URL = strings.TrimSuffix(b.cfg.PublicURL, "/") + "/consent/" + s.ID
	s.ReturnURL = returnURL
	s.Status = "open"
	s.ExpiresAt = s.expires.Format(time.RFC3339)
	b.sessions[s.ID] = s
	return s.TermsSession, nil
}

// TermsSession reads a terms session as the provider's API reports it: its
// status is the user's decision (accepted, declined), or open, expired or
// superseded. It is how the partner side learns the outcome: never from the
// browser's redirect, which a user can edit.
func (b *Bank) TermsSession(id string) (bankprovider.TermsSession, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	s, ok := b.sessions[id]
	if !ok {
		return bankprovider.TermsSession{}, b.missing("terms session", id)
	}
	out := s.TermsSession
	if out.Status == "open" && !b.now().Before(s.expires) {
		out.Status = "expired"
	}
	return out, nil
}

// PageState is what the hosted page shows for a session.
type PageState struct {
	SessionID    string
	CustomerName string
	Problem      string // why the link cannot be used; empty when it can
	Status       int
}

// Page checks a hosted-page link.
func (b *Bank) Page(sessionID string) PageState {
	b.mu.Lock()
	defer b.mu.Unlock()
	_, st := b.usable(sessionID)
	return st
}

func (b *Bank) usable(sessionID string) (*session, PageState) {
	st := PageState{SessionID: sessionID, Status: 200}
	s, ok := b.sessions[sessionID]
	switch {
	case !ok:
		if f := b.missing("terms session", sessionID); f.Status == 410 {
			st.Problem, st.Status = "The sandbox bank was restarted since this link was made, and has forgotten it. Go back to the app and ask for a new link.", 410
		} else {
			st.Problem, st.Status = "This consent link is not valid. Go back to the app and ask for a new link.", 404
		}
	case s.used:
		st.Problem, st.Status = "This link was already used. Go back to the app and ask for a new link.", 410
	case s.Status == "superseded":
		st.Problem, st.Status = "A newer link was made for you, so this one no longer works. Go back to the app and use the new one.", 410
	case !b.now().Before(s.expires):
		st.Problem, st.Status = "This link has expired: consent links last five minutes. Go back to the app and ask for a new link.", 410
	default:
		st.CustomerName = b.customers[s.CustomerID].FullName
	}
	return s, st
}

// Decide records the user's answer on the hosted page and returns where to
// send the browser.
func (b *Bank) Decide(sessionID string, accept bool) (redirect string, st PageState) {
	b.mu.Lock()
	defer b.mu.Unlock()
	s, st := b.usable(sessionID)
	if st.Problem != "" {
		return "", st
	}
	s.used = true
	result := "declined"
	if accept {
		result = "accepted"
		s.Status = "accepted"
		b.termsAccepted(b.customers[s.CustomerID])
	} else {
		s.Status = "declined"
	}
	u, _ := url.Parse(s.ReturnURL) // checked when the session was made
	q := u.Query()
	q.Set("result", result)
	u.RawQuery = q.Encode()
	return u.String(), st
}

// termsAccepted moves the customer on to the identity check, which in
// sandbox runs on a test-mode applicant: approved unless a result was forced.
func (b *Bank) termsAccepted(c *customer) {
	if c.Status != bankprovider.StatusTermsRequired {
		return
	}
	result := c.presetIdentity
	if result == "" {
		result = "approved"
	}
	if b.cfg.IdentityDelay <= 0 {
		c.Status = identityStatus(result)
		return
	}
	c.Status = bankprovider.StatusIdentityPending
	time.AfterFunc(b.cfg.IdentityDelay, func() {
		b.mu.Lock()
		defer b.mu.Unlock()
		if c.Status == bankprovider.StatusIdentityPending {
			c.Status = identityStatus(result)
		}
	})
}

func identityStatus(result string) string {
	if result == "rejected" {
		return bankprovider.StatusRejected
	}
	return bankprovider.StatusActive
}

// ForceIdentity sets a customer's identity result (sandbox only). Before the
// terms are accepted it waits for them.
func (b *Bank) ForceIdentity(customerID, result string) (bankprovider.Customer, error) {
	if result != "approved" && result != "rejected" {
		return bankprovider.Customer{}, invalid(bankprovider.FieldDetail{Field: "result", Constraint: "invalid_value", Value: result})
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	c, err := b.customer(customerID)
	if err != nil {
		return bankprovider.Customer{}, err
	}
	if c.Status == bankprovider.StatusTermsRequired {
		c.presetIdentity = result
	} else {
		c.Status = identityStatus(result)
	}
	return c.Customer, nil
}

// CreateVirtualAccount issues the customer's account in currency, or answers
// the one already issued. Only EUR (IBAN) accounts exist in sandbox.
func (b *Bank) CreateVirtualAccount(customerID, currency string) (bankprovider.VirtualAccount, bool, error) {
	if currency != "EUR" {
		return bankprovider.VirtualAccount{}, false, invalid(bankprovider.FieldDetail{Field: "currency", Constraint: "unsupported_currency", Value: currency})
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	c, err := b.customer(customerID)
	if err != nil {
		return bankprovider.VirtualAccount{}, false, err
	}
	if err := activeCustomer(c); err != nil {
		return bankprovider.VirtualAccount{}, false, err
	}
	if id, ok := c.accounts[currency]; ok {
		return b.accounts[id].VirtualAccount, false, nil
	}
	b.seq++
	bban := "10020030" + fmt.Sprintf("%010d", b.seq) // a test bank code; the account number counts up
	a := &account{VirtualAccount: bankprovider.VirtualAccount{
		ID: b.newID("va"), CustomerID: c.ID, Currency: currency,
		IBAN: "DE" + iban.CheckDigits("DE", bban) + bban, BIC: "SBXBDEB1XXX",
		BeneficiaryName: c.FullName, Status: "active",
	}}
	b.accounts[a.ID] = a
	c.accounts[currency] = a.ID
	return a.VirtualAccount, true, nil
}

// DepositLife is how long a one-off deposit waits for its transfer.
const DepositLife = 72 * time.Hour

// CollectionIBAN is the account one-off deposits are paid to: a test IBAN
// of the sandbox bank (bank code 10020030), valid check digits.
var CollectionIBAN = "DE" + iban.CheckDigits("DE", "100200309999999999") + "100200309999999999"

// CreateDepositInstruction is a one-off deposit for an active customer:
// pay exactly amount, with the reference, to the collection account
// before it expires. Only EUR exists in sandbox.
func (b *Bank) CreateDepositInstruction(customerID string, in bankprovider.NewDepositInstruction, idempotencyKey string) (bankprovider.DepositInstruction, bool, error) {
	var details []bankprovider.FieldDetail
	if in.Currency != "EUR" {
		details = append(details, bankprovider.FieldDetail{Field: "currency", Constraint: "unsupported_currency", Value: in.Currency})
	}
	amount, ok := money(in.Amount)
	if !ok {
		details = append(details, bankprovider.FieldDetail{Field: "amount", Constraint: "invalid_amount", Value: in.Amount})
	}
	if len(details) > 0 {
		return bankprovider.DepositInstruction{}, false, invalid(details...)
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if id, ok := b.idem["instruction:"+idempotencyKey]; ok && idempotencyKey != "" {
		return b.deposits[id].DepositInstruction, false, nil
	}
	c, err := b.customer(customerID)
	if err != nil {
		return bankprovider.DepositInstruction{}, false, err
	}
	if err := activeCustomer(c); err != nil {
		return bankprovider.DepositInstruction{}, false, err
	}
	now := b.now()
	d := &instruction{expires: now.Add(DepositLife)}
	d.DepositInstruction = bankprovider.DepositInstruction{
		ID: b.newID("di"), CustomerID: c.ID, Currency: in.Currency, Amount: amount, Reference: b.reference(),
		IBAN: CollectionIBAN, BIC: "SBXBDEB1XXX", BeneficiaryName: "Sandbox Bank Collections",
		Status: "awaiting_funds", ExpiresAt: d.expires.Format(time.RFC3339),
	}
	b.deposits[d.ID] = d
	if idempotencyKey != "" {
		b.idem["instruction:"+idempotencyKey] = d.ID
	}
	return d.DepositInstruction, true, nil
}

// reference is what a user types in the transfer: short, unambiguous
// letters and digits (no 0/O, 1/I).
func (b *Bank) reference() string {
	const alphabet = "ABCDEFGHJKLMNPQRSTUVWXYZ23456789"
	var r [8]byte
	_, _ = rand.Read(r[:])
	out := []byte("SBX-")
	for i, c := range r {
		if i == 4 {
			out = append(out, '-')
		}
		out = append(out, alphabet[int(c)%len(alphabet)])
	}
	return string(out)
}

func activeCustomer(c *customer) error {
	switch c.Status {
	case bankprovider.StatusTermsRequired:
		return fail(409, bankprovider.TypeTermsRequired, "The customer has not accepted the terms yet.")
	case bankprovider.StatusIdentityPending:
		return fail(409, bankprovider.TypeCustomerNotActive, "The customer's identity check is pending.")
	case bankprovider.StatusRejected:
		return fail(409, bankprovider.TypeCustomerNotActive, "The customer was rejected by the identity check.")
	}
	return nil
}

// Deposit simulates a bank transfer: into a virtual account, or to the
// collection account for a one-off deposit. A one-off deposit settles only
// for its exact amount and currency, with its reference, before it expires
// and if it is not funded yet; any other transfer stays unmatched and says
// why. A matched transfer settles (EUR converted to EURC at par and sent to
// the customer's wallet) after the settlement delay.
func (b *Bank) Deposit(in bankprovider.Deposit, idempotencyKey string) (*transaction, bool, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if id, ok := b.idem["deposit:"+idempotencyKey]; ok && idempotencyKey != "" {
		t := *b.txs[id]
		return &t, false, nil
	}
	if (in.VirtualAccountID == "") == (in.DepositInstructionID == "") {
		return nil, false, invalid(bankprovider.FieldDetail{Field: "virtual_account_id", Constraint: "exactly_one_target"})
	}
	var (
		owner    *customer
		currency string
		txs      *[]string
		inst     *instruction
	)
	if in.VirtualAccountID != "" {
		a, ok := b.accounts[in.VirtualAccountID]
		if !ok {
			return nil, false, b.missing("virtual account", in.VirtualAccountID)
		}
		owner, currency, txs = b.customers[a.CustomerID], a.Currency, &a.txs
	} else {
		d, ok := b.deposits[in.DepositInstructionID]
		if !ok {
			return nil, false, b.missing("deposit instruction", in.DepositInstructionID)
		}
		owner, currency, txs, inst = b.customers[d.CustomerID], d.Currency, &d.txs, d
	}
	var details []bankprovider.FieldDetail
	if in.Currency != "EUR" || in.Currency != currency {
		details = append(details, bankprovider.FieldDetail{Field: "currency", Constraint: "unsupported_currency", Value: in.Currency})
	}
	amount, ok := money(in.Amount)
	if !ok {
		details = append(details, bankprovider.FieldDetail{Field: "amount", Constraint: "invalid_amount", Value: in.Amount})
	}
	if len(details) > 0 {
		return nil, false, invalid(details...)
	}
	t := &transaction{
		ID: b.newID("txn"), Object: "transaction", Type: "deposit", Status: "received",
		VirtualAccountID: in.VirtualAccountID, DepositID: in.DepositInstructionID, Reference: in.Reference,
		Amount: amount, Currency: in.Currency, CreatedAt: b.now().Format(time.RFC3339Nano),
	}
	if inst != nil {
		t.UnmatchedReason = b.unmatched(inst, amount, in.Reference)
		if t.UnmatchedReason != "" {
			t.Status = "unmatched"
		} else {
			inst.Status = "funded"
		}
	}
	b.txs[t.ID] = t
	*txs = append(*txs, t.ID)
	if idempotencyKey != "" {
		b.idem["deposit:"+idempotencyKey] = t.ID
	}
	if t.Status == "received" {
		time.AfterFunc(b.cfg.SettlementDelay, func() { b.settle(t.ID, owner.WalletAddress, owner.Chain) })
	}
	out := *t
	return &out, true, nil
}

// unmatched says why a transfer to the collection account does not settle
// a deposit instruction, or "" when it does.
func (b *Bank) unmatched(d *instruction, amount, reference string) string {
	switch {
	case d.Status == "funded":
		return "already_funded"
	case !b.now().Before(d.expires):
		return "expired"
	case !strings.EqualFold(strings.TrimSpace(reference), d.Reference):
		return "wrong_reference"
	case amount != d.Amount:
		return "wrong_amount"
	}
	return ""
}

// DepositTransactions lists the transfers sent for a deposit instruction.
func (b *Bank) DepositTransactions(id string) ([]transaction, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	d, ok := b.deposits[id]
	if !ok {
		return nil, b.missing("deposit instruction", id)
	}
	return b.list(d.txs), nil
}

// settle converts at par (EUR → EURC) and "sends" to the wallet.
func (b *Bank) settle(id, wallet string, chain int64) {
	var h [32]byte
	_, _ = rand.Read(h[:])
	b.mu.Lock()
	defer b.mu.Unlock()
	t := b.txs[id]
	t.Status = "settled"
	t.Rate = "1"
	t.DeliveredAmount = t.Amount
	t.DeliveredCurrency = "EURC"
	t.Chain = chain
	t.WalletAddress = wallet
	t.TxHash = "0x" + hex.EncodeToString(h[:])
	t.SettledAt = b.now().Format(time.RFC3339Nano)
}

// Transactions lists a virtual account's transactions, oldest first.
func (b *Bank) Transactions(accountID string) ([]transaction, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	a, ok := b.accounts[accountID]
	if !ok {
		return nil, b.missing("virtual account", accountID)
	}
	return b.list(a.txs), nil
}

func (b *Bank) list(ids []string) []transaction {
	out := make([]transaction, 0, len(ids))
	for _, id := range ids {
		out = append(out, *b.txs[id])
	}
	return out
}

// money checks an amount in EUR (two decimals at most, above zero, at most
// one million) and writes it with two decimals.
func money(s string) (string, bool) {
	if !amountRe.MatchString(s) {
		return "", false
	}
	r, ok := new(big.Rat).SetString(s)
	if !ok || r.Sign() <= 0 || r.Cmp(big.NewRat(1_000_000, 1)) > 0 {
		return "", false
	}
	return r.FloatString(2), true
}

// Epoch identifies this boot.
func (b *Bank) Epoch() string { return b.epoch }
