package e2e

import (
	"net/http"
	"os"
	"regexp"
	"strings"
	"sync"
	"testing"
)

const unauthorized = `{"environment":"sandbox","error":{"code":"unauthorized","message":"Missing, malformed or unknown API key."}}`

func TestHealthNeedsNoKeyAndIsExact(t *testing.T) {
	s := startStack(t)
	for i := 0; i < 30; i++ { // far above any rate: health has no limit
		r := s.get("/health", "")
		if r.Status != 200 || r.Body != `{"ok":true}` {
			t.Fatalf("GET /health = %d %s, want 200 {\"ok\":true}", r.Status, r.Body)
		}
	}
}

func TestNoKeysMeansNotConfigured(t *testing.T) {
	s := startStack(t)
	want := errorBody("not_configured", "This deployment has no partner keys configured.")
	for _, c := range []struct{ method, path string }{
		{"GET", "/v1/config"}, {"POST", "/v1/bank/payout/quote"}, {"GET", "/v1/no-such-thing"}, {"DELETE", "/v1/limits"},
	} {
		r := s.do(c.method, c.path, "", "")
		if r.Status != 404 || r.Body != want {
			t.Errorf("%s %s = %d %s, want 404 %s", c.method, c.path, r.Status, r.Body, want)
		}
	}
	if r := s.get("/nope", ""); r.Status != 404 || r.Body != errorBody("not_found", "No such endpoint.") {
		t.Errorf("outside /v1 = %d %s, want not_found", r.Status, r.Body)
	}
	key := s.issue("first", "--products", "bank", "--source-chains", "84532")
	if r := s.get("/v1/config", key); r.Status != 200 {
		t.Errorf("after the first key is issued, /v1/config = %d %s", r.Status, r.Body)
	}
}

func TestChecksInContractOrder(t *testing.T) {
	s := startStack(t)
	bank := s.issue("bank", "--products", "bank", "--source-chains", "84532", "--rate", "1000")
	fiat := s.issue("fiat", "--products", "fiat", "--rate", "1000")
	slow := s.issue("slow", "--products", "fiat", "--rate", "1")
	notFound := errorBody("not_found", "No such endpoint.")
	tests := []struct {
		name, method, path, key, body string
		header                        []string
		status                        int
		want                          string
	}{
		{"unknown endpoint beats a missing key", "GET", "/v1/nope", "", "", nil, 404, notFound},
		{"wrong method is not_found, not 405", "GET", "/v1/bank/payout/quote", bank, "", nil, 404, notFound},
		{"wrong method without a key is still not_found", "PUT", "/v1/config", "", "", nil, 404, notFound},
		{"missing key", "GET", "/v1/config", "", "", nil, 401, unauthorized},
		{"malformed key", "GET", "/v1/config", "pk_short", "", nil, 401, unauthorized},
		{"wrong scheme", "GET", "/v1/config", "", "", []string{"Authorization", "Basic " + bank}, 401, unauthorized},
		{"unknown key", "GET", "/v1/config", "pk_" + strings.Repeat("x", 43), "", nil, 401, unauthorized},
		{"product beats body checks", "POST", "/v1/bank/payout/quote", fiat, `not json`, nil, 403, errorBody("permission_denied", "This key does not carry the bank product.")},
		{"body without JSON content type", "POST", "/v1/bank/payout/quote", bank, `{}`, []string{"Content-Type", "text/plain"}, 400, errorBody("invalid_request", "Content-Type must be application/json.")},
		{"body over 1 MiB", "POST", "/v1/bank/payout/quote", bank, `{"x":"` + strings.Repeat("a", 1<<20) + `"}`, nil, 413, errorBody("invalid_request", "Request body is larger than 1 MiB.")},
		{"empty body", "POST", "/v1/bank/payout/quote", bank, "", []string{"Content-Type", "application/json"}, 400, errorBody("invalid_request", "Request body is empty; send a JSON object.")},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := s.do(tt.method, tt.path, tt.key, tt.body, tt.header...)
			if r.Status != tt.status || r.Body != tt.want {
				t.Fatalf("got %d %s\nwant %d %s", r.Status, r.Body, tt.status, tt.want)
			}
			if ct := r.Header.Get("Content-Type"); ct != "application/json" {
				t.Errorf("Content-Type %q", ct)
			}
		})
	}
	t.Run("rate limit comes before the product check", func(t *testing.T) {
		// Five at once on a 1/s key without the product: the one the
		// bucket lets through is 403, the others 429, whatever the clock
		// (one after another, a starved test could let a second pass).
		answers := make([]response, 5)
		var wg sync.WaitGroup
		for i := range answers {
			wg.Go(func() { answers[i] = s.post("/v1/bank/payout/quote", slow, `{}`) })
		}
		wg.Wait()
		limited := 0
		for _, r := range answers {
			switch {
			case r.Status == 429 && strings.Contains(r.Body, `"code":"rate_limited"`):
				limited++
			case r.Status != 403:
				t.Errorf("got %d %s, want 429 rate_limited or 403 permission_denied", r.Status, r.Body)
			}
		}
		if limited < 3 {
			t.Errorf("%d of 5 were rate_limited, want the product check to come after the limit", limited)
		}
	})
}

