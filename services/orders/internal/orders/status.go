package orders

import (
	"context"
	"fmt"
	"time"

	"github.com/partnerpay/api/pkg/partner"
)

// StatusRequest is the body of POST /v1/orders/status and of POST
// /v1/sandbox/orders/deposit.
type StatusRequest struct {
	OrderID string `json:"orderId"`
}

// OrderStatus is an order's status, less environment: paymentMethod once
// the user paid, txHash once stablecoins moved, failureReason once failed.
type OrderStatus struct {
	OrderID       string `json:"orderId"`
	Direction     string `json:"direction"`
	Status        string `json:"status"`
	PaymentMethod string `json:"paymentMethod,omitempty"`
	CryptoAmount  string `json:"cryptoAmount"`
	FiatAmount    string `json:"fiatAmount"`
	TxHash        string `json:"txHash,omitempty"`
	FailureReason string `json:"failureReason,omitempty"`
	Reference     string `json:"reference,omitempty"`
}

// Status answers an order's status, read back from the card provider and
// moved only forward.
func (s *service) Status(ctx context.Context, caller partner.Caller, req StatusRequest) (OrderStatus, error) {
	r, err := s.owned(ctx, caller, req.OrderID)
	if err != nil {
		return OrderStatus{}, err
	}
	if r, err = s.current(ctx, r); err != nil {
		return OrderStatus{}, err
	}
	return statusOf(r), nil
}

// readBackBudget bounds the provider read of a status: a slow provider
// must not hold the partner's poll past the gateway's timeout.
var readBackBudget = 3 * time.Second

// current brings r up to date with what the provider says. The provider
// decides an order's expiry as it decides its payment (it holds the
// expiresAt the order was opened with): an order is never expired here on
// our clock while the provider may have taken its payment. A provider that
// cannot be reached (or not within readBackBudget) leaves r as last known:
// a status read still answers, and the next one catches up. Only an order
// the provider never opened expires here, on its expiresAt.
func (s *service) current(ctx context.Context, r Record) (Record, error) {
	rctx, cancel := context.WithTimeout(ctx, readBackBudget)
	synced, err := s.sync(rctx, r)
	cancel()
	if err != nil {
		s.log.WarnContext(ctx, "order not brought up to date with the card provider; answered as last known", "order_id", r.ID, "err", err)
		return r, nil
	}
	r = synced
	if r.ProviderID == "" && awaiting(r.Status) && !s.now().Before(r.ExpiresAt) {
		if r, err = s.store.Expire(ctx, r.ID, s.now().UTC()); err != nil {
			return Record{}, fmt.Errorf("expire order: %w", err)
		}
	}
	return r, nil
}

func statusOf(r Record) OrderStatus {
	return OrderStatus{
		OrderID: r.ID, Direction: r.Direction, Status: r.Status, PaymentMethod: r.PaymentMethod,
		CryptoAmount: MockMoney, FiatAmount: MockMoney, TxHash: r.TxHash, FailureReason: r.FailureReason, Reference: r.Reference,
	}
}
