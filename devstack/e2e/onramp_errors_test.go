package e2e

import (
	"context"
	"strings"
	"testing"
	"time"
)

// activeAccount onboards a user and accepts the terms: the account is active.
func (s *stack) activeAccount(key, email string) (accountID, virtualAccountID string) {
	s.t.Helper()
	acc := decodeOK(s.t, s.post("/v1/fiat/accounts", key, onboardBody(email)))
	link := decodeOK(s.t, s.post("/v1/fiat/consent/link", key, `{"consentSessionId":"`+acc["consentSessionId"].(string)+`"}`))["link"].(string)
	s.consentViaForm(link, "accept").Body.Close()
	accountID = acc["accountId"].(string)
	va := decodeOK(s.t, s.post("/v1/fiat/virtual-accounts", key, `{"accountId":"`+accountID+`","currency":"EUR"}`))
	return accountID, va["virtualAccountId"].(string)
}

func TestOnRampRefusals(t *testing.T) {
	s := startStack(t)
	key := s.issue("acme", "--products", "fiat", "--destination-chains", "84532", "--rate", "1000")
	other := s.issue("globex", "--products", "fiat", "--destination-chains", "84532", "--rate", "1000")
	noDest := s.issue("nodest", "--products", "fiat", "--rate", "1000")
	bankOnly := s.issue("bankonly", "--products", "bank", "--source-chains", "84532", "--rate", "1000")
	accountID, vaID := s.activeAccount(key, "ada@example.com")
	foreignAcc, foreignVA := s.activeAccount(other, "grace@example.com")
	foreignSession := decodeOK(t, s.post("/v1/fiat/accounts", other, onboardBody("linus@example.com")))["consentSessionId"].(string)

	accountNotFound := errorBody("account_not_found", "No account with this accountId exists for this key.")
	vaNotFound := errorBody("virtual_account_not_found", "No virtual account with this virtualAccountId exists for this key.")
	sessionNotFound := errorBody("consent_session_not_found", "No consent session with this consentSessionId exists for this key.")
	noSession := errorBody("invalid_request", "consentSessionId is required: the id from a consent_required answer.")
	tests := []struct {
		name, key, path, body string
		status                int
		want                  string
	}{
		{"consent link without a session id", key, "/v1/fiat/consent/link", `{}`, 400, noSession},
		{"consent link with an empty session id", key, "/v1/fiat/consent/link", `{"consentSessionId":""}`, 400, noSession},
		{"consent status without a session id", key, "/v1/fiat/consent/status", `{}`, 400, noSession},
		{"consent status with an empty session id", key, "/v1/fiat/consent/status", `{"consentSessionId":""}`, 400, noSession},
		{"consent status of an unknown session", key, "/v1/fiat/consent/status", `{"consentSessionId":"cs_nope"}`, 404, sessionNotFound},
		{"consent status of another key's session", key, "/v1/fiat/consent/status", `{"consentSessionId":"` + foreignSession + `"}`, 404, sessionNotFound},
		{"consent link of another key's session", key, "/v1/fiat/consent/link", `{"consentSessionId":"` + foreignSession + `"}`, 404, sessionNotFound},
		{"virtual account of an unknown account", key, "/v1/fiat/virtual-accounts", `{"accountId":"acc_nope","currency":"EUR"}`, 404, accountNotFound},
		{"virtual account of another key's account", key, "/v1/fiat/virtual-accounts", `{"accountId":"` + foreignAcc + `","currency":"EUR"}`, 404, accountNotFound},
		{"status of an unknown virtual account", key, "/v1/fiat/status", `{"virtualAccountId":"va_nope"}`, 404, vaNotFound},
		{"status of another key's virtual account", key, "/v1/fiat/status", `{"virtualAccountId":"` + foreignVA + `"}`, 404, vaNotFound},
		{"status names another key's account first", key, "/v1/fiat/status", `{"accountId":"` + foreignAcc + `","virtualAccountId":"` + vaID + `"}`, 404, accountNotFound},
		{"status names an unknown account first", key, "/v1/fiat/status", `{"accountId":"acc_000000000000000000000000","virtualAccountId":"` + vaID + `"}`, 404, accountNotFound},
		{"status without a virtual account id", key, "/v1/fiat/status", `{"accountId":"` + accountID + `"}`, 400, errorBody("invalid_request", "virtualAccountId or depositId is required.")},
		{"pay-in to another key's virtual account", key, "/v1/sandbox/payin", `{"virtualAccountId":"` + foreignVA + `","amount":"1","currency":"EUR"}`, 404, vaNotFound},
		{"identity of another key's account", key, "/v1/sandbox/identity", `{"accountId":"` + foreignAcc + `","result":"approved"}`, 404, accountNotFound},
		{"a USD pay-in in sandbox", key, "/v1/sandbox/payin", `{"virtualAccountId":"` + vaID + `","amount":"10","currency":"USD"}`, 400,
			`{"environment":"sandbox","error":{"code":"invalid_request","message":"The bank refused the request; see error.fields.","fields":{"currency":"unsupported_currency"}}}`},
		{"a USD virtual account in sandbox", key, "/v1/fiat/virtual-accounts", `{"accountId":"` + accountID + `","currency":"USD"}`, 400,
			`{"environment":"sandbox","error":{"code":"invalid_request","message":"The bank refused the request; see error.fields.","fields":{"currency":"unsupported_currency"}}}`},
		{"a pay-in amount as a number", key, "/v1/sandbox/payin", `{"virtualAccountId":"` + vaID + `","amount":10,"currency":"EUR"}`, 400, errorBody("invalid_request", `Field "amount" must be a string.`)},
		{"a pay-in of zero", key, "/v1/sandbox/payin", `{"virtualAccountId":"` + vaID + `","amount":"0","currency":"EUR"}`, 400,
			errorBody("invalid_request", `amount must be a decimal string in major units greater than zero, such as "100.50".`)},
		{"an identity result that is not one", key, "/v1/sandbox/identity", `{"accountId":"` + accountID + `","result":"maybe"}`, 400,
			errorBody("invalid_request", `result must be "approved" or "rejected".`)},
		{"the bank refuses fields: values never come back", key, "/v1/fiat/accounts",
			`{"email":"ada@localhost","fullName":"Ada Lovelace","country":"KP","walletAddress":"` + wallet + `","chain":84532}`, 400,
			`{"environment":"sandbox","error":{"code":"invalid_request","message":"The bank refused the request; see error.fields.","fields":{"country":"unsupported_country","email":"invalid_format"}}}`},
		{"a wallet with a broken EIP-55 checksum", key, "/v1/fiat/accounts", strings.Replace(onboardBody("ada@example.com"), "5aAeb", "5AAeb", 1), 400,
			errorBody("invalid_request", "walletAddress must be 0x followed by 40 hex digits, with a valid EIP-55 checksum if it is mixed-case.")},
		{"a chain that is not the settlement network", key, "/v1/fiat/accounts", strings.Replace(onboardBody("ada@example.com"), "84532", "11155111", 1), 400,
			errorBody("invalid_request", "The on-ramp delivers on chain 84532 (Base Sepolia); see settlementNetwork in GET /v1/config.")},
		{"a key not enabled for the destination chain", noDest, "/v1/fiat/accounts", onboardBody("ada@example.com"), 403,
			errorBody("chain_not_allowed", "This key is not enabled for chain 84532 as a destination.")},
		{"a key without the fiat product", bankOnly, "/v1/fiat/accounts", onboardBody("ada@example.com"), 403,
			errorBody("permission_denied", "This key does not carry the fiat product.")},
		{"an unknown field", key, "/v1/fiat/accounts", strings.Replace(onboardBody("ada@example.com"), `"chain"`, `"phone":"1","chain"`, 1), 400,
			errorBody("invalid_request", `Unknown field "phone".`)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := s.post(tt.path, tt.key, tt.body)
			if r.Status != tt.status || r.Body != tt.want {
				t.Fatalf("got %d %s\nwant %d %s", r.Status, r.Body, tt.status, tt.want)
			}
		})
	}
	if strings.Contains(s.logs.String(), "ada@localhost") {
		t.Error("a value the bank echoed reached a log")
	}

	t.Run("a rejected identity cannot get a virtual account", func(t *testing.T) {
		acc := decodeOK(t, s.post("/v1/fiat/accounts", key, onboardBody("eve@example.com")))
		id := acc["accountId"].(string)
		if r := s.post("/v1/sandbox/identity", key, `{"accountId":"`+id+`","result":"rejected"}`); r.Body != `{"environment":"sandbox","accountId":"`+id+`","status":"consent_required","consentSessionId":"`+acc["consentSessionId"].(string)+`","createdAt":"`+acc["createdAt"].(string)+`"}` {
			t.Fatalf("forcing before consent: %s", r.Body)
		}
		link := decodeOK(t, s.post("/v1/fiat/consent/link", key, `{"consentSessionId":"`+acc["consentSessionId"].(string)+`"}`))["link"].(string)
		s.consentViaForm(link, "accept").Body.Close()
		r := s.post("/v1/fiat/virtual-accounts", key, `{"accountId":"`+id+`","currency":"EUR"}`)
		if r.Status != 409 || r.Body != errorBody("account_not_active", "The account was rejected by the bank's identity check; it cannot receive a virtual account.") {
			t.Fatalf("got %d %s", r.Status, r.Body)
		}
		if r := s.post("/v1/sandbox/identity", key, `{"accountId":"`+id+`","result":"approved"}`); r.Body != `{"environment":"sandbox","accountId":"`+id+`","status":"active","createdAt":"`+acc["createdAt"].(string)+`"}` {
			t.Fatalf("approving: %s", r.Body)
		}
	})

	t.Run("the bank down is a 500 with no detail on the wire", func(t *testing.T) {
		bank := s.Services["sandboxbank"]
		bank.Stop()
		r := s.post("/v1/fiat/accounts", key, onboardBody("ada@example.com"))
		if r.Status != 500 || r.Body != errorBody("internal", "Internal error; it has been logged.") {
			t.Fatalf("got %d %s", r.Status, r.Body)
		}
		if !s.logged(`"msg":"internal error","service":"fiat","err":"bank provider: POST /v1/customers: Post`) {
			t.Error("the fiat service did not log the provider failure")
		}
		if err := bank.Start(); err != nil {
			t.Fatal(err)
		}
		if err := bank.WaitHealthy(context.Background(), 10*time.Second); err != nil {
			t.Fatal(err)
		}
	})

	t.Run("after the bank lost its state it says so", func(t *testing.T) {
		r := s.post("/v1/fiat/virtual-accounts", key, `{"accountId":"`+accountID+`","currency":"EUR"}`)
		want := errorBody("sandbox_reset", "The sandbox bank was restarted and has lost this record (it keeps its state in memory); create it again.")
		if r.Status != 409 || r.Body != want {
			t.Fatalf("got %d %s", r.Status, r.Body)
		}
	})
}

