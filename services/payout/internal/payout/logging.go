package payout

import (
	"log/slog"

	"github.com/partnerpay/api/pkg/format"
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

// LogAttrs of a payout: its id.
func (p Payout) LogAttrs() []slog.Attr { return []slog.Attr{slog.String("payout_id", p.PayoutID)} }
