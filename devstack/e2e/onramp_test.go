package e2e

import (
	"encoding/json"
	"io"
	"net/http"
	"net/url"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/partnerpay/api/pkg/iban"
)

const wallet = "0x5aAeb6053F3E94C9b9A09f33669435E7Ef1BeAed" // a valid EIP-55 checksum

func onboardBody(email string) string {
	return `{"email":"` + email + `","fullName":"Ada Lovelace","country":"de","walletAddress":"` + wallet + `","chain":84532}`
}

// decode parses a 200 answer into a map, failing on anything else.
func decodeOK(t testing.TB, r response) map[string]any {
	t.Helper()
	if r.Status != 200 {
		t.Fatalf("status %d: %s", r.Status, r.Body)
	}
	var m map[string]any
	if err := json.Unmarshal([]byte(r.Body), &m); err != nil {
		t.Fatalf("%v: %s", err, r.Body)
	}
	return m
}

// noRedirects is a browser that stops at each redirect, so the test sees it.
var noRedirects = &http.Client{Timeout: 10 * time.Second, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}

// consentViaForm plays the user on the hosted page: opens the link, submits
// the decision, and follows the bank's redirect back through the gateway.
// It returns the gateway's answer to the return address.
func (s *stack) consentViaForm(link, decision string) *http.Response {
	s.t.Helper()
	return s.consentEdited(link, decision, func(back string) string { return back })
}

// consentEdited is consentViaForm with the bank's redirect back to the
// gateway passed through edit first: what a user can do in the address bar.
func (s *stack) consentEdited(link, decision string, edit func(string) string) *http.Response {
	s.t.Helper()
	page, err := noRedirects.Get(link)
	if err != nil {
		s.t.Fatal(err)
	}
	body, _ := io.ReadAll(page.Body)
	page.Body.Close()
	if page.StatusCode != 200 || !strings.Contains(string(body), `value="accept"`) || !strings.Contains(string(body), `value="decline"`) {
		s.t.Fatalf("hosted page: %d %s", page.StatusCode, body)
	}
	resp, err := noRedirects.PostForm(link, url.Values{"decision": {decision}})
	if err != nil {
		s.t.Fatal(err)
	}
	resp.Body.Close()
	back := resp.Header.Get("Location")
	if resp.StatusCode != http.StatusSeeOther || !strings.HasPrefix(back, s.GatewayURL+"/consent/return?") {
		s.t.Fatalf("after %s the bank answered %d, Location %q", decision, resp.StatusCode, back)
	}
	ret, err := noRedirects.Get(edit(back))
	if err != nil {
		s.t.Fatal(err)
	}
	return ret
}

// The whole on-ramp, from onboarding to funded.
func TestOnRampFromNothingToFunded(t *testing.T) {
	onRampFromNothingToFunded(t, startStack(t))
}

