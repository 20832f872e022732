package e2e

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	partnerapi "github.com/partnerpay/api/clients/go"
)

// The flows a partner integrates, through the Go client that oapi-codegen
// generates from the document the gateway serves (clients/go): every
// answer, success or error, decodes into its typed form.

func newClient(t *testing.T, s *stack, key string) *partnerapi.ClientWithResponses {
	t.Helper()
	c, err := partnerapi.NewPartnerClient(s.GatewayURL, key, partnerapi.WithHTTPClient(client))
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func ptr[T any](v T) *T { return &v }

// wantError checks a typed error answer: status, the code of its
// status-specific schema, the message, and the same through ErrorOf.
func wantError(t *testing.T, what string, resp *http.Response, body []byte, status int, typedCode, code, message string) {
	t.Helper()
	if resp.StatusCode != status || typedCode != code {
		t.Errorf("%s: %d, typed code %q; want %d %s\n%s", what, resp.StatusCode, typedCode, status, code, body)
		return
	}
	e := partnerapi.ErrorOf(resp, body)
	if e == nil || string(e.Code) != code || e.Message != message || e.Environment != partnerapi.Sandbox || e.RequestID == "" {
		t.Errorf("%s: ErrorOf = %+v; want %s %q with a request id", what, e, code, message)
	}
}

func TestAGeneratedClientCompletesThePayout(t *testing.T) {
	// Not parallel: a stack of its own, timed against bounds (package e2e).
	s := startStack(t, withEnv("QUOTE_TTL", "2s"))
	ctx := context.Background()
	key := s.issue("acme", "--products", "bank", "--source-chains", "84532", "--rate", "1000")
	c := newClient(t, s, key)

	cfg, err := c.GetConfigWithResponse(ctx)
	if err != nil || cfg.JSON200 == nil || cfg.JSON200.Environment != partnerapi.Sandbox || len(cfg.JSON200.Products) != 1 {
		t.Fatalf("config: %v %+v", err, cfg)
	}
	me, err := c.GetMyKeyWithResponse(ctx)
	if err != nil || me.JSON200 == nil || me.JSON200.KeyId != "acme" || me.JSON200.Scope != partnerapi.Write || me.JSON200.RatePerSecond != 1000 ||
		len(me.JSON200.AllowedIps) != 0 || me.JSON200.ExpiresAt != nil {
		t.Fatalf("keys/me: %v %s", err, me.Body)
	}

	quoteBody := partnerapi.BankPayoutQuoteJSONRequestBody{CryptoCurrency: "USDC", Chain: 84532, FiatCurrency: "GBP", Country: "GB", CryptoAmount: ptr("42")}
	q, err := c.BankPayoutQuoteWithResponse(ctx, nil, quoteBody)
	if err != nil || q.JSON200 == nil {
		t.Fatalf("quote: %v %s", err, q.Body)
	}
	if !strings.HasPrefix(q.JSON200.QuoteId, "bpq_84532_") || q.JSON200.Rail != partnerapi.FasterPayments || time.Until(q.JSON200.ExpiresAt) <= 0 {
		t.Fatalf("quote: %+v", q.JSON200)
	}

	alice := partnerapi.BankPayoutJSONRequestBody{QuoteId: q.JSON200.QuoteId}
	if err := alice.Beneficiary.FromFasterPaymentsBeneficiary(partnerapi.FasterPaymentsBeneficiary{Name: "Alice Liddell", SortCode: "60-16-13", AccountNumber: "31926819"}); err != nil {
		t.Fatal(err)
	}
	params := &partnerapi.BankPayoutParams{IdempotencyKey: ptr("payout-alice-1")}
	p, err := c.BankPayoutWithResponse(ctx, params, alice)
	if err != nil || p.JSON200 == nil || !strings.HasPrefix(p.JSON200.PayoutId, "bpo_") || p.JSON200.Status != partnerapi.PayoutStatusValueAwaitingDeposit || p.JSON200.QuoteId != q.JSON200.QuoteId ||
		p.JSON200.Beneficiary.Account != "6819" {
		t.Fatalf("payout: %v %s", err, p.Body)
	}
	replay, err := c.BankPayoutWithResponse(ctx, params, alice)
	if err != nil || replay.JSON200 == nil || replay.JSON200.PayoutId != p.JSON200.PayoutId || replay.HTTPResponse.Header.Get("Idempotent-Replayed") != "true" {
		t.Fatalf("replay: %v %s", err, replay.Body)
	}

	bob := alice
	if err := bob.Beneficiary.FromFasterPaymentsBeneficiary(partnerapi.FasterPaymentsBeneficiary{Name: "Bob Cratchit", SortCode: "201530", AccountNumber: "93459012"}); err != nil {
		t.Fatal(err)
	}
	r409, _ := c.BankPayoutWithResponse(ctx, nil, bob)
	if r409.JSON409 == nil {
		t.Fatalf("another beneficiary: %d %s", r409.StatusCode(), r409.Body)
	}
	wantError(t, "another beneficiary", r409.HTTPResponse, r409.Body, 409, string(r409.JSON409.Error.Code), "quote_already_executed",
		"This quote was already executed for another beneficiary; nothing was sent. Request a new quote for a new payout.")

	r422, _ := c.BankPayoutWithResponse(ctx, params, bob)
	if r422.JSON422 == nil {
		t.Fatalf("a reused Idempotency-Key: %d %s", r422.StatusCode(), r422.Body)
	}
	wantError(t, "a reused Idempotency-Key", r422.HTTPResponse, r422.Body, 422, string(r422.JSON422.Error.Code), "idempotency_key_reused",
		"This Idempotency-Key was used for a different request in the last 24 hours; use a new key for a new request.")

	both := quoteBody
	both.FiatAmount = ptr("10")
	r400, _ := c.BankPayoutQuoteWithResponse(ctx, nil, both)
	if r400.JSON400 == nil {
		t.Fatalf("both amounts: %d %s", r400.StatusCode(), r400.Body)
	}
	wantError(t, "both amounts", r400.HTTPResponse, r400.Body, 400, string(r400.JSON400.Error.Code), "invalid_request",
		"Send exactly one of cryptoAmount and fiatAmount, not both.")

	other := quoteBody
	other.Chain = 11155111
	r403, _ := c.BankPayoutQuoteWithResponse(ctx, nil, other)
	if r403.JSON403 == nil {
		t.Fatalf("a chain the key lacks: %d %s", r403.StatusCode(), r403.Body)
	}
	wantError(t, "a chain the key lacks", r403.HTTPResponse, r403.Body, 403, string(r403.JSON403.Error.Code), "chain_not_allowed",
		"This key is not enabled for chain 11155111 as a source.")

	unknown := alice
	unknown.QuoteId = "bpq_84532_00000000000000000000000000000000"
	r404, _ := c.BankPayoutWithResponse(ctx, nil, unknown)
	if r404.JSON404 == nil {
		t.Fatalf("an unknown quote: %d %s", r404.StatusCode(), r404.Body)
	}
	wantError(t, "an unknown quote", r404.HTTPResponse, r404.Body, 404, string(r404.JSON404.Error.Code), "quote_not_found",
		"No quote with this quoteId exists for this key.")

	late, _ := c.BankPayoutQuoteWithResponse(ctx, nil, quoteBody)
	if late.JSON200 == nil || late.JSON200.QuoteId == q.JSON200.QuoteId {
		t.Fatalf("a second identical payout is a new quote: %s", late.Body)
	}
	time.Sleep(time.Until(late.JSON200.ExpiresAt) + 100*time.Millisecond)
	expired := alice
	expired.QuoteId = late.JSON200.QuoteId
	r410, _ := c.BankPayoutWithResponse(ctx, nil, expired)
	if r410.JSON410 == nil {
		t.Fatalf("an expired quote: %d %s", r410.StatusCode(), r410.Body)
	}
	wantError(t, "an expired quote", r410.HTTPResponse, r410.Body, 410, string(r410.JSON410.Error.Code), "quote_expired",
		"This quote has expired; request a new quote. Expired quotes are never repriced.")

	nobody := newClient(t, s, "pk_AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA")
	r401, _ := nobody.GetConfigWithResponse(ctx)
	if r401.JSON401 == nil {
		t.Fatalf("an unknown key: %d %s", r401.StatusCode(), r401.Body)
	}
	wantError(t, "an unknown key", r401.HTTPResponse, r401.Body, 401, string(r401.JSON401.Error.Code), "unauthorized",
		"Missing, malformed or unknown API key.")

	slow := newClient(t, s, s.issue("slow", "--products", "bank", "--rate", "1"))
	var r429 *partnerapi.GetConfigResponse
	for range 3 {
		if r429, _ = slow.GetConfigWithResponse(ctx); r429.JSON429 != nil {
			break
		}
	}
	if r429.JSON429 == nil || r429.HTTPResponse.Header.Get("Retry-After") == "" {
		t.Fatalf("over the rate: %d %s", r429.StatusCode(), r429.Body)
	}
	wantError(t, "over the rate", r429.HTTPResponse, r429.Body, 429, string(r429.JSON429.Error.Code), "rate_limited",
		"Too many requests for this key; retry after the time in Retry-After.")
}

func TestAGeneratedClientCompletesTheOnRamp(t *testing.T) {
	// Not parallel: a stack of its own, timed against bounds (package e2e).
	s := startStack(t)
	ctx := context.Background()
	c := newClient(t, s, s.issue("acme", "--products", "fiat", "--destination-chains", "84532", "--rate", "1000"))

	acc, err := c.CreateFiatAccountWithResponse(ctx, &partnerapi.CreateFiatAccountParams{IdempotencyKey: ptr("onboard-ada")},
		partnerapi.CreateFiatAccountJSONRequestBody{Email: "ada@example.com", FullName: "Ada Lovelace", Country: "DE", WalletAddress: wallet, Chain: 84532,
			Reference: ptr("user-ada")})
	if err != nil || acc.JSON200 == nil || acc.JSON200.Status != partnerapi.FiatAccountStatusConsentRequired || acc.JSON200.ConsentSessionId == nil {
		t.Fatalf("onboarding: %v %s", err, acc.Body)
	}
	accountID, sessionID := acc.JSON200.AccountId, *acc.JSON200.ConsentSessionId

	va, _ := c.CreateVirtualAccountWithResponse(ctx, nil, partnerapi.CreateVirtualAccountJSONRequestBody{AccountId: accountID, Currency: "EUR"})
	if va.JSON200 == nil {
		t.Fatalf("virtual account before consent: %d %s", va.StatusCode(), va.Body)
	}
	if d, _ := va.JSON200.Discriminator(); d != "consent_required" {
		t.Fatalf("before consent the account is %q: %s", d, va.Body)
	}
	if pending, err := va.JSON200.AsVirtualAccountConsentRequired(); err != nil || pending.ConsentSessionId != sessionID {
		t.Fatalf("consent_required: %+v %v", pending, err)
	}

	link, err := c.ConsentLinkWithResponse(ctx, partnerapi.ConsentLinkJSONRequestBody{ConsentSessionId: sessionID})
	if err != nil || link.JSON200 == nil {
		t.Fatalf("consent link: %v %s", err, link.Body)
	}
	ret := s.consentViaForm(link.JSON200.Link, "accept")
	ret.Body.Close()
	st, _ := c.ConsentStatusWithResponse(ctx, partnerapi.ConsentStatusJSONRequestBody{ConsentSessionId: sessionID})
	if st.JSON200 == nil || st.JSON200.State != partnerapi.ConsentStatusStateReturned {
		t.Fatalf("consent status: %s", st.Body)
	}

	va, _ = c.CreateVirtualAccountWithResponse(ctx, nil, partnerapi.CreateVirtualAccountJSONRequestBody{AccountId: accountID, Currency: "EUR",
		Reference: ptr("wallet-ada")})
	v, err := va.JSON200.ValueByDiscriminator()
	active, ok := v.(partnerapi.VirtualAccountActive)
	if err != nil || !ok || !strings.HasPrefix(active.VirtualAccountId, "va_") || active.BankDetails.Beneficiary != "Ada Lovelace" {
		t.Fatalf("active virtual account: %T %v %s", v, err, va.Body)
	}

	usd, _ := c.CreateVirtualAccountWithResponse(ctx, nil, partnerapi.CreateVirtualAccountJSONRequestBody{AccountId: accountID, Currency: "USD"})
	if usd.JSON400 == nil || usd.JSON400.Error.Fields == nil || (*usd.JSON400.Error.Fields)["currency"] != "unsupported_currency" {
		t.Fatalf("the bank's refusal with fields: %d %s", usd.StatusCode(), usd.Body)
	}
	wantError(t, "a USD account", usd.HTTPResponse, usd.Body, 400, string(usd.JSON400.Error.Code), "invalid_request", "The bank refused the request; see error.fields.")

	gone, _ := c.FiatStatusWithResponse(ctx, partnerapi.FiatStatusJSONRequestBody{VirtualAccountId: ptr("va_000000000000000000000000")})
	if gone.JSON404 == nil {
		t.Fatalf("an unknown virtual account: %d %s", gone.StatusCode(), gone.Body)
	}
	wantError(t, "an unknown virtual account", gone.HTTPResponse, gone.Body, 404, string(gone.JSON404.Error.Code), "virtual_account_not_found",
		"No virtual account with this virtualAccountId exists for this key.")

	pay, err := c.SandboxPayinWithResponse(ctx, &partnerapi.SandboxPayinParams{IdempotencyKey: ptr("payin-1")},
		partnerapi.SandboxPayinJSONRequestBody{VirtualAccountId: &active.VirtualAccountId, Amount: "100.5", Currency: "EUR"})
	if err != nil || pay.JSON200 == nil || pay.JSON200.Amount != "100.50" {
		t.Fatalf("pay-in: %v %s", err, pay.Body)
	}
	funded := pollFunded(t, c, partnerapi.FiatStatusJSONRequestBody{VirtualAccountId: &active.VirtualAccountId})
	if funded.DeliveredAmount != "100.50" || len(funded.TxHash) != 66 {
		t.Fatalf("funded: %+v", funded)
	}

	dep, err := c.CreateFiatDepositWithResponse(ctx, &partnerapi.CreateFiatDepositParams{IdempotencyKey: ptr("deposit-1")},
		partnerapi.CreateFiatDepositJSONRequestBody{AccountId: accountID, Currency: "EUR", Amount: "250", PartnerReference: ptr("invoice-1")})
	if err != nil || dep.JSON200 == nil || !strings.HasPrefix(dep.JSON200.DepositId, "dep_") || dep.JSON200.Amount != "250.00" ||
		dep.JSON200.PartnerReference == nil || *dep.JSON200.PartnerReference != "invoice-1" {
		t.Fatalf("deposit: %v %s", err, dep.Body)
	}
	pay, _ = c.SandboxPayinWithResponse(ctx, nil, partnerapi.SandboxPayinJSONRequestBody{
		DepositId: &dep.JSON200.DepositId, Reference: &dep.JSON200.Reference, Amount: dep.JSON200.Amount, Currency: dep.JSON200.Currency})
	if pay.JSON200 == nil {
		t.Fatalf("deposit pay-in: %d %s", pay.StatusCode(), pay.Body)
	}
	if f := pollFunded(t, c, partnerapi.FiatStatusJSONRequestBody{DepositId: &dep.JSON200.DepositId}); f.DepositedAmount != "250.00" {
		t.Fatalf("deposit funded: %+v", f)
	}

	// Everything made above is found again by the partner's references,
	// through the client's iterators.
	var accounts []partnerapi.FiatAccountListItem
	for a, err := range c.AllFiatAccounts(ctx, &partnerapi.ListFiatAccountsParams{Reference: ptr("user-ada")}) {
		if err != nil {
			t.Fatal(err)
		}
		accounts = append(accounts, a)
	}
	if len(accounts) != 1 || accounts[0].AccountId != accountID || accounts[0].Status != partnerapi.FiatAccountListItemStatusActive {
		t.Errorf("accounts with reference user-ada: %+v", accounts)
	}
	var vas []partnerapi.FiatVirtualAccountListItem
	for v, err := range c.AllFiatVirtualAccounts(ctx, nil) {
		if err != nil {
			t.Fatal(err)
		}
		vas = append(vas, v)
	}
	if len(vas) != 1 || vas[0].VirtualAccountId != active.VirtualAccountId || vas[0].Reference == nil || *vas[0].Reference != "wallet-ada" {
		t.Errorf("virtual accounts: %+v", vas)
	}
	var deposits []partnerapi.FiatDepositListItem
	for d, err := range c.AllFiatDeposits(ctx, &partnerapi.ListFiatDepositsParams{Reference: ptr("invoice-1"), Status: ptr(partnerapi.ListFiatDepositsParamsStatusFunded)}) {
		if err != nil {
			t.Fatal(err)
		}
		deposits = append(deposits, d)
	}
	if len(deposits) != 1 || deposits[0].DepositId != dep.JSON200.DepositId || deposits[0].Reference != dep.JSON200.Reference {
		t.Errorf("funded deposits with reference invoice-1: %+v", deposits)
	}
	for _, ref := range []string{"user-ada", "wallet-ada", "invoice-1", "reference="} {
		if strings.Contains(s.logs.String(), ref) {
			t.Errorf("%s reached a log line: references and list queries are never logged", ref)
		}
	}
	other := newClient(t, s, s.issue("globex", "--products", "fiat", "--destination-chains", "84532", "--rate", "1000"))
	for _, list := range []string{"/v1/fiat/accounts", "/v1/fiat/virtual-accounts", "/v1/fiat/deposits"} {
		if r := s.get(list, ""); r.Status != 401 {
			t.Errorf("%s without a key: %d", list, r.Status)
		}
	}
	if r, err := other.ListFiatDepositsWithResponse(ctx, nil); err != nil || r.JSON200 == nil || len(r.JSON200.Data) != 0 {
		t.Errorf("another key's deposits: %v %s", err, r.Body)
	}
}

// pollFunded polls the funding status, as a partner does, until funded.
func pollFunded(t *testing.T, c *partnerapi.ClientWithResponses, body partnerapi.FiatStatusJSONRequestBody) partnerapi.FiatStatusFunded {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		r, err := c.FiatStatusWithResponse(context.Background(), body)
		if err != nil || r.JSON200 == nil {
			t.Fatalf("status: %v %s", err, r.Body)
		}
		switch d, _ := r.JSON200.Discriminator(); d {
		case "funded":
			f, err := r.JSON200.AsFiatStatusFunded()
			if err != nil {
				t.Fatal(err)
			}
			return f
		case "awaiting_deposit":
		default:
			t.Fatalf("status %q: %s", d, r.Body)
		}
		if time.Now().After(deadline) {
			t.Fatalf("not funded within 10s: %s", r.Body)
		}
		time.Sleep(100 * time.Millisecond)
	}
}
