package e2e

import (
	"net/http"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"
)

const (
	baseUSDC    = "0x036CbD53842c5426634e7929541eC2318f3dCF7e"
	baseEURC    = "0x808456652fdb597867f38412077A9182bf77359F"
	sepoliaUSDC = "0x1c7D4B196Cb0C7B01d743Fbc6116a902379C7238"
	sepoliaEURC = "0x08210F9170F89Ab7658F0B5E3fF39b0E03C594D4"
)

func depositBody(srcChain, srcToken, dstChain, dstToken, amount string) string {
	return `{"source":{"address":"` + wallet + `","chain":` + srcChain + `,"token":"` + srcToken + `"},` +
		`"destination":{"address":"` + wallet + `","chain":` + dstChain + `,"token":"` + dstToken + `"},"amount":"` + amount + `","method":"crypto"}`
}

var depositQuoteBody = regexp.MustCompile(`^\{"environment":"sandbox","mock":true,"quoteId":"(dq_84532_[0-9a-f]{32})","source":\{"address":"0x5aAeb6053F3E94C9b9A09f33669435E7Ef1BeAed","chain":84532,"token":"0x036CbD53842c5426634e7929541eC2318f3dCF7e"\},"destination":\{"address":"0x5aAeb6053F3E94C9b9A09f33669435E7Ef1BeAed","chain":11155111,"token":"0x1c7D4B196Cb0C7B01d743Fbc6116a902379C7238"\},"method":"crypto","amountIn":"1000000","amountOut":"123456789","fee":"123456789","estimatedSettlement":"PT15M","expiresAt":"(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ)"\}$`)