func TestEnvironmentIsTheFirstFieldOfEveryAnswer(t *testing.T) {
	s := startStack(t)
	key := s.issue("acme", "--products", "bank", "--source-chains", "84532", "--rate", "1000")
	for _, c := range []struct{ method, path, key, body string }{
		{"GET", "/v1/config", key, ""},
		{"GET", "/v1/currencies", key, ""},
		{"GET", "/v1/limits", key, ""},
		{"GET", "/v1/countries", key, ""},
		{"POST", "/v1/bank/payout/quote", key, `{"cryptoCurrency":"USDC","chain":84532,"fiatCurrency":"EUR","country":"DE","cryptoAmount":"10"}`},
		{"POST", "/v1/bank/payout/quote", key, `{"cryptoCurrency":"USDC"}`},
		{"GET", "/v1/config", "", ""},
		{"GET", "/v1/nope", key, ""},
		{"GET", "/", "", ""},
	} {
		r := s.do(c.method, c.path, c.key, c.body)
		if !strings.HasPrefix(r.Body, `{"environment":"sandbox",`) {
			t.Errorf("%s %s: body does not start with the environment: %.80s", c.method, c.path, r.Body)
		}
		if r.Header.Get("X-Environment") != "" || r.Header.Get("X-Internal-Error-Code") != "" {
			t.Errorf("%s %s: internal headers reached the client: %v", c.method, c.path, r.Header)
		}
	}
}

func TestReferenceLists(t *testing.T) {
	s := startStack(t)
	key := s.issue("acme", "--products", "bank,fiat", "--source-chains", "84532", "--destination-chains", "11155111",
		"--tokens", "84532:0x036CbD53842c5426634e7929541eC2318f3dCF7e", "--rate", "1000", "--max-execution-usd", "5000")
	t.Run("config reports the key's grants", func(t *testing.T) {
		r := s.get("/v1/config", key)
		want := `{"environment":"sandbox","products":["bank","fiat"],"maxExecutionUsd":"5000",` +
			`"crypto":{"chains":{"source":[84532],"destination":[11155111]},"tokens":{"84532":["0x036CbD53842c5426634e7929541eC2318f3dCF7e"]}},` +
			`"corridors":{"bank":[{"fiatCurrency":"BRL","rails":["pix"]},{"fiatCurrency":"EUR","rails":["sepa_instant","sepa","swift"]},{"fiatCurrency":"GBP","rails":["faster_payments","swift"]},{"fiatCurrency":"MXN","rails":["spei"]},{"fiatCurrency":"USD","rails":["ach","wire","swift"]}],"card":[]},` +
			`"settlementNetwork":{"chain":84532,"name":"Base Sepolia"},"readBack":{"virtualAccounts":true}}`
		if r.Status != 200 || r.Body != want {
			t.Fatalf("got %d %s\nwant %s", r.Status, r.Body, want)
		}
	})
	t.Run("currencies lists the sandbox testnets only", func(t *testing.T) {
		r := s.get("/v1/currencies", key)
		want := `{"environment":"sandbox","chains":[` +
			`{"chain":84532,"name":"Base Sepolia","testnet":true,"tokens":[{"symbol":"USDC","address":"0x036CbD53842c5426634e7929541eC2318f3dCF7e","decimals":6,"currency":"USD"},{"symbol":"EURC","address":"0x808456652fdb597867f38412077A9182bf77359F","decimals":6,"currency":"EUR"}]},` +
			`{"chain":11155111,"name":"Ethereum Sepolia","testnet":true,"tokens":[{"symbol":"USDC","address":"0x1c7D4B196Cb0C7B01d743Fbc6116a902379C7238","decimals":6,"currency":"USD"},{"symbol":"EURC","address":"0x08210F9170F89Ab7658F0B5E3fF39b0E03C594D4","decimals":6,"currency":"EUR"}]}],` +
			`"fiatCurrencies":["BRL","EUR","GBP","MXN","USD"]}`
		if r.Status != 200 || r.Body != want {
			t.Fatalf("got %d %s\nwant %s", r.Status, r.Body, want)
		}
	})
	t.Run("limits names every rail with its settlement notation", func(t *testing.T) {
		r := s.get("/v1/limits", key)
		if r.Status != 200 {
			t.Fatalf("status %d", r.Status)
		}
		for _, want := range []string{
			`"settlementNotation":"ISO 8601 duration`,
			`"rail":"sepa_instant","currencies":["EUR"],"countries":["AD","AT",`,
			`{"rail":"faster_payments","currencies":["GBP"],"countries":["GB"],"otherCountries":false,"settlement":"PT2H","minAmount":"1","maxAmount":"1000000",` +
				`"beneficiary":{"title":"FasterPaymentsBeneficiary","type":"object","required":["name","sortCode","accountNumber"],`,
			`{"rail":"ach","currencies":["USD"],"countries":["US"],"otherCountries":false,"settlement":"P1D",`,
			`{"rail":"wire","currencies":["USD"],"countries":["US"],"otherCountries":false,"settlement":"PT4H",`,
			`{"rail":"spei","currencies":["MXN"],"countries":["MX"],"otherCountries":false,"settlement":"PT1M",`,
			`{"rail":"pix","currencies":["BRL"],"countries":["BR"],"otherCountries":false,"settlement":"PT1M",`,
			`{"rail":"swift","currencies":["USD","EUR","GBP"],"countries":[],"otherCountries":true,"settlement":"P3D",`,
		} {
			if !strings.Contains(r.Body, want) {
				t.Errorf("limits lacks %s", want)
			}
		}
	})
	t.Run("countries lists ISO countries with their rails", func(t *testing.T) {
		r := s.get("/v1/countries", key)
		for _, want := range []string{
			`{"code":"DE","name":"Germany","payoutRails":["sepa_instant","sepa","swift"]}`,
			`{"code":"US","name":"United States","payoutRails":["wire","ach","swift"]}`,
			`{"code":"JP","name":"Japan","payoutRails":["swift"]}`,
		} {
			if !strings.Contains(r.Body, want) {
				t.Errorf("countries lacks %s", want)
			}
		}
		if strings.Contains(r.Body, `"code":"UK"`) || strings.Contains(r.Body, `"code":"EU"`) {
			t.Error("countries lists a code that is not an assigned country")
		}
	})
}

