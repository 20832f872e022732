package payout

import (
	"log/slog"

	"github.com/partnerpay/api/pkg/format"
	"github.com/partnerpay/api/services/payout/internal/record"
)

// What each operation may log: ids and the figures that are not personal.
// Never a beneficiary's name or IBAN.

// LogAttrs of a quote request: its chain.
func (r QuoteRequest) LogAttrs() []slog.Attr { return []slog.Attr{slog.Int64("chain", r.Chain)} }

// LogAttrs of a quote: its id and rail.
func (q Quote) LogAttrs() []slog.Attr {
	return []slog.Attr{slog.String("quote_id", q.QuoteID), slog.String("rail", q.Rail)}
}

// LogAttrs of an execution request: the quote id, never the beneficiary.
func (r ExecuteRequest) LogAttrs() []slog.Attr {
	id := r.QuoteID
	if _, ok := BankPayout.Parse(id); !ok && id != "" {
		id = format.Malformed
	}
	return []slog.Attr{slog.String("quote_id", id)}
}

// LogAttrs of a status request or a sandbox deposit: the payout id (a
// malformed one is not logged whole), never a reference.
func (r StatusRequest) LogAttrs() []slog.Attr {
	return []slog.Attr{slog.String("payout_id", logPayoutID(r.PayoutID))}
}

func logPayoutID(id string) string {
	if id == "" || record.ValidID(id) {
		return id
	}
	return format.Malformed
}

// LogAttrs of a sandbox deposit: the payout id and the outcome chosen.
func (r DepositRequest) LogAttrs() []slog.Attr {
	attrs := []slog.Attr{slog.String("payout_id", logPayoutID(r.PayoutID))}
	if r.Outcome != nil && len(*r.Outcome) <= 16 {
		attrs = append(attrs, slog.String("outcome", *r.Outcome))
	}
	return attrs
}

// LogAttrs of a refund address: the payout id, never the address.
func (r RefundAddressRequest) LogAttrs() []slog.Attr {
	return []slog.Attr{slog.String("payout_id", logPayoutID(r.PayoutID))}
}

// LogAttrs of a validation: the quote id (a malformed one is not logged
// whole), never the beneficiary.
func (r ValidateRequest) LogAttrs() []slog.Attr {
	id := r.QuoteID
	if _, ok := BankPayout.Parse(id); !ok && id != "" {
		id = format.Malformed
	}
	return []slog.Attr{slog.String("quote_id", id)}
}

// LogAttrs of a validation's answer: whether it is valid, how many
// problems, and the name check's result (never a name).
func (v Validation) LogAttrs() []slog.Attr {
	attrs := []slog.Attr{slog.Bool("valid", v.Valid), slog.Int("problems", len(v.Errors))}
	if v.NameCheck != nil {
		attrs = append(attrs, slog.String("name_check", v.NameCheck.Result))
	}
	return attrs
}
