package e2e

import (
	"regexp"
	"strings"
	"testing"
)

const (
	baseSepoliaUSDC = "0x036CbD53842c5426634e7929541eC2318f3dCF7e"
	orderWallet     = "0x5aAeb6053F3E94C9b9A09f33669435E7Ef1BeAed"
)

// cardKey is a key with the card product, Base Sepolia both ways, its USDC,
// and a ceiling of 2,500 USD.
func (s *stack) cardKey(id string) string {
	return s.issue(id, "--products", "card", "--source-chains", "84532", "--destination-chains", "84532",
		"--tokens", "84532:"+baseSepoliaUSDC, "--rate", "1000", "--max-execution-usd", "2500")
}

// Card orders through the gateway: a buy and a sell, their status, the
// Idempotency-Key replay, another key's order, and the checks in the
// contract's order with their exact answers.
func TestCardOrdersThroughTheGateway(t *testing.T) {
	s := startStack(t)
	key := s.cardKey("acme")
	other := s.cardKey("globex")
	bankOnly := s.issue("bank-only", "--products", "bank", "--source-chains", "84532", "--rate", "1000")

	buyBody := `{"direction":"buy","cryptoCurrency":"USDC","chain":84532,"fiatCurrency":"EUR","country":"DE","fiatAmount":"100","walletAddress":"` + orderWallet + `"}`
	first := s.do("POST", "/v1/orders", key, buyBody, "Idempotency-Key", "order-buy-1")
	buy := decodeOK(t, first)
	id, _ := buy["orderId"].(string)
	if !regexp.MustCompile(`^ord_[0-9a-f]{24}$`).MatchString(id) || buy["status"] != "awaiting_payment" || buy["mock"] != true ||
		buy["fiatAmount"] != "1234567.89" || !strings.HasPrefix(first.Body, `{"environment":"sandbox","mock":true,"orderId":"`) {
		t.Fatalf("buy order: %s", first.Body)
	}
	if methods := buy["paymentMethods"].([]any); len(methods) != 2 || methods[0] != "card" || methods[1] != "apple_pay" {
		t.Errorf("the EUR corridor offers card and Apple Pay: %v", methods)
	}
	if again := s.do("POST", "/v1/orders", key, buyBody, "Idempotency-Key", "order-buy-1"); again.Body != first.Body || again.Header.Get("Idempotent-Replayed") != "true" {
		t.Errorf("the replay: %d %s (replayed %q)", again.Status, again.Body, again.Header.Get("Idempotent-Replayed"))
	}
	if r := s.do("POST", "/v1/orders", key, strings.Replace(buyBody, `"100"`, `"101"`, 1), "Idempotency-Key", "order-buy-1"); r.Status != 422 {
		t.Errorf("the same key for another order: %d %s", r.Status, r.Body)
	}

	sell := decodeOK(t, s.post("/v1/orders", key, `{"direction":"sell","cryptoCurrency":"USDC","chain":84532,"fiatCurrency":"GBP","country":"GB","cryptoAmount":"50","walletAddress":"`+orderWallet+`"}`))
	if sell["status"] != "awaiting_deposit" || !regexp.MustCompile(`^0x[0-9a-fA-F]{40}$`).MatchString(sell["depositAddress"].(string)) {
		t.Errorf("sell order: %v", sell)
	}

	want := `{"environment":"sandbox","orderId":"` + id + `","direction":"buy","status":"awaiting_payment","cryptoAmount":"1234567.89","fiatAmount":"1234567.89"}`
	if r := s.post("/v1/orders/status", key, `{"orderId":"`+id+`"}`); r.Status != 200 || r.Body != want {
		t.Errorf("status: %d %s\nwant %s", r.Status, r.Body, want)
	}
	notFound := errorBody("order_not_found", "No order with this orderId exists for this key.")
	for _, c := range []struct{ key, body string }{
		{other, `{"orderId":"` + id + `"}`},
		{key, `{"orderId":"ord_000000000000000000000000"}`},
		{key, `{"orderId":"` + strings.Repeat("x", 300) + `"}`},
	} {
		if r := s.post("/v1/orders/status", c.key, c.body); r.Status != 404 || r.Body != notFound {
			t.Errorf("%.60s: %d %s", c.body, r.Status, r.Body)
		}
	}

	for _, c := range []struct {
		name, key, body string
		status          int
		want            string
	}{
		{"no card product", bankOnly, buyBody, 403, errorBody("permission_denied", "This key does not carry the card product.")},
		{"a direction that is neither", key, strings.Replace(buyBody, `"buy"`, `"hold"`, 1), 400, errorBody("invalid_request", "direction must be buy or sell.")},
		{"no corridor", key, strings.Replace(buyBody, `"DE"`, `"JP"`, 1), 400, errorBody("no_route", "No card corridor serves EUR for cardholders in JP; see GET /v1/limits.")},
		{"below the corridor's limit", key, strings.Replace(buyBody, `"100"`, `"10"`, 1), 400, errorBody("no_route", "The EUR card corridor takes 20 to 5000 EUR per order; this order is 10 EUR; see GET /v1/limits.")},
		{"above the key's ceiling", key, strings.Replace(buyBody, `"100"`, `"3000"`, 1), 403, errorBody("execution_capped", "This order is worth more than the key's maxExecutionUsd of 2500 USD at the reference rates of GET /v1/rates.")},
	} {
		if r := s.post("/v1/orders", c.key, c.body); r.Status != c.status || r.Body != c.want {
			t.Errorf("%s: %d %s\nwant %d %s", c.name, r.Status, r.Body, c.status, c.want)
		}
	}
}