func TestOnRampRecordsSurviveServiceRestarts(t *testing.T) {
	s := startStack(t)
	key := s.issue("acme", "--products", "fiat", "--destination-chains", "84532", "--rate", "1000")
	acc := decodeOK(t, s.post("/v1/fiat/accounts", key, onboardBody("ada@example.com")))
	for _, name := range []string{"fiat", "consent"} {
		p := s.Services[name]
		p.Stop()
		if err := p.Start(); err != nil {
			t.Fatal(err)
		}
		if err := p.WaitHealthy(context.Background(), 10*time.Second); err != nil {
			t.Fatal(err)
		}
	}
	link := decodeOK(t, s.post("/v1/fiat/consent/link", key, `{"consentSessionId":"`+acc["consentSessionId"].(string)+`"}`))["link"].(string)
	s.consentViaForm(link, "accept").Body.Close()
	va := decodeOK(t, s.post("/v1/fiat/virtual-accounts", key, `{"accountId":"`+acc["accountId"].(string)+`","currency":"EUR"}`))
	if va["status"] != "active" {
		t.Fatalf("after restarts: %v", va)
	}
}

func TestIdempotencyOfOnRampWrites(t *testing.T) {
	s := startStack(t)
	key := s.issue("acme", "--products", "fiat", "--destination-chains", "84532", "--rate", "1000")
	accountID, vaID := s.activeAccount(key, "ada@example.com")
	reused := errorBody("idempotency_key_reused", "This Idempotency-Key was used for a different request in the last 24 hours; use a new key for a new request.")
	inFlight := errorBody("idempotency_in_progress", "A request with this Idempotency-Key is still in progress; retry shortly.")
	for _, c := range []struct{ name, path, body, other string }{
		{"accounts", "/v1/fiat/accounts", onboardBody("grace@example.com"), onboardBody("linus@example.com")},
		{"virtual accounts", "/v1/fiat/virtual-accounts", `{"accountId":"` + accountID + `","currency":"EUR"}`, `{"accountId":"` + accountID + `","currency":"eur"}`},
		{"sandbox pay-ins", "/v1/sandbox/payin", `{"virtualAccountId":"` + vaID + `","amount":"5","currency":"EUR"}`, `{"virtualAccountId":"` + vaID + `","amount":"6","currency":"EUR"}`},
	} {
		t.Run(c.name, func(t *testing.T) {
			ik := "idem-" + strings.ReplaceAll(c.name, " ", "-")
			first := s.do("POST", c.path, key, c.body, "Idempotency-Key", ik)
			again := s.do("POST", c.path, key, c.body, "Idempotency-Key", ik)
			if first.Status != 200 || again.Status != 200 || again.Body != first.Body || again.Header.Get("Idempotent-Replayed") != "true" {
				t.Fatalf("replay: %d %s / %d %s", first.Status, first.Body, again.Status, again.Body)
			}
			if r := s.do("POST", c.path, key, c.other, "Idempotency-Key", ik); r.Status != 422 || r.Body != reused {
				t.Errorf("another body: %d %s", r.Status, r.Body)
			}
			s.seedInFlight("acme", ik+"-running", c.path, c.body)
			if r := s.do("POST", c.path, key, c.body, "Idempotency-Key", ik+"-running"); r.Status != 409 || r.Body != inFlight {
				t.Errorf("in flight: %d %s", r.Status, r.Body)
			}
		})
	}
	// Without a key, a second onboarding is a second account; with one, it is not.
	a := decodeOK(t, s.post("/v1/fiat/accounts", key, onboardBody("dup@example.com")))
	b := decodeOK(t, s.post("/v1/fiat/accounts", key, onboardBody("dup@example.com")))
	if a["accountId"] == b["accountId"] {
		t.Error("two onboardings without a key made one account")
	}
}
