package payout

import (
	"time"

	"github.com/partnerpay/api/pkg/beneficiary"
	"github.com/partnerpay/api/pkg/catalog"
	"github.com/partnerpay/api/pkg/environment"
	"github.com/partnerpay/api/pkg/lifecycle"
)

// view renders payouts as the partner sees them, in one environment: the
// service's answers, and the objects of the events the store writes.
type view struct {
	env    environment.Name
	chains *catalog.Chains
}

func newView(env environment.Name) view { return view{env: env, chains: catalog.ChainsFor(env)} }

// answer is the payout as the partner sees it.
func (v view) answer(p Record) Payout {
	return v.answerAs(p, masked(p.Rail, p.BeneficiaryName, p.Beneficiary))
}

// answerAs is the payout as the partner sees it, its beneficiary masked
// as m (known already where the request named it: nothing to parse).
func (v view) answerAs(p Record, m beneficiary.Masked) Payout {
	token := ""
	if chain, err := v.chains.Find("chain", p.Chain); err == nil {
		if t, ok := chain.Token(p.CryptoCurrency); ok {
			token = t.Address
		}
	}
	return Payout{
		Mock: true, PayoutID: p.ID, QuoteID: p.QuoteID, Status: p.Status, Rail: p.Rail, EstimatedSettlement: p.Settlement,
		Deposit: Deposit{Address: p.DepositAddress, Chain: p.Chain, CryptoCurrency: p.CryptoCurrency, Token: token,
			Amount: MockMoney, ExpiresAt: p.DepositExpiresAt.UTC().Format(time.RFC3339)},
		Beneficiary:   m,
		Reference:     p.Reference,
		RefundAddress: p.RefundAddress,
		CreatedAt:     p.CreatedAt.UTC().Format(time.RFC3339),
		Refunds:       refundAnswers(p.Refunds),
	}
}

// refundAnswers are refunds as answers show them: [] when none is owed.
func refundAnswers(rs []Refund) []RefundAnswer {
	out := make([]RefundAnswer, len(rs))
	for i, r := range rs {
		out[i] = RefundAnswer{RefundID: r.ID, Status: r.Status, Reason: r.Reason, Amount: r.Amount, CryptoCurrency: r.CryptoCurrency,
			Chain: r.Chain, Address: r.Address, TxHash: r.TxHash, CreatedAt: r.CreatedAt.UTC().Format(time.RFC3339)}
		if r.SentAt != nil {
			out[i].SentAt = r.SentAt.UTC().Format(time.RFC3339)
		}
	}
	return out
}

// masked is a stored beneficiary as answers show it.
func masked(rail, name string, fields []byte) beneficiary.Masked {
	return beneficiary.Mask(name, beneficiary.AccountOf(rail, fields))
}

func (v view) status(r Record) PayoutStatus {
	st := PayoutStatus{Payout: v.answer(r), FailureReason: r.FailureReason, ReturnReason: r.ReturnReason, ReturnCode: r.ReturnCode,
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
