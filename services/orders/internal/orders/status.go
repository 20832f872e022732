package orders

import (
	"context"
	"fmt"

	"github.com/partnerpay/api/pkg/partner"
)

// StatusRequest is the body of POST /v1/orders/status.
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
}

// Status answers an order's status. An order still awaiting its payment or
// deposit past its expiry is expired first (in the store: the status only
// moves forward).
func (s *service) Status(ctx context.Context, caller partner.Caller, req StatusRequest) (OrderStatus, error) {
	r, err := s.owned(ctx, caller, req.OrderID)
	if err != nil {
		return OrderStatus{}, err
	}
	if awaiting(r.Status) && !s.now().Before(r.ExpiresAt) {
		if r, err = s.store.Expire(ctx, r.ID, s.now().UTC()); err != nil {
			return OrderStatus{}, fmt.Errorf("expire order: %w", err)
		}
	}
	return OrderStatus{
		OrderID: r.ID, Direction: r.Direction, Status: r.Status, PaymentMethod: r.PaymentMethod,
		CryptoAmount: MockMoney, FiatAmount: MockMoney, TxHash: r.TxHash, FailureReason: r.FailureReason,
	}, nil
}
