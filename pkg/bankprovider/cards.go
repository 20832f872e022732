package bankprovider

import (
	"context"
	"net/http"
	"net/url"
)

// The card side of the provider (DESIGN §7): it hosts the card page, takes
// the payment, and delivers or receives the stablecoins. Card numbers,
// expiry and CVC are typed on its page; none of these types can carry them.

// NewCardOrder is the body that opens an order at the provider. Reference
// is our order id, and the Idempotency-Key of the call.
type NewCardOrder struct {
	Reference      string   `json:"reference"`
	Direction      string   `json:"direction"`
	CryptoCurrency string   `json:"crypto_currency"`
	Chain          int64    `json:"chain"`
	WalletAddress  string   `json:"wallet_address"`
	FiatCurrency   string   `json:"fiat_currency"`
	Country        string   `json:"country"`
	CryptoAmount   string   `json:"crypto_amount,omitempty"`
	FiatAmount     string   `json:"fiat_amount,omitempty"`
	PaymentMethods []string `json:"payment_methods"`
	ExpiresAt      string   `json:"expires_at"`
}

// CardOrder is an order as the provider reports it. Its status uses the
// API's order statuses; PaymentMethod, TxHash and FailureReason appear as
// the order moves on. The caller checks every value against its own closed
// sets before it keeps one.
type CardOrder struct {
	ID             string `json:"id"`
	Reference      string `json:"reference"`
	Direction      string `json:"direction"`
	Status         string `json:"status"`
	DepositAddress string `json:"deposit_address,omitempty"`
	PaymentMethod  string `json:"payment_method,omitempty"`
	TxHash         string `json:"tx_hash,omitempty"`
	FailureReason  string `json:"failure_reason,omitempty"`
	ExpiresAt      string `json:"expires_at"`
}

// CardSession is one hosted card page link: open until used, expired
// (five minutes) or superseded by a newer link for the same order.
type CardSession struct {
	ID          string `json:"id"`
	CardOrderID string `json:"card_order_id"`
	URL         string `json:"url"`
	Status      string `json:"status"`
	ExpiresAt   string `json:"expires_at"`
}

// CreateCardOrder opens an order at the provider; the provider answers the
// same order to a retry with the same idempotencyKey.
func (c *Client) CreateCardOrder(ctx context.Context, in NewCardOrder, idempotencyKey string) (CardOrder, error) {
	var out CardOrder
	return out, c.do(ctx, opCreateCardOrder, http.MethodPost, "/v1/card_orders", in, idempotencyKey, idempotencyKey != "", &out)
}

// CardOrder reads an order back: the provider's word on where it stands.
func (c *Client) CardOrder(ctx context.Context, id string) (CardOrder, error) {
	var out CardOrder
	return out, c.do(ctx, opCardOrder, http.MethodGet, "/v1/card_orders/"+url.PathEscape(id), nil, "", true, &out)
}

// CreateCardSession mints a hosted card page link for the order that sends
// the browser back to returnURL. Each call is a fresh link, and kills the
// order's earlier ones.
func (c *Client) CreateCardSession(ctx context.Context, orderID, returnURL string) (CardSession, error) {
	var out CardSession
	body := map[string]string{"return_url": returnURL}
	return out, c.do(ctx, opCreateCardSession, http.MethodPost, "/v1/card_orders/"+url.PathEscape(orderID)+"/sessions", body, "", false, &out)
}

// SimulateCardDeposit makes the user's stablecoin deposit for a sandbox
// sell; a second call finds it made.
func (c *Client) SimulateCardDeposit(ctx context.Context, orderID string) (CardOrder, error) {
	var out CardOrder
	return out, c.do(ctx, opSimulateCardDeposit, http.MethodPost, "/v1/sandbox/card_orders/"+url.PathEscape(orderID)+"/deposit", struct{}{}, "", true, &out)
}
