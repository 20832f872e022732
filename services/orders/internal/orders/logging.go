package orders

import (
	"log/slog"
	"strings"

	"github.com/partnerpay/api/pkg/catalog"
	"github.com/partnerpay/api/pkg/format"
)

// What each operation may log: the order id, its direction and status.
// Never a wallet address or an amount.

// LogAttrs of a create request: the direction, if it is one.
func (r CreateRequest) LogAttrs() []slog.Attr {
	d := strings.ToLower(r.Direction)
	if d != catalog.DirectionBuy && d != catalog.DirectionSell {
		d = format.Malformed
	}
	return []slog.Attr{slog.String("direction", d)}
}

// LogAttrs of an order: its id, direction and status.
func (o Order) LogAttrs() []slog.Attr {
	return []slog.Attr{slog.String("order_id", o.OrderID), slog.String("direction", o.Direction), slog.String("status", o.Status)}
}

// LogAttrs of a status request: the order id, if it has the shape of one.
func (r StatusRequest) LogAttrs() []slog.Attr {
	return []slog.Attr{slog.String("order_id", format.LogID(orderPrefix, r.OrderID))}
}

// LogAttrs of a status: the order id and status.
func (s OrderStatus) LogAttrs() []slog.Attr {
	return []slog.Attr{slog.String("order_id", s.OrderID), slog.String("status", s.Status)}
}

// LogAttrs of a link request: the order id, if it has the shape of one.
// Never the return URL, nor the link: it opens a payment page.
func (r LinkRequest) LogAttrs() []slog.Attr {
	return []slog.Attr{slog.String("order_id", format.LogID(orderPrefix, r.OrderID))}
}

// LogAttrs of a return: the order and the status read back.
func (r Returned) LogAttrs() []slog.Attr {
	return []slog.Attr{slog.String("order_id", r.OrderID), slog.String("status", r.Status)}
}
