package orders

import (
	"context"
	"net/url"
	"regexp"
	"time"

	"github.com/partnerpay/api/pkg/bankprovider"
	"github.com/partnerpay/api/pkg/catalog"
)

// What the card provider says is checked against our own closed sets
// before any of it is kept or answered: its word decides an order's
// outcome, but not the shape of our records.

var (
	providerRefRe = regexp.MustCompile(`^[A-Za-z0-9_-]{1,64}$`)
	txHashRe      = regexp.MustCompile(`^0x[0-9a-f]{64}$`)
)

// providerRef reports whether s has the shape of a provider id.
func providerRef(s string) bool { return providerRefRe.MatchString(s) }

// hostedPage reports whether s is a link a browser can open.
func hostedPage(s string) bool {
	u, err := url.Parse(s)
	return err == nil && (u.Scheme == "https" || u.Scheme == "http") && u.Host != "" && u.User == nil && len(s) <= 2048
}

// Failure reasons of a failed order (DESIGN §7).
var failureReasons = map[string]bool{
	"card_declined": true, "authentication_failed": true, "insufficient_funds": true, "expired_card": true,
}

// Progress is where the provider says an order stands, checked.
type Progress struct {
	Status        string
	PaymentMethod string
	TxHash        string
	FailureReason string
}

// progress checks the provider's order against r's direction and our sets;
// ok is false when any of it is out of shape, and nothing of it is kept.
func progress(r Record, po bankprovider.CardOrder) (p Progress, ok bool) {
	p = Progress{Status: po.Status, PaymentMethod: po.PaymentMethod, TxHash: po.TxHash, FailureReason: po.FailureReason}
	switch po.Status {
	case StatusAwaitingPayment:
		ok = r.Direction == catalog.DirectionBuy
	case StatusAwaitingDeposit:
		ok = r.Direction == catalog.DirectionSell
	case StatusProcessing, StatusExpired:
		ok = true
	case StatusCompleted:
		ok = r.Direction == catalog.DirectionSell || po.TxHash != ""
	case StatusFailed:
		ok = failureReasons[po.FailureReason]
	}
	if po.Status != StatusFailed && po.FailureReason != "" {
		ok = false
	}
	if po.PaymentMethod != "" && po.PaymentMethod != catalog.MethodCard && po.PaymentMethod != catalog.MethodApplePay {
		ok = false
	}
	if po.TxHash != "" && !txHashRe.MatchString(po.TxHash) {
		ok = false
	}
	return p, ok
}

// rank orders the statuses: awaiting, then processing, then final.
func rank(status string) int {
	switch {
	case awaiting(status):
		return 0
	case status == StatusProcessing:
		return 1
	}
	return 2
}

// forward reports whether p moves r on: a later status, or the same
// awaiting status with the payment method now known (a sell's card).
func forward(r Record, p Progress) bool {
	if Final(r.Status) {
		return false
	}
	if p.Status == StatusExpired && !awaiting(r.Status) {
		return false
	}
	if rank(p.Status) > rank(r.Status) {
		return true
	}
	return p.Status == r.Status && r.PaymentMethod == "" && p.PaymentMethod != "" ||
		p.Status == r.Status && r.TxHash == "" && p.TxHash != ""
}

// sync reads the order back from the provider and moves r forward to what
// it says. It answers r as it now stands.
func (s *service) sync(ctx context.Context, r Record) (Record, error) {
	if Final(r.Status) || r.ProviderID == "" {
		return r, nil
	}
	po, err := s.provider.CardOrder(ctx, r.ProviderID)
	if err != nil {
		return r, err
	}
	return s.advance(ctx, r, po)
}

// advance moves r forward to what the provider's order po says.
func (s *service) advance(ctx context.Context, r Record, po bankprovider.CardOrder) (Record, error) {
	p, ok := progress(r, po)
	if !ok {
		s.log.WarnContext(ctx, "card provider answer out of shape; order left as it was", "order_id", r.ID, "provider_status", statusLabel(po.Status))
		return r, nil
	}
	if !forward(r, p) {
		return r, nil
	}
	return s.store.Advance(ctx, r.ID, p, s.now().UTC().Truncate(time.Microsecond))
}

// statusLabel keeps a provider status fit for a log line.
func statusLabel(s string) string {
	if len(s) > 32 || !providerRef(s) {
		return "invalid"
	}
	return s
}
