// Package record is a payout as the system of record keeps it, and the
// words every part uses to change one: the payout and its history and
// refunds (Record), and a Change, the steps and queue moves one
// transaction makes. The service decides changes on a partner's word
// (internal/payout), the mover on the provider's (internal/mover); the
// store (internal/store) writes them, with their events; the answers
// (internal/answer) render a Record as the partner sees it.
package record

import (
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"time"
)

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
	RefundAddress    string
	DepositAddress   string
	DepositIndex     *int64 // the BIP-32 index its address is derived at (nil: made before addresses had keys)
	DepositExpiresAt time.Time
	DepositTxHash    string
	DepositAmount    string
	HandoverAt       *time.Time // our intent to hand it to the provider, recorded with its deposit
	HandedOverAt     *time.Time // the provider confirmed it has it
	CompletedAt      *time.Time
	FailureReason    string
	ReturnReason     string
	ReturnCode       string
	ProviderCode     string // the provider's own code for a failure or return we do not list
	SandboxOutcome   string // what a sandbox payout comes to (POST /v1/sandbox/payouts/deposit)
	SandboxReason    string
	StatusAt         time.Time
	// What the worker keeps of it: the provider's not knowing it since,
	// the reconciliations made, and the failures in a row of the queue
	// working it.
	ProviderMissingAt *time.Time
	ReconcileChecks   int
	Failures          int
}

// Move is one status a payout has been in, and since when.
type Move struct {
	Status string    `json:"status"`
	At     time.Time `json:"at"`
}

// Refund is what a payout owes back, as the system of record keeps it.
type Refund struct {
	ID             string `json:"id"`
	Reason         string `json:"reason"`
	Status         string `json:"status"`
	Amount         string `json:"amount"`
	CryptoCurrency string `json:"crypto_currency"`
	Chain          int64  `json:"chain"`
	DepositTxHash  string `json:"deposit_tx_hash"`
	// DepositLogIndex is the deposit's place in its transaction: two
	// transfers of one transaction each owe their refund.
	DepositLogIndex int        `json:"deposit_log_index"`
	Address         string     `json:"address"`
	TxHash          string     `json:"tx_hash"`
	CreatedAt       time.Time  `json:"created_at"`
	SentAt          *time.Time `json:"sent_at"`
	ConfirmedAt     *time.Time `json:"confirmed_at"`
}

// Record is a payout with what its answers show of it: every status it
// has been in, oldest first, and what it owes back.
type Record struct {
	StoredPayout
	History []Move
	Refunds []Refund
}

// Step is one write to a payout: a move along an arrow (To, with its
// history row, at At), and what it brings; fields left empty keep their
// values. The database refuses a move that is not an arrow of DESIGN §3,
// and a field rewritten once set.
type Step struct {
	To                            string
	At                            time.Time
	DepositTxHash, DepositAmount  string
	HandoverAt, HandedOverAt      *time.Time
	CompletedAt                   *time.Time
	FailureReason                 string
	ReturnReason, ReturnCode      string
	ProviderCode                  string
	SandboxOutcome, SandboxReason string
	RefundAddress                 string
}

// Change is what one transaction does to a payout: its steps in order, the
// refunds it makes owed (each once per cause: a second one of the same
// reason for the same deposit is none), and where it stands in the
// worker's queues (a nil time keeps the one it had).
type Change struct {
	Steps   []Step
	Refunds []Refund
	// HandOver is when its hand-over is next tried (its lease while a
	// call is out, then its backoff); HandedOver takes it out of that
	// queue (the provider has it, or refused it).
	HandOver   *time.Time
	HandedOver bool
	// Reconcile is when it is next asked about on its own (Checked: one
	// more check made); Reconciled takes it out of that queue (final, or
	// asked about as often as it ever is).
	Reconcile  *time.Time
	Reconciled bool
	Checked    bool
	// Missing: the provider did not know it after confirming it, found
	// at this time (noted once: provider_missing_at).
	Missing *time.Time
}

// Queued reports whether c changes where the payout stands in a queue.
func (c Change) Queued() bool {
	return c.HandOver != nil || c.HandedOver || c.Reconcile != nil || c.Reconciled || c.Checked || c.Missing != nil
}

// NewRefundID is a new refund's id: rf_ and 32 hex digits.
func NewRefundID() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	return "rf_" + hex.EncodeToString(b[:])
}

// MockMoney is every money figure while the payout provider is a mock.
const MockMoney = "1234567.89"

// Owed is the deposit payout p asks for (its deposit.amount): the
// placeholder while the quote is a mock.
func Owed(StoredPayout) string { return MockMoney }

// Digest names the beneficiary in the quote book's closed mark without
// keeping its account there.
func Digest(fields []byte) string {
	sum := sha256.Sum256(fields)
	return hex.EncodeToString(sum[:16])
}

// ValidID reports whether s has the shape NewID makes: bpo_
// and 32 lower-case hex digits. Anything else is answered without a
// lookup and never logged whole.
func ValidID(s string) bool {
	if len(s) != len("bpo_")+32 || s[:4] != "bpo_" {
		return false
	}
	for i := 4; i < len(s); i++ {
		if c := s[i]; !('0' <= c && c <= '9' || 'a' <= c && c <= 'f') {
			return false
		}
	}
	return true
}

// NewID is a new payout's id.
func NewID() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	return "bpo_" + hex.EncodeToString(b[:])
}