func onRampFromNothingToFunded(t *testing.T, s *stack) {
	key := s.issue("acme", "--products", "fiat", "--destination-chains", "84532", "--rate", "1000")

	acc := decodeOK(t, s.post("/v1/fiat/accounts", key, onboardBody("ada@example.com")))
	accountID, _ := acc["accountId"].(string)
	sessionID, _ := acc["consentSessionId"].(string)
	if acc["status"] != "consent_required" || !strings.HasPrefix(accountID, "acc_") || !strings.HasPrefix(sessionID, "cs_") {
		t.Fatalf("onboarding: %v", acc)
	}
	if got := fieldOrder(t, s.post("/v1/fiat/accounts", key, onboardBody("grace@example.com")).Body); !slices.Equal(got, []string{"environment", "accountId", "status", "consentSessionId", "createdAt"}) {
		t.Errorf("account fields %v", got)
	}

	va := decodeOK(t, s.post("/v1/fiat/virtual-accounts", key, `{"accountId":"`+accountID+`","currency":"EUR"}`))
	if va["status"] != "consent_required" || va["consentSessionId"] != sessionID || len(va) != 3 {
		t.Fatalf("a virtual account before consent: %v", va)
	}
	consentStatus := func() string {
		return decodeOK(t, s.post("/v1/fiat/consent/status", key, `{"consentSessionId":"`+sessionID+`"}`))["state"].(string)
	}
	if st := consentStatus(); st != "pending" {
		t.Fatalf("consent before the page: %s", st)
	}

	l := s.post("/v1/fiat/consent/link", key, `{"consentSessionId":"`+sessionID+`"}`)
	link := decodeOK(t, l)["link"].(string)
	if !strings.HasPrefix(link, "http://"+s.Services["sandboxbank"].Addr+"/consent/ts_") || !slices.Equal(fieldOrder(t, l.Body), []string{"environment", "link"}) {
		t.Fatalf("link answer %s", l.Body)
	}
	ret := s.consentViaForm(link, "accept")
	page, _ := io.ReadAll(ret.Body)
	ret.Body.Close()
	if ret.StatusCode != 200 || !strings.Contains(string(page), "You can close this page") {
		t.Fatalf("back at the gateway: %d %s", ret.StatusCode, page)
	}
	if st := consentStatus(); st != "returned" {
		t.Fatalf("consent after the page: %s", st)
	}

	va = decodeOK(t, s.post("/v1/fiat/virtual-accounts", key, `{"accountId":"`+accountID+`","currency":"eur"}`))
	vaID, _ := va["virtualAccountId"].(string)
	details, _ := va["bankDetails"].(map[string]any)
	if va["status"] != "active" || !strings.HasPrefix(vaID, "va_") || va["accountId"] != accountID || va["currency"] != "EUR" || details == nil {
		t.Fatalf("virtual account: %v", va)
	}
	if _, err := iban.Validate(details["iban"].(string)); err != nil || details["bic"] == "" || details["beneficiary"] != "Ada Lovelace" {
		t.Errorf("bank details %v: %v", details, err)
	}
	again := decodeOK(t, s.post("/v1/fiat/virtual-accounts", key, `{"accountId":"`+accountID+`","currency":"EUR"}`))
	if again["virtualAccountId"] != vaID || again["bankDetails"].(map[string]any)["iban"] != details["iban"] {
		t.Errorf("read back: %v, want %v", again, va)
	}

	statusBody := `{"accountId":"` + accountID + `","virtualAccountId":"` + vaID + `"}`
	if r := s.post("/v1/fiat/status", key, statusBody); r.Body != `{"environment":"sandbox","virtualAccountId":"`+vaID+`","status":"awaiting_deposit","transactions":[]}` {
		t.Fatalf("before the pay-in: %s", r.Body)
	}

	payin := decodeOK(t, s.post("/v1/sandbox/payin", key, `{"virtualAccountId":"`+vaID+`","amount":"100.5","currency":"EUR"}`))
	if payin["status"] != "received" || payin["amount"] != "100.50" || payin["currency"] != "EUR" || payin["virtualAccountId"] != vaID {
		t.Fatalf("pay-in: %v", payin)
	}

	var funded response
	eventually(10*time.Second, func() bool {
		funded = s.post("/v1/fiat/status", key, statusBody)
		// Before the service's worker has read the pay-in, none is listed;
		// then it is, received, until it settles.
		if !strings.Contains(funded.Body, `"status":"funded"`) && !strings.Contains(funded.Body, `"status":"awaiting_deposit","transactions":[`) {
			t.Fatalf("while settling: %s", funded.Body)
		}
		return strings.Contains(funded.Body, `"status":"funded"`)
	})
	if got := fieldOrder(t, funded.Body); !slices.Equal(got, []string{"environment", "virtualAccountId", "status", "transactions", "deliveredAmount", "depositedAmount", "txHash"}) {
		t.Fatalf("funded fields %v: %s", got, funded.Body)
	}
	f := decodeOK(t, funded)
	if f["depositedAmount"] != "100.50" || f["deliveredAmount"] != "100.50" || !regexp.MustCompile(`^0x[0-9a-f]{64}$`).MatchString(f["txHash"].(string)) {
		t.Errorf("funded: %s", funded.Body)
	}
	if txs := f["transactions"].([]any); len(txs) != 1 {
		t.Errorf("transactions %v", txs)
	}
	for _, secret := range []string{"ada@example.com", "Ada Lovelace", wallet, details["iban"].(string)} {
		if strings.Contains(s.logs.String(), secret) {
			t.Errorf("personal data in the logs: %s", secret)
		}
	}
}

