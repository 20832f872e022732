package payout

import "github.com/partnerpay/api/services/payout/internal/answer"

// The service's answers are the payout as internal/answer renders it (the
// events the store writes carry the same objects).
type (
	Payout       = answer.Payout
	PayoutStatus = answer.PayoutStatus
	RefundAnswer = answer.RefundAnswer
	Deposit      = answer.Deposit
	HistoryEntry = answer.HistoryEntry
)
