// Package answer renders a payout as the partner sees it, in one
// environment: the service's answers (Payout, PayoutStatus) and the
// objects of the events the store writes, from one View, so a payout's
// event and its status answer never disagree.
package answer

import (
	"log/slog"
	"time"

	"github.com/partnerpay/api/pkg/beneficiary"
	"github.com/partnerpay/api/pkg/catalog"
	"github.com/partnerpay/api/pkg/environment"
	"github.com/partnerpay/api/pkg/lifecycle"
	"github.com/partnerpay/api/services/payout/internal/record"
)

// View renders payouts as the partner sees them, in one environment.
type View struct {
	env    environment.Name
	chains *catalog.Chains
}

// NewView is the view of env.
func NewView(env environment.Name) View { return View{env: env, chains: catalog.ChainsFor(env)} }

// Payout is the payout as the partner sees it.
func (v View) Payout(p record.Record) Payout {
	return v.PayoutAs(p, masked(p.Rail, p.BeneficiaryName, p.Beneficiary))
}

// PayoutAs is the payout as the partner sees it, its beneficiary masked
// as m (known already where the request named it: nothing to parse).
func (v View) PayoutAs(p record.Record, m beneficiary.Masked) Payout {
	token := ""
	if chain, err := v.chains.Find("chain", p.Chain); err == nil {
		if t, ok := chain.Token(p.CryptoCurrency); ok {
			token = t.Address
		}
	}
	return Payout{
		Mock: true, PayoutID: p.ID, QuoteID: p.QuoteID, Status: p.Status, Rail: p.Rail, EstimatedSettlement: p.Settlement,
		Deposit: Deposit{Address: p.DepositAddress, Chain: p.Chain, CryptoCurrency: p.CryptoCurrency, Token: token,
			Amount: record.MockMoney, ExpiresAt: p.DepositExpiresAt.UTC().Format(time.RFC3339)},
		Beneficiary:   m,
		Reference:     p.Reference,
		RefundAddress: p.RefundAddress,
		CreatedAt:     p.CreatedAt.UTC().Format(time.RFC3339),
		Refunds:       refundAnswers(p.Refunds),
	}
}

// refundAnswers are refunds as answers show them: [] when none is owed.
func refundAnswers(rs []record.Refund) []RefundAnswer {
	out := make([]RefundAnswer, len(rs))
	for i, r := range rs {
		out[i] = RefundAnswer{RefundID: r.ID, Status: r.Status, Reason: r.Reason, Amount: r.Amount, CryptoCurrency: r.CryptoCurrency,
			Chain: r.Chain, Address: r.Address, TxHash: r.TxHash, CreatedAt: r.CreatedAt.UTC().Format(time.RFC3339)}
		if r.SentAt != nil {
			out[i].SentAt = r.SentAt.UTC().Format(time.RFC3339)
		}
		if r.ConfirmedAt != nil {
			out[i].ConfirmedAt = r.ConfirmedAt.UTC().Format(time.RFC3339)
		}
	}
	return out
}

// masked is a stored beneficiary as answers show it.
func masked(rail, name string, fields []byte) beneficiary.Masked {
	return beneficiary.Mask(name, beneficiary.AccountOf(rail, fields))
}

// Status is the payout and what happened to it, as the partner sees them.
func (v View) Status(r record.Record) PayoutStatus {
	st := PayoutStatus{Payout: v.Payout(r), FailureReason: r.FailureReason, ReturnReason: r.ReturnReason, ReturnCode: r.ReturnCode,
		ProviderCode: r.ProviderCode,
		History:      make([]HistoryEntry, len(r.History))}
	for i, m := range r.History {
		st.History[i] = HistoryEntry{Status: m.Status, At: m.At.UTC().Format(time.RFC3339)}
	}
	// The deposit is shown once the payout took it (processing, or a
	// short one's failure), not while its hand-over is pending.
	if r.Status != lifecycle.PayoutAwaitingDeposit {
		st.DepositTxHash = r.DepositTxHash
	}
	if r.CompletedAt != nil {
		st.CompletedAt = r.CompletedAt.UTC().Format(time.RFC3339)
	}
	return st
}

// Payout is the answer to an execution, less environment. While the quote
// is a mock, Mock is true and deposit.amount is the placeholder.
type Payout struct {
	Mock                bool               `json:"mock"`
	PayoutID            string             `json:"payoutId"`
	QuoteID             string             `json:"quoteId"`
	Status              string             `json:"status"`
	Rail                string             `json:"rail"`
	EstimatedSettlement string             `json:"estimatedSettlement"`
	Deposit             Deposit            `json:"deposit"`
	Beneficiary         beneficiary.Masked `json:"beneficiary"`
	Reference           string             `json:"reference,omitempty"`
	// RefundAddress is where its refunds go, once one is set.
	RefundAddress string `json:"refundAddress,omitempty"`
	CreatedAt     string `json:"createdAt"`
	// Refunds is what the payout owes back (empty when nothing is owed).
	Refunds []RefundAnswer `json:"refunds"`
}

// RefundAnswer is a refund as every payout answer shows it: stablecoins
// owed back, why, and where and when they went.
type RefundAnswer struct {
	RefundID       string `json:"refundId"`
	Status         string `json:"status"`
	Reason         string `json:"reason"`
	Amount         string `json:"amount"`
	CryptoCurrency string `json:"cryptoCurrency"`
	Chain          int64  `json:"chain"`
	Address        string `json:"address,omitempty"`
	TxHash         string `json:"txHash,omitempty"`
	CreatedAt      string `json:"createdAt"`
	SentAt         string `json:"sentAt,omitempty"`
	ConfirmedAt    string `json:"confirmedAt,omitempty"`
}

// Deposit says where the payout's stablecoins go: amount of token on chain
// to address (one address per payout) before expiresAt.
type Deposit struct {
	Address        string `json:"address"`
	Chain          int64  `json:"chain"`
	CryptoCurrency string `json:"cryptoCurrency"`
	Token          string `json:"token"`
	Amount         string `json:"amount"`
	ExpiresAt      string `json:"expiresAt"`
}

// PayoutStatus is the payout answer plus what happened to it: every status
// it has been in (oldest first), and, as they happen, the deposit's
// transaction, when the bank was credited, and why it failed or came back.
type PayoutStatus struct {
	Payout
	History       []HistoryEntry `json:"history"`
	DepositTxHash string         `json:"depositTxHash,omitempty"`
	CompletedAt   string         `json:"completedAt,omitempty"`
	FailureReason string         `json:"failureReason,omitempty"`
	ReturnReason  string         `json:"returnReason,omitempty"`
	ReturnCode    string         `json:"returnCode,omitempty"`
	// ProviderCode is the provider's own code for a failure or return
	// whose reason we do not list (provider_rejected, returned_by_bank).
	ProviderCode string `json:"providerCode,omitempty"`
}

// HistoryEntry is one status a payout has been in, and since when.
type HistoryEntry struct {
	Status string `json:"status"`
	At     string `json:"at"`
}

// LogAttrs of a payout: its id.
func (p Payout) LogAttrs() []slog.Attr { return []slog.Attr{slog.String("payout_id", p.PayoutID)} }

// LogAttrs of a payout's status: its id and status.
func (p PayoutStatus) LogAttrs() []slog.Attr {
	return []slog.Attr{slog.String("payout_id", p.PayoutID), slog.String("status", p.Status)}
}