func TestDepositQuote(t *testing.T) {
	s := startStack(t)
	const path = "/v1/deposit/quote"
	all := "84532:" + baseUSDC + ",84532:" + baseEURC + ",11155111:" + sepoliaUSDC + ",11155111:" + sepoliaEURC
	key := s.issue("acme", "--products", "deposit", "--source-chains", "84532,11155111", "--destination-chains", "84532,11155111", "--tokens", all, "--rate", "1000")
	noDest := s.issue("nodest", "--products", "deposit", "--source-chains", "84532", "--destination-chains", "84532", "--tokens", all, "--rate", "1000")
	noToken := s.issue("notoken", "--products", "deposit", "--source-chains", "84532,11155111", "--destination-chains", "84532,11155111", "--tokens", "84532:"+baseEURC+",11155111:"+sepoliaUSDC, "--rate", "1000")
	small := s.issue("small", "--products", "deposit", "--source-chains", "84532,11155111", "--destination-chains", "84532,11155111", "--tokens", all, "--rate", "1000", "--max-execution-usd", "100")
	bankOnly := s.issue("bank", "--products", "bank", "--source-chains", "84532", "--rate", "1000")

	t.Run("quotes a deposit with the exact shape", func(t *testing.T) {
		lower := strings.Replace(depositBody("84532", strings.ToLower(baseUSDC), "11155111", sepoliaUSDC, "1000000"), wallet, strings.ToLower(wallet), 1)
		r := s.post(path, key, lower)
		m := depositQuoteBody.FindStringSubmatch(r.Body)
		if r.Status != 200 || m == nil {
			t.Fatalf("%d %s", r.Status, r.Body)
		}
		// Every request opens a new quote; a retry with an Idempotency-Key
		// is answered the first one, byte for byte.
		again := s.post(path, key, depositBody("84532", baseUSDC, "11155111", sepoliaUSDC, "1000000"))
		if m2 := depositQuoteBody.FindStringSubmatch(again.Body); again.Status != 200 || m2 == nil || m2[1] == m[1] {
			t.Errorf("the same request again: %s, want a new quote (after %s)", again.Body, r.Body)
		}
		first := s.do("POST", path, key, lower, "Idempotency-Key", "dq-1")
		if retry := s.do("POST", path, key, lower, "Idempotency-Key", "dq-1"); first.Status != 200 || retry.Body != first.Body ||
			retry.Header.Get("Idempotent-Replayed") != "true" {
			t.Errorf("a keyed retry: %d %s, want the first answer %s replayed", retry.Status, retry.Body, first.Body)
		}
		if got := fieldOrder(t, r.Body); !slices.Equal(got, []string{"environment", "mock", "quoteId", "source", "destination", "method", "amountIn", "amountOut", "fee", "estimatedSettlement", "expiresAt"}) {
			t.Errorf("fields %v", got)
		}
	})

	badSum := strings.Replace(depositBody("84532", baseUSDC, "11155111", sepoliaUSDC, "1"), `"destination":{"address":"0x5aAeb`, `"destination":{"address":"0x5AAeb`, 1)
	for _, tt := range []struct {
		name, key, body string
		status          int
		code, message   string
	}{
		{"a key without the deposit product", bankOnly, depositBody("84532", baseUSDC, "11155111", sepoliaUSDC, "1"), 403, "permission_denied", "This key does not carry the deposit product."},
		{"a bad checksum", key, badSum, 400, "invalid_request", "destination.address must be 0x followed by 40 hex digits, with a valid EIP-55 checksum if it is mixed-case."},
		{"an address that is not one", key, strings.Replace(depositBody("84532", baseUSDC, "11155111", sepoliaUSDC, "1"), wallet, "0x123", 1), 400, "invalid_request", "source.address must be 0x followed by 40 hex digits, with a valid EIP-55 checksum if it is mixed-case."},
		{"an amount as a number", key, strings.Replace(depositBody("84532", baseUSDC, "11155111", sepoliaUSDC, "1"), `"amount":"1"`, `"amount":1`, 1), 400, "invalid_request", `Field "amount" must be a string.`},
		{"an amount of zero", key, depositBody("84532", baseUSDC, "11155111", sepoliaUSDC, "0"), 400, "invalid_request", "amount must be an integer string in the token's smallest unit greater than zero, at most 78 digits."},
		{"an amount of 79 digits", key, depositBody("84532", baseUSDC, "11155111", sepoliaUSDC, "1"+strings.Repeat("0", 78)), 400, "invalid_request", "amount must be an integer string in the token's smallest unit greater than zero, at most 78 digits."},
		{"a method other than crypto", key, strings.Replace(depositBody("84532", baseUSDC, "11155111", sepoliaUSDC, "1"), `"method":"crypto"`, `"method":"card"`, 1), 400, "invalid_request", `method must be "crypto": the deposit is sent from a wallet.`},
		{"a chain not in the catalogue", key, depositBody("8453", baseUSDC, "11155111", sepoliaUSDC, "1"), 400, "invalid_request", "source.chain 8453 is not in this deployment's catalogue; see GET /v1/currencies."},
		{"a token not on its chain", key, depositBody("84532", baseUSDC, "11155111", baseUSDC, "1"), 400, "invalid_request", "destination.token 0x036CbD53842c5426634e7929541eC2318f3dCF7e is not a token on chain 11155111; see GET /v1/currencies."},
		{"a key without the destination chain", noDest, depositBody("84532", baseUSDC, "11155111", sepoliaUSDC, "1"), 403, "chain_not_allowed", "This key is not enabled for chain 11155111 as a destination."},
		{"a key without the token", noToken, depositBody("84532", baseUSDC, "11155111", sepoliaUSDC, "1"), 403, "token_not_allowed", "This key is not enabled for token 0x036CbD53842c5426634e7929541eC2318f3dCF7e on chain 84532 as a source; see crypto.tokens in GET /v1/config."},
		{"USDC to EURC", key, depositBody("84532", baseUSDC, "11155111", sepoliaEURC, "1"), 400, "no_route", "There is no route from USDC to EURC: a deposit delivers the same currency on another chain."},
		{"the same chain and token on both sides", key, depositBody("84532", baseUSDC, "84532", baseUSDC, "1"), 400, "no_route", "Source and destination are the same token on the same chain: there is nothing to move."},
		{"an amount over the ceiling", small, depositBody("84532", baseUSDC, "11155111", sepoliaUSDC, "100000001"), 403, "execution_capped", "This deposit is worth more than the key's maxExecutionUsd of 100 USD at the reference rates of GET /v1/rates."},
		{"a field name in the wrong case", key, strings.Replace(depositBody("84532", baseUSDC, "11155111", sepoliaUSDC, "1"), `"amount"`, `"Amount"`, 1), 400, "invalid_request", `Unknown field "Amount".`},
	} {
		t.Run(tt.name, func(t *testing.T) {
			r := s.post(path, tt.key, tt.body)
			if r.Status != tt.status || r.Body != errorBody(tt.code, tt.message) {
				t.Fatalf("got %d %s\nwant %d %s", r.Status, r.Body, tt.status, errorBody(tt.code, tt.message))
			}
		})
	}
}

