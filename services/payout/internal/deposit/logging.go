package deposit

import "log/slog"

// What the deposit quote may log: its id and chains. Never a wallet
// address, which is personal data.

// LogAttrs of a quote: its id and route.
func (q Quote) LogAttrs() []slog.Attr {
	return []slog.Attr{slog.String("quote_id", q.QuoteID), slog.Int64("source_chain", q.Source.Chain), slog.Int64("destination_chain", q.Destination.Chain)}
}