func TestRequestIDAndIdentityHeaders(t *testing.T) {
	s := startStack(t)
	key := s.issue("acme", "--products", "bank", "--source-chains", "84532", "--rate", "1000")
	r := s.do("GET", "/v1/config", key, "", "X-Request-Id", "trace-abc.123")
	if got := r.Header.Get("X-Request-Id"); got != "trace-abc.123" {
		t.Errorf("a well-formed X-Request-Id is echoed: got %q", got)
	}
	r = s.do("GET", "/v1/config", key, "", "X-Request-Id", "bad id with spaces")
	if got := r.Header.Get("X-Request-Id"); got == "" || strings.Contains(got, " ") {
		t.Errorf("a malformed X-Request-Id is replaced: got %q", got)
	}
	if got := s.get("/v1/nope", "").Header.Get("X-Request-Id"); got == "" {
		t.Error("refusals carry an X-Request-Id too")
	}
	// A client cannot claim another identity or grants: the gateway strips them.
	r = s.do("GET", "/v1/config", key, "",
		"X-Partner-Key-Id", "someone-else",
		"X-Partner-Grants", `{"products":["bank","fiat","deposit"],"maxExecutionUsd":"999999999"}`,
		"X-Internal-Token", "guess")
	if r.Status != 200 || !strings.Contains(r.Body, `"products":["bank"],"maxExecutionUsd":"25000"`) {
		t.Errorf("client-sent identity headers were trusted: %s", r.Body)
	}
}

func TestServicesRefuseCallsThatSkipTheGateway(t *testing.T) {
	s := startStack(t)
	resp, err := http.Get("http://" + s.Services["payout"].Addr + "/v1/limits")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 401 {
		t.Errorf("payout without the internal token = %d, want 401", resp.StatusCode)
	}
}