func TestReferenceListsStatusesPaymentMethodsRates(t *testing.T) {
	s := startStack(t)
	key := s.issue("acme", "--products", "bank", "--source-chains", "84532", "--rate", "1000")
	for _, path := range []string{"/v1/statuses", "/v1/payment-methods", "/v1/rates"} {
		if r := s.get(path, key); r.Status != 200 || !strings.HasPrefix(r.Body, `{"environment":"sandbox",`) {
			t.Errorf("%s: %d %.80s", path, r.Status, r.Body)
		}
	}
	st := decodeOK(t, s.get("/v1/statuses", key))
	var resources []string
	for _, r := range st["resources"].([]any) {
		resources = append(resources, r.(map[string]any)["resource"].(string))
	}
	if !slices.Equal(resources, []string{"payout", "payoutRefund", "funding", "consentSession", "account", "virtualAccount", "deposit", "order"}) {
		t.Errorf("statuses cover %v", resources)
	}
	if r := s.get("/v1/statuses", key); !strings.Contains(r.Body, `{"resource":"funding","field":"status","statuses":[{"value":"awaiting_deposit",`) ||
		!strings.Contains(r.Body, `{"value":"funded","meaning":"A deposit settled: stablecoins were delivered to the wallet (deliveredAmount, depositedAmount and txHash are set).","final":true}`) {
		t.Errorf("statuses: %s", r.Body)
	}
	pm := s.get("/v1/payment-methods", key)
	for _, want := range []string{
		`{"method":"crypto","directions":["deposit"],"offered":true,`,
		`{"method":"bank_transfer","directions":["payin","payout"],"offered":true,`,
		`"rails":["sepa_instant","sepa","faster_payments","ach","wire","spei","pix","swift"]}`,
		`{"method":"card","directions":["payin","payout"],"offered":true,`,
		`{"method":"apple_pay","directions":["payin"],"offered":true,`,
	} {
		if !strings.Contains(pm.Body, want) {
			t.Errorf("payment methods lack %s: %s", want, pm.Body)
		}
	}
	rates := s.get("/v1/rates", key)
	if want := `{"environment":"sandbox","indicative":true,"base":"USD","notice":"Indicative reference rates: what holds a transfer to maxExecutionUsd and converts a crypto amount for a rail's limits. Never a price; they change by release.","fiat":{"BRL":"0.18","EUR":"1.08","GBP":"1.27","MXN":"0.058","USD":"1"},"stablecoins":{"EURC":"1.08","USDC":"1"}}`; rates.Body != want {
		t.Errorf("rates\n got %s\nwant %s", rates.Body, want)
	}
	// One source of truth: the limits' reference rates are the rates', and
	// the config's corridors use only rails payment methods list.
	limits := decodeOK(t, s.get("/v1/limits", key))
	r := decodeOK(t, rates)
	for cur, v := range r["fiat"].(map[string]any) {
		if limits["referenceRatesUsd"].(map[string]any)[cur] != v {
			t.Errorf("rate of %s: /v1/rates %v, /v1/limits %v", cur, v, limits["referenceRatesUsd"].(map[string]any)[cur])
		}
	}
	cfg := decodeOK(t, s.get("/v1/config", key))
	for _, c := range cfg["corridors"].(map[string]any)["bank"].([]any) {
		for _, rail := range c.(map[string]any)["rails"].([]any) {
			if !strings.Contains(pm.Body, `"`+rail.(string)+`"`) {
				t.Errorf("config's corridor rail %v is not a bank_transfer rail", rail)
			}
		}
	}
}

