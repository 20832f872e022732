package chain

import (
	"math/big"
	"time"

	"github.com/partnerpay/api/pkg/lifecycle"
	"github.com/partnerpay/api/services/payout/internal/record"
)

// Deposit is a confirmed transfer to a payout's deposit address, as the
// arrival rules read it.
type Deposit struct {
	// Amount is what arrived, in major units of its token (for a token
	// the catalogue does not list, in its smallest unit).
	Amount string
	// Token is the token's symbol on the payout's chain, or its contract
	// address (EIP-55) when the catalogue does not list it.
	Token    string
	TxHash   string
	LogIndex int // its place in its transaction
	// At is its block's time: a transfer mined before the window closed
	// is in time, however long its confirmations take.
	At time.Time
}

// Arrival decides what deposit d does to payout p, recorded at now
// (DESIGN §3):
//
//   - after the window (p expired, or its block after deposit.expiresAt):
//     the payout is expired, and the deposit refunded (deposit_late);
//
//   - another token: refunded (deposit_wrong_token), and the payout keeps
//     waiting;
//
//   - less than deposit.amount: the payout fails (deposit_short), the
//     whole deposit refunded;
//
//   - deposit.amount or more: the deposit is the payout's, recorded with
//     the intent to hand the payout over (due at once: the mover's
//     hand-over queue makes it), and the excess refunded (deposit_excess);
//
//   - a deposit to a payout that took one already, or that is final
//     (completed, failed, returned): refunded (deposit_unexpected). A
//     chain cannot refuse a transfer, so none is answered "not now".
//
// The same transfer is recorded once (by its place on the chain: its
// transaction and log index), so it is never seen here twice; another
// transfer of the same transaction is another deposit.
func Arrival(p record.StoredPayout, d Deposit, now time.Time) record.Change {
	refund := func(reason, amount string) record.Refund {
		return record.Refund{ID: record.NewRefundID(), Reason: reason, Amount: amount, CryptoCurrency: d.Token, Chain: p.Chain,
			DepositTxHash: d.TxHash, DepositLogIndex: d.LogIndex, CreatedAt: now}
	}
	waiting := p.Status == lifecycle.PayoutAwaitingDeposit && p.HandoverAt == nil
	switch {
	case p.Status == lifecycle.PayoutExpired:
		return record.Change{Refunds: []record.Refund{refund(lifecycle.RefundDepositLate, d.Amount)}}
	case waiting && !d.At.Before(p.DepositExpiresAt):
		return record.Change{Steps: []record.Step{{To: lifecycle.PayoutExpired, At: now}},
			Refunds: []record.Refund{refund(lifecycle.RefundDepositLate, d.Amount)}}
	case !waiting:
		return record.Change{Refunds: []record.Refund{refund(lifecycle.RefundDepositUnexpected, d.Amount)}}
	case d.Token != p.CryptoCurrency:
		return record.Change{Refunds: []record.Refund{refund(lifecycle.RefundDepositWrongToken, d.Amount)}}
	}
	got, _ := new(big.Rat).SetString(d.Amount)
	owed, _ := new(big.Rat).SetString(record.Owed(p))
	if got.Cmp(owed) < 0 {
		return record.Change{Steps: []record.Step{{To: lifecycle.PayoutFailed, At: now, FailureReason: lifecycle.PayoutDepositShort,
			DepositTxHash: d.TxHash, DepositAmount: d.Amount}}, Refunds: []record.Refund{refund(lifecycle.RefundDepositShort, d.Amount)}}
	}
	c := record.Change{Steps: []record.Step{{At: now, DepositTxHash: d.TxHash, DepositAmount: d.Amount, HandoverAt: &now}}, HandOver: &now}
	if got.Cmp(owed) > 0 {
		c.Refunds = []record.Refund{refund(lifecycle.RefundDepositExcess, new(big.Rat).Sub(got, owed).FloatString(decimals(d.Amount)))}
	}
	return c
}

// decimals is how many digits a decimal amount has after its point (at
// least 2): the excess is written as precisely as the deposit was.
func decimals(amount string) int {
	for i := range len(amount) {
		if amount[i] == '.' {
			return max(2, len(amount)-i-1)
		}
	}
	return 2
}

// Major is units of a token with decimals, in major units: the shortest
// decimal that is exactly it (at least two digits after the point).
func Major(units *big.Int, decimals int) string {
	r := new(big.Rat).SetFrac(units, new(big.Int).Exp(big.NewInt(10), big.NewInt(int64(decimals)), nil))
	s := r.FloatString(decimals)
	// Trim trailing zeros beyond two decimals.
	for len(s) > 0 && s[len(s)-1] == '0' && len(s)-indexByte(s, '.') > 3 {
		s = s[:len(s)-1]
	}
	return s
}

func indexByte(s string, c byte) int {
	for i := range len(s) {
		if s[i] == c {
			return i
		}
	}
	return len(s)
}