func TestConsentReturnGoesBackToThePartner(t *testing.T) {
	s := startStack(t)
	key := s.issue("acme", "--products", "fiat", "--destination-chains", "84532", "--rate", "1000")
	acc := decodeOK(t, s.post("/v1/fiat/accounts", key, onboardBody("ada@example.com")))
	sid := acc["consentSessionId"].(string)
	link := decodeOK(t, s.post("/v1/fiat/consent/link", key, `{"consentSessionId":"`+sid+`","returnUrl":"https://partner.example/onboarding/done?user=7"}`))["link"].(string)

	ret := s.consentViaForm(link, "decline")
	ret.Body.Close()
	if ret.StatusCode != http.StatusSeeOther || ret.Header.Get("Location") != "https://partner.example/onboarding/done?consentSessionId="+sid+"&result=declined&user=7" {
		t.Fatalf("return: %d %q", ret.StatusCode, ret.Header.Get("Location"))
	}
	// Declined: the bank still needs consent, so a new session is offered.
	va := decodeOK(t, s.post("/v1/fiat/virtual-accounts", key, `{"accountId":"`+acc["accountId"].(string)+`","currency":"EUR"}`))
	if va["status"] != "consent_required" || va["consentSessionId"] == sid {
		t.Errorf("after a decline: %v", va)
	}

	t.Run("editing the redirect cannot turn a decline into an acceptance", func(t *testing.T) {
		acc := decodeOK(t, s.post("/v1/fiat/accounts", key, onboardBody("eve@example.com")))
		sid := acc["consentSessionId"].(string)
		link := decodeOK(t, s.post("/v1/fiat/consent/link", key, `{"consentSessionId":"`+sid+`","returnUrl":"https://partner.example/done"}`))["link"].(string)
		ret := s.consentEdited(link, "decline", func(back string) string {
			if !strings.Contains(back, "result=declined") {
				t.Fatalf("the bank's redirect %s carries no result to edit", back)
			}
			return strings.Replace(back, "result=declined", "result=accepted", 1)
		})
		ret.Body.Close()
		if ret.StatusCode != http.StatusSeeOther || ret.Header.Get("Location") != "https://partner.example/done?consentSessionId="+sid+"&result=declined" {
			t.Fatalf("the partner is told %d %q; want the bank's word: declined", ret.StatusCode, ret.Header.Get("Location"))
		}
		va := decodeOK(t, s.post("/v1/fiat/virtual-accounts", key, `{"accountId":"`+acc["accountId"].(string)+`","currency":"EUR"}`))
		if va["status"] != "consent_required" {
			t.Fatalf("after an edited decline the bank gave a virtual account: %v", va)
		}
	})
	t.Run("returnUrl must be https (http only to loopback in sandbox)", func(t *testing.T) {
		want := errorBody("invalid_request", "returnUrl must be an https URL of at most 2048 characters, without user info (plain http only to a loopback host, in sandbox).")
		for _, u := range []string{"http://partner.example/done", "https://user:pw@partner.example/", "javascript:alert(1)", "https://partner.example/" + strings.Repeat("a", 2048)} {
			r := s.post("/v1/fiat/consent/link", key, `{"consentSessionId":"`+sid+`","returnUrl":"`+u+`"}`)
			if r.Status != 400 || r.Body != want {
				t.Errorf("returnUrl %.50s: %d %s", u, r.Status, r.Body)
			}
		}
		if r := s.post("/v1/fiat/consent/link", key, `{"consentSessionId":"`+sid+`","returnUrl":"http://127.0.0.1:3000/done"}`); r.Status != 200 {
			t.Errorf("a loopback http returnUrl in sandbox: %d %s", r.Status, r.Body)
		}
	})
	t.Run("a fresh link kills the earlier one", func(t *testing.T) {
		acc := decodeOK(t, s.post("/v1/fiat/accounts", key, onboardBody("mallory@example.com")))
		sid := acc["consentSessionId"].(string)
		first := decodeOK(t, s.post("/v1/fiat/consent/link", key, `{"consentSessionId":"`+sid+`"}`))["link"].(string)
		decodeOK(t, s.post("/v1/fiat/consent/link", key, `{"consentSessionId":"`+sid+`"}`))
		resp, err := noRedirects.Get(first)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 410 || !strings.Contains(string(b), "newer link") {
			t.Errorf("the earlier link: %d %s", resp.StatusCode, b)
		}
	})
	t.Run("a used link is refused", func(t *testing.T) {
		resp, err := noRedirects.PostForm(link, url.Values{"decision": {"accept"}})
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 410 || !strings.Contains(string(b), "already used") {
			t.Errorf("%d %s", resp.StatusCode, b)
		}
	})
	t.Run("a forged return state is refused", func(t *testing.T) {
		resp, err := noRedirects.Get(s.GatewayURL + "/consent/return?state=forged.state&result=accepted")
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 400 || !strings.Contains(string(b), "not valid") {
			t.Errorf("%d %s", resp.StatusCode, b)
		}
	})
}

func TestConsentLinksDieAfterTheirLife(t *testing.T) {
	s := startStack(t, withEnv("SANDBOXBANK_LINK_TTL", "1s"))
	key := s.issue("acme", "--products", "fiat", "--destination-chains", "84532", "--rate", "1000")
	sid := decodeOK(t, s.post("/v1/fiat/accounts", key, onboardBody("ada@example.com")))["consentSessionId"].(string)
	first := decodeOK(t, s.post("/v1/fiat/consent/link", key, `{"consentSessionId":"`+sid+`"}`))["link"].(string)
	second := decodeOK(t, s.post("/v1/fiat/consent/link", key, `{"consentSessionId":"`+sid+`"}`))["link"].(string)
	if first == second {
		t.Fatal("each call must mint a fresh link")
	}
	time.Sleep(1100 * time.Millisecond)
	for link, want := range map[string]string{second: "expired", first: "newer link"} {
		resp, err := noRedirects.Get(link)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 410 || !strings.Contains(string(b), want) {
			t.Errorf("%s: %d %s, want 410 %q", link, resp.StatusCode, b, want)
		}
	}
}
