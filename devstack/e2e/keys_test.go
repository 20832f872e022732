package e2e

import (
	"encoding/json"
	"net"
	"net/http"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"
)

// fromAddress is a client whose connections leave from ip, a second
// loopback address (Linux routes all of 127.0.0.0/8 to lo), so the gateway
// sees a partner calling from another address.
func fromAddress(ip string) *http.Client {
	d := &net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(ip)}, Timeout: 5 * time.Second}
	return &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{DialContext: d.DialContext}}
}

// code is the error code of an answer, or "".
func code(r response) string {
	var e struct {
		Error struct{ Code string }
	}
	_ = json.Unmarshal([]byte(r.Body), &e)
	return e.Error.Code
}

const (
	readScopeRefusal = `{"environment":"sandbox","error":{"code":"permission_denied","message":"This key's scope is read: it reads, and creates or moves nothing. Use a key with the write scope."}}`
	addressRefusal   = `{"environment":"sandbox","error":{"code":"ip_not_allowed","message":"This key may not be used from this address: it is limited to the addresses its operator listed."}}`
)

// TestNarrowedKeys: a key can be narrowed to reading, to addresses and to
// an end date (DESIGN §2), through the gateway a partner calls. Not
// parallel: see the package comment.
func TestNarrowedKeys(t *testing.T) {
	// Not parallel: a stack of its own, timed against bounds (package e2e).
	// The stack trusts one proxy, 127.0.0.3: its X-Forwarded-For names the
	// caller. Nobody else's does.
	s := startStack(t, withEnv("GATEWAY_TRUSTED_PROXIES", "127.0.0.3/32"))
	all := []string{"--products", "bank,fiat,deposit,card", "--source-chains", "84532", "--rate", "1000"}
	read := s.issue("dash", append(all, "--scope", "read")...)

	t.Run("a read key reads every list and status", func(t *testing.T) {
		for _, path := range []string{"/v1/config", "/v1/currencies", "/v1/limits", "/v1/countries", "/v1/statuses", "/v1/payment-methods", "/v1/rates",
			"/v1/events", "/v1/keys/me", "/v1/bank/payouts", "/v1/orders", "/v1/fiat/accounts", "/v1/fiat/virtual-accounts", "/v1/fiat/deposits"} {
			if r := s.get(path, read); r.Status != 200 {
				t.Errorf("GET %s: %d %s", path, r.Status, r.Body)
			}
		}
		// Records of no one: the service looked, so the gateway let it.
		for path, c := range map[string][2]string{
			"/v1/bank/payout/status":   {`{"payoutId":"bpo_0f4c2a9d8e7b6a5f4e3d2c1b0a998877"}`, "payout_not_found"},
			"/v1/orders/status":        {`{"orderId":"ord_0f4c2a9d8e7b6a5f4e3d2c1b"}`, "order_not_found"},
			"/v1/fiat/status":          {`{"accountId":"acc_5f1c0e9a8b7d6c5e4f3a2b1c","virtualAccountId":"va_0a1b2c3d4e5f60718293a4b5"}`, "account_not_found"},
			"/v1/fiat/consent/status":  {`{"consentSessionId":"cs_8a7b6c5d4e3f2a1b0c9d8e7f"}`, "consent_session_not_found"},
			"/v1/bank/payout/validate": {`{"quoteId":"bpq_84532_6a765e511412f903465e8cc44eb6eff5","beneficiary":{"iban":"DE89370400440532013000"}}`, "quote_not_found"},
		} {
			if r := s.post(path, read, c[0]); r.Status != 404 || code(r) != c[1] {
				t.Errorf("POST %s: %d %s, want 404 %s", path, r.Status, r.Body, c[1])
			}
		}
	})

	t.Run("a read key is refused on every creating route, and nothing is made", func(t *testing.T) {
		before := s.upstreamCalls()
		for path, body := range map[string]string{
			"/v1/bank/payout/quote":          `{"cryptoCurrency":"USDC","chain":84532,"fiatCurrency":"EUR","country":"DE","cryptoAmount":"100"}`,
			"/v1/bank/payout":                `{"quoteId":"bpq_84532_6a765e511412f903465e8cc44eb6eff5","beneficiary":{"name":"Ada Lovelace","iban":"DE89370400440532013000"}}`,
			"/v1/bank/payout/refund-address": `{"payoutId":"bpo_0f4c2a9d8e7b6a5f4e3d2c1b0a998877","refundAddress":"0x5aAeb6053F3E94C9b9A09f33669435E7Ef1BeAed"}`,
			"/v1/deposit/quote":              `{}`,
			"/v1/orders":                     `{}`,
			"/v1/orders/link":                `{}`,
			"/v1/fiat/accounts":              `{}`,
			"/v1/fiat/virtual-accounts":      `{}`,
			"/v1/fiat/deposits":              `{}`,
			"/v1/fiat/consent/link":          `{}`,
			"/v1/sandbox/payin":              `{}`,
			"/v1/sandbox/identity":           `{}`,
			"/v1/sandbox/orders/deposit":     `{}`,
			"/v1/sandbox/payouts/deposit":    `{}`,
			"/v1/sandbox/payouts/expire":     `{}`,
		} {
			r := s.post(path, read, body)
			if r.Status != 403 || r.Body != readScopeRefusal {
				t.Errorf("POST %s: %d %s", path, r.Status, r.Body)
			}
			if r.Header.Get("RateLimit") == "" {
				t.Errorf("POST %s: the scope is checked after the rate limit; no RateLimit header", path)
			}
		}
		if after := s.upstreamCalls(); after != before {
			t.Errorf("the refused calls reached the services: %d upstream calls, %d before them", after, before)
		}
		if m := s.metrics("gateway"); !strings.Contains(m, `partnerapi_gateway_auth_refusals_total{reason="scope"} 15`) {
			t.Error("the 15 refusals are not counted by reason scope")
		}
	})

	// Issued, then awaited from its own address (s.issue asks from 127.0.0.1).
	pinned := s.keys(append([]string{"issue", "--id", "pinned"}, append(all, "--allowed-ips", "127.0.0.2/32,2001:db8::/32")...)...)
	s.waitFor(func() bool {
		return s.doWith(fromAddress("127.0.0.2"), "GET", "/v1/currencies", pinned, "").Status == 200
	})
	t.Run("an address-pinned key answers from its address and not from another", func(t *testing.T) {
		from2 := fromAddress("127.0.0.2")
		if r := s.doWith(from2, "GET", "/v1/bank/payouts", pinned, ""); r.Status != 200 {
			t.Errorf("from 127.0.0.2: %d %s", r.Status, r.Body)
		}
		r := s.get("/v1/bank/payouts", pinned) // from 127.0.0.1
		if r.Status != 403 || r.Body != addressRefusal {
			t.Errorf("from 127.0.0.1: %d %s", r.Status, r.Body)
		}
		if r.Header.Get("RateLimit") != "" {
			t.Error("the address is checked with the key, before the rate limit; the refusal carries RateLimit")
		}
		// The quote is refused from elsewhere, before anything is made.
		if r := s.post("/v1/bank/payout/quote", pinned, `{"cryptoCurrency":"USDC","chain":84532,"fiatCurrency":"EUR","country":"DE","cryptoAmount":"100"}`); r.Status != 403 || code(r) != "ip_not_allowed" {
			t.Errorf("a quote from 127.0.0.1: %d %s", r.Status, r.Body)
		}
	})

	t.Run("a forged X-Forwarded-For changes nothing; a trusted proxy's does", func(t *testing.T) {
		for _, xff := range []string{"127.0.0.2", "127.0.0.2, 127.0.0.3", "2001:db8::1"} {
			if r := s.do("GET", "/v1/bank/payouts", pinned, "", "X-Forwarded-For", xff); r.Status != 403 || code(r) != "ip_not_allowed" {
				t.Errorf("from 127.0.0.1 claiming %q: %d %s", xff, r.Status, r.Body)
			}
		}
		proxy := fromAddress("127.0.0.3")
		if r := s.doWith(proxy, "GET", "/v1/bank/payouts", pinned, "", "X-Forwarded-For", "127.0.0.2"); r.Status != 200 {
			t.Errorf("through the trusted proxy for 127.0.0.2: %d %s", r.Status, r.Body)
		}
		// Left of what the proxy added, the client's own claim decides nothing.
		if r := s.doWith(proxy, "GET", "/v1/bank/payouts", pinned, "", "X-Forwarded-For", "127.0.0.2, 127.0.0.1"); r.Status != 403 || code(r) != "ip_not_allowed" {
			t.Errorf("through the trusted proxy for 127.0.0.1 claiming 127.0.0.2: %d %s", r.Status, r.Body)
		}
	})

	t.Run("keys narrow takes effect on a running gateway within a second", func(t *testing.T) {
		late := s.issue("late", all...)
		quote := `{"cryptoCurrency":"USDC","chain":84532,"fiatCurrency":"EUR","country":"DE","cryptoAmount":"100"}`
		if r := s.post("/v1/bank/payout/quote", late, quote); r.Status != 200 {
			t.Fatalf("a write key quoting: %d %s", r.Status, r.Body)
		}
		if out := s.keys("narrow", "--id", "late", "--scope", "read"); out != "" {
			t.Errorf("narrow printed %q; it makes no key", out)
		}
		s.withinASecond("the narrowed key refused a quote", func() bool { return s.post("/v1/bank/payout/quote", late, quote).Status == 403 })
		if r := s.post("/v1/bank/payout/quote", late, quote); r.Body != readScopeRefusal {
			t.Errorf("after narrowing: %d %s", r.Status, r.Body)
		}
		if r := s.get("/v1/bank/payouts", late); r.Status != 200 || !strings.Contains(r.Body, `"data":[]`) {
			t.Errorf("the narrowed key reads: %d %s", r.Status, r.Body)
		}
	})

	t.Run("an expired key is refused like an unknown one", func(t *testing.T) {
		soon := s.issue("soon", append(all, "--expires-at", time.Now().Add(3*24*time.Hour).UTC().Format(time.RFC3339))...)
		if r := s.get("/v1/config", soon); r.Status != 200 {
			t.Fatalf("before its end: %d %s", r.Status, r.Body)
		}
		s.withinASecond("the key counted as expiring within 14 days", func() bool {
			return strings.Contains(s.metrics("gateway"), "partnerapi_gateway_keys_expiring_soon 1\n")
		})
		// Its end comes: the file says it has passed (the key tool refuses
		// a past end, so the test writes it, as time would).
		setExpiry(t, s.keysFile, "soon", time.Now().Add(-time.Second))
		s.withinASecond("the expired key refused", func() bool { return s.get("/v1/config", soon).Status == 401 })
		unknown := s.get("/v1/config", "pk_"+strings.Repeat("Q", 43))
		if r := s.get("/v1/config", soon); r.Status != 401 || r.Body != unknown.Body || r.Body != unauthorized {
			t.Errorf("expired: %d %s; an unknown key: %s", r.Status, r.Body, unknown.Body)
		}
		m := s.metrics("gateway")
		for _, want := range []string{"partnerapi_gateway_keys_expired 1\n", "partnerapi_gateway_keys_expiring_soon 0\n", `partnerapi_gateway_auth_refusals_total{reason="expired"}`} {
			if !strings.Contains(m, want) {
				t.Errorf("metrics lack %q", want)
			}
		}
		if out := s.keys("list"); !strings.Contains(out, "(EXPIRED: refused)") {
			t.Errorf("keys list does not mark the expired key:\n%s", out)
		}
	})

	t.Run("/v1/keys/me answers for each kind of key", func(t *testing.T) {
		plain := s.issue("plain", "--products", "bank", "--source-chains", "84532", "--tokens", "84532:0x036CbD53842c5426634e7929541eC2318f3dCF7e", "--rate", "7")
		end := time.Now().Add(30 * 24 * time.Hour).UTC().Truncate(time.Second)
		s.keys("narrow", "--id", "dash", "--expires-at", end.Format(time.RFC3339))
		s.withinASecond("the new end applied", func() bool { return strings.Contains(s.get("/v1/keys/me", read).Body, end.Format(time.RFC3339)) })
		const tokens = `"tokens":{"84532":["0x036CbD53842c5426634e7929541eC2318f3dCF7e"]}`
		// A key issued without --tokens may name every catalogue token of its chains.
		const catalogue = `"tokens":{"84532":["0x036CbD53842c5426634e7929541eC2318f3dCF7e","0x808456652fdb597867f38412077A9182bf77359F"]}`
		for _, c := range []struct {
			name string
			via  *http.Client
			key  string
			want string
		}{
			{"write, unnarrowed", client, plain, `{"environment":"sandbox","keyId":"plain","scope":"write","products":["bank"],"chains":{"source":[84532],"destination":[84532]},` + tokens + `,"ratePerSecond":7,"maxExecutionUsd":"25000","allowedIps":[],"expiresAt":null}`},
			{"read, expiring", client, read, `{"environment":"sandbox","keyId":"dash","scope":"read","products":["bank","fiat","deposit","card"],"chains":{"source":[84532],"destination":[84532]},` + catalogue + `,"ratePerSecond":1000,"maxExecutionUsd":"25000","allowedIps":[],"expiresAt":"` + end.Format(time.RFC3339) + `"}`},
			{"pinned, from its address", fromAddress("127.0.0.2"), pinned, `{"environment":"sandbox","keyId":"pinned","scope":"write","products":["bank","fiat","deposit","card"],"chains":{"source":[84532],"destination":[84532]},` + catalogue + `,"ratePerSecond":1000,"maxExecutionUsd":"25000","allowedIps":["127.0.0.2/32","2001:db8::/32"],"expiresAt":null}`},
		} {
			r := s.doWith(c.via, "GET", "/v1/keys/me", c.key, "")
			if r.Status != 200 || r.Body != c.want {
				t.Errorf("%s:\n got %d %s\nwant %s", c.name, r.Status, r.Body, c.want)
			}
		}
		if r := s.get("/v1/keys/me", pinned); r.Status != 403 || code(r) != "ip_not_allowed" {
			t.Errorf("the pinned key from elsewhere: %d %s", r.Status, r.Body)
		}
	})
}

// setExpiry writes key id's expiresAt into the keys file, in one step as
// the key tool does.
func setExpiry(t *testing.T, path, id string, at time.Time) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var f struct {
		Keys []map[string]any `json:"keys"`
	}
	if err := json.Unmarshal(b, &f); err != nil {
		t.Fatal(err)
	}
	for _, k := range f.Keys {
		if k["id"] == id {
			k["expiresAt"] = at.UTC().Format(time.RFC3339Nano)
		}
	}
	if b, err = json.Marshal(f); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path+".tmp", b, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(path+".tmp", path); err != nil {
		t.Fatal(err)
	}
}

// upstreamCalls is how many calls the gateway has made to the services
// (the health probes of open circuits aside: none are open here).
func (s *stack) upstreamCalls() int {
	s.t.Helper()
	n := 0
	for _, line := range strings.Split(s.metrics("gateway"), "\n") {
		if strings.HasPrefix(line, "partnerapi_gateway_upstream_request_duration_seconds_count{") {
			v, err := strconv.Atoi(line[strings.LastIndexByte(line, ' ')+1:])
			if err != nil {
				s.t.Fatalf("metric line %q", line)
			}
			n += v
		}
	}
	return n
}