func TestOneOffDepositFromOnboardingToFunded(t *testing.T) {
	s := startStack(t)
	key := s.issue("acme", "--products", "fiat", "--destination-chains", "84532", "--rate", "1000")
	other := s.issue("globex", "--products", "fiat", "--destination-chains", "84532", "--rate", "1000")

	acc := decodeOK(t, s.post("/v1/fiat/accounts", key, onboardBody("ada@example.com")))
	accountID := acc["accountId"].(string)
	body := `{"accountId":"` + accountID + `","currency":"EUR","amount":"250"}`
	r := s.post("/v1/fiat/deposits", key, body)
	notActive := errorBody("account_not_active", "The account is not active: the user must accept the bank's terms and pass its identity check first (see the account's status).")
	if r.Status != 409 || r.Body != notActive {
		t.Fatalf("a deposit before consent: %d %s", r.Status, r.Body)
	}
	link := decodeOK(t, s.post("/v1/fiat/consent/link", key, `{"consentSessionId":"`+acc["consentSessionId"].(string)+`"}`))["link"].(string)
	s.consentViaForm(link, "accept").Body.Close()

	first := s.do("POST", "/v1/fiat/deposits", key, body, "Idempotency-Key", "deposit-1")
	d := decodeOK(t, first)
	depositID, reference := d["depositId"].(string), d["reference"].(string)
	if got := fieldOrder(t, first.Body); !slices.Equal(got, []string{"environment", "depositId", "accountId", "status", "amount", "currency", "bankDetails", "reference", "expiresAt", "createdAt"}) {
		t.Errorf("deposit fields %v", got)
	}
	exp, _ := time.Parse(time.RFC3339, d["expiresAt"].(string))
	if d["status"] != "awaiting_deposit" || d["amount"] != "250.00" || d["currency"] != "EUR" || !regexp.MustCompile(`^SBX-[A-Z2-9]{4}-[A-Z2-9]{4}$`).MatchString(reference) ||
		time.Until(exp) < 71*time.Hour || time.Until(exp) > 73*time.Hour {
		t.Fatalf("deposit %s", first.Body)
	}
	if again := s.do("POST", "/v1/fiat/deposits", key, body, "Idempotency-Key", "deposit-1"); again.Body != first.Body || again.Header.Get("Idempotent-Replayed") != "true" {
		t.Errorf("idempotent replay: %s", again.Body)
	}
	statusBody := `{"accountId":"` + accountID + `","depositId":"` + depositID + `"}`
	if r := s.post("/v1/fiat/status", key, statusBody); r.Body != `{"environment":"sandbox","depositId":"`+depositID+`","status":"awaiting_deposit","transactions":[]}` {
		t.Fatalf("before any transfer: %s", r.Body)
	}
	for _, tt := range []struct{ name, key, body, code, message string }{
		{"another key's deposit", other, `{"depositId":"` + depositID + `"}`, "deposit_not_found", "No deposit with this depositId exists for this key."},
		{"a malformed id", key, `{"depositId":"dep_nope"}`, "deposit_not_found", "No deposit with this depositId exists for this key."},
		{"another key's account is named first", other, statusBody, "account_not_found", "No account with this accountId exists for this key."},
	} {
		if r := s.post("/v1/fiat/status", tt.key, tt.body); r.Status != http.StatusNotFound || r.Body != errorBody(tt.code, tt.message) {
			t.Errorf("%s: %d %s", tt.name, r.Status, r.Body)
		}
	}

	payin := func(amount, ref string) map[string]any {
		return decodeOK(t, s.post("/v1/sandbox/payin", key, `{"depositId":"`+depositID+`","amount":"`+amount+`","currency":"EUR","reference":"`+ref+`"}`))
	}
	if p := payin("249.99", reference); p["status"] != "unmatched" || p["depositId"] != depositID {
		t.Errorf("a wrong amount: %v", p)
	}
	if p := payin("250", "SBX-WRNG-REF2"); p["status"] != "unmatched" {
		t.Errorf("a wrong reference: %v", p)
	}
	if r := s.post("/v1/sandbox/payin", key, `{"depositId":"`+depositID+`","amount":"250","currency":"EUR"}`); r.Status != 400 ||
		r.Body != errorBody("invalid_request", "reference is required with depositId: the reference the user types in the transfer.") {
		t.Errorf("a pay-in without reference: %d %s", r.Status, r.Body)
	}
	if p := payin("250.00", reference); p["status"] != "received" {
		t.Fatalf("the exact amount and reference: %v", p)
	}
	var funded map[string]any
	s.waitFor(func() bool {
		funded = decodeOK(t, s.post("/v1/fiat/status", key, statusBody))
		return funded["status"] == "funded"
	})
	if funded["depositedAmount"] != "250.00" || funded["deliveredAmount"] != "250.00" || !regexp.MustCompile(`^0x[0-9a-f]{64}$`).MatchString(funded["txHash"].(string)) {
		t.Errorf("funded: %v", funded)
	}
	txs := funded["transactions"].([]any)
	var unmatched int
	for _, tx := range txs {
		if tx.(map[string]any)["status"] == "unmatched" {
			unmatched++
		}
	}
	if len(txs) != 3 || unmatched != 2 {
		t.Errorf("transactions: %d, %d unmatched; want 3 and 2 (the wrong ones stay visible)", len(txs), unmatched)
	}
}