func TestKeyLifecycle(t *testing.T) {
	s := startStack(t)
	old := s.issue("acme", "--products", "bank", "--source-chains", "84532", "--rate", "1000")

	if !regexp.MustCompile(`^pk_[A-Za-z0-9_-]{43}$`).MatchString(old) {
		t.Fatalf("issued key %q is not pk_ + 43 base64url characters", old)
	}
	content, _ := os.ReadFile(s.keysFile)
	if strings.Contains(string(content), old) || strings.Contains(string(content), old[3:]) {
		t.Fatal("the keys file holds the key itself")
	}
	if !regexp.MustCompile(`"fingerprint": "sha256:[0-9a-f]{64}"`).Match(content) {
		t.Fatalf("the keys file has no fingerprint:\n%s", content)
	}

	t.Run("rotate: within a second the old key is refused and the new one works", func(t *testing.T) {
		fresh := s.keys("rotate", "--id", "acme")
		s.withinASecond("the old key refused after rotation", func() bool { return s.get("/v1/config", old).Status == 401 })
		if r := s.get("/v1/config", old); r.Status != 401 || r.Body != unauthorized {
			t.Errorf("old key after rotation: %d %s", r.Status, r.Body)
		}
		if r := s.get("/v1/config", fresh); r.Status != 200 || !strings.Contains(r.Body, `"products":["bank"]`) {
			t.Errorf("new key after rotation (same grants): %d %s", r.Status, r.Body)
		}
		old = fresh
	})

	t.Run("a keys file that fails to parse keeps the last good set", func(t *testing.T) {
		good, _ := os.ReadFile(s.keysFile)
		// Replaced in one step, as the key tool does: a file truncated,
		// then written, could be read empty at one reload and broken at
		// the next (two failures).
		replace := func(data []byte) {
			t.Helper()
			tmp := s.keysFile + ".tmp"
			if err := os.WriteFile(tmp, data, 0o600); err != nil {
				t.Fatal(err)
			}
			if err := os.Rename(tmp, s.keysFile); err != nil {
				t.Fatal(err)
			}
		}
		replace([]byte(`{"keys":[{"id":`))
		s.withinASecond("the broken file counted", func() bool {
			return strings.Contains(s.metrics("gateway"), "partnerapi_gateway_keys_file_valid 0")
		})
		if r := s.get("/v1/config", old); r.Status != 200 {
			t.Errorf("after a broken reload the last good key is refused: %d", r.Status)
		}
		if m := s.metrics("gateway"); !strings.Contains(m, "partnerapi_gateway_keys_reload_failures_total 1\n") {
			t.Errorf("reload failure not counted once")
		}
		replace(good)
	})

	t.Run("list shows fingerprints, never keys", func(t *testing.T) {
		out := s.keys("list")
		if !strings.Contains(out, "acme") || !strings.Contains(out, "sha256:") || strings.Contains(out, "pk_") {
			t.Errorf("list output:\n%s", out)
		}
	})

	t.Run("revoke: the key stops working", func(t *testing.T) {
		s.keys("revoke", "--id", "acme")
		s.withinASecond("the revoked key refused", func() bool { return s.get("/v1/config", old).Status != 200 })
		r := s.get("/v1/config", old)
		if r.Status != 404 || !strings.Contains(r.Body, `"code":"not_configured"`) {
			t.Errorf("after revoking the only key: %d %s, want not_configured", r.Status, r.Body)
		}
	})

	t.Run("keys never reach a log, valid or not", func(t *testing.T) {
		unknown := "pk_" + strings.Repeat("Z", 43)
		malformed := "pk_not-a-real-key-but-secret-looking"
		s.get("/v1/config", unknown)
		s.get("/v1/config", malformed)
		last := s.do("GET", "/v1/config", "", "", "Authorization", "Basic "+old)
		// Logs cross a pipe: wait for the last request's own line first.
		if !s.logged(`"request_id":"` + last.Header.Get("X-Request-Id") + `"`) {
			t.Fatal("the last request's log line never came")
		}
		logs := s.logs.String()
		for _, secret := range []string{old, old[3:], unknown, malformed, "Bearer", "Basic"} {
			if strings.Contains(logs, secret) {
				t.Errorf("%q appears in the service logs", secret)
			}
		}
	})
}

func TestFirstRunIssuesASandboxKeyWithEveryProduct(t *testing.T) {
	s := startStack(t, withFirstRunKey())
	if !regexp.MustCompile(`^pk_[A-Za-z0-9_-]{43}$`).MatchString(s.SandboxKey) {
		t.Fatalf("first run issued %q", s.SandboxKey)
	}
	r := s.get("/v1/config", s.SandboxKey)
	if r.Status != 200 || !strings.Contains(r.Body, `"products":["bank","fiat","deposit","card"]`) {
		t.Fatalf("sandbox key config: %d %s", r.Status, r.Body)
	}
	// The partner guide's card walkthrough needs no other key.
	if o := s.post("/v1/orders", s.SandboxKey, `{"direction":"buy","cryptoCurrency":"USDC","chain":84532,"fiatCurrency":"EUR","country":"DE","fiatAmount":"100","walletAddress":"`+orderWallet+`"}`); o.Status != 200 {
		t.Errorf("a card order with the first key: %d %s", o.Status, o.Body)
	}
	// The partner guide's walkthrough quote.
	checkQuote(t, s.post("/v1/bank/payout/quote", s.SandboxKey, `{"cryptoCurrency":"USDC","chain":84532,"fiatCurrency":"EUR","country":"DE","cryptoAmount":"100"}`))
}
