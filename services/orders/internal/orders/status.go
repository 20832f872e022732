package orders

import (
	"context"

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

// Status answers an order's status as the system of record has it: the
// worker moves it on the card provider's word and closes its window, so a
// read never calls the provider.
func (s *service) Status(ctx context.Context, caller partner.Caller, req StatusRequest) (OrderStatus, error) {
	r, err := s.owned(ctx, caller, req.OrderID)
	if err != nil {
		return OrderStatus{}, err
	}
	return statusOf(r), nil
}

func statusOf(r Record) OrderStatus {
	return OrderStatus{
		OrderID: r.ID, Direction: r.Direction, Status: r.Status, PaymentMethod: r.PaymentMethod,
		CryptoAmount: MockMoney, FiatAmount: MockMoney, TxHash: r.TxHash, FailureReason: r.FailureReason, Reference: r.Reference,
	}
}
