package e2e

import (
	"context"
	"io"
	"net/http"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// count runs a count query on the stack's database.
func (s *stack) count(query string, args ...any) int {
	s.t.Helper()
	ctx := context.Background()
	c, err := pgx.Connect(ctx, s.DatabaseURL)
	if err != nil {
		s.t.Fatal(err)
	}
	defer c.Close(ctx)
	var n int
	if err := c.QueryRow(ctx, query, args...).Scan(&n); err != nil {
		s.t.Fatal(err)
	}
	return n
}

// inFlight reads a service's requests in flight from its metrics.
func (s *stack) inFlight(service string) string {
	m := regexp.MustCompile(`(?m)^partnerapi_http_requests_in_flight (\d+)$`).FindStringSubmatch(s.metrics(service))
	if m == nil {
		return ""
	}
	return m[1]
}

// A partner's client gives up on an onboarding while the bank provider is
// frozen. The request runs on; its retry with the same Idempotency-Key is
// told it is still in progress, then gets the account that was made: never
// an empty answer, never a stored 500, and one account, not two.
func TestARetryAfterAClientTimeoutGetsTheRecordThatWasMade(t *testing.T) {
	s := startStack(t)
	key := s.issue("acme", "--products", "fiat", "--destination-chains", "84532", "--rate", "1000")
	bank := s.Services["sandboxbank"]
	if err := bank.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	defer bank.Signal(syscall.SIGCONT)

	body := onboardBody("ada@example.com")
	send := func(timeout time.Duration) (*http.Response, string, error) {
		req, _ := http.NewRequest(http.MethodPost, s.GatewayURL+"/v1/fiat/accounts", strings.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+key)
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Idempotency-Key", "onboard-ada-1")
		resp, err := (&http.Client{Timeout: timeout}).Do(req)
		if err != nil {
			return nil, "", err
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		return resp, string(b), err
	}
	if _, _, err := send(500 * time.Millisecond); err == nil {
		t.Fatal("the first call was answered while the bank was frozen")
	}
	// The abandoned request is in the fiat service, waiting on the bank.
	s.waitFor(func() bool { return s.inFlight("fiat") == "1" })
	resp, got, err := send(5 * time.Second)
	if err != nil {
		t.Fatal(err)
	}
	want := errorBody("idempotency_in_progress", "A request with this Idempotency-Key is still in progress; retry shortly.")
	if resp.StatusCode != 409 || got != want || resp.Header.Get("Retry-After") != "1" {
		t.Fatalf("the retry while the first still runs: %d %s, want 409 %s", resp.StatusCode, got, want)
	}
	if err := bank.Signal(syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	var answer string
	s.waitFor(func() bool {
		resp, got, err := send(5 * time.Second)
		if err != nil || resp.StatusCode == 409 {
			return false
		}
		if resp.StatusCode != 200 || resp.Header.Get("Idempotent-Replayed") != "true" {
			t.Fatalf("the retry once the first finished: %d %s (replayed %q)", resp.StatusCode, got, resp.Header.Get("Idempotent-Replayed"))
		}
		answer = got
		return true
	})
	m := regexp.MustCompile(`^\{"environment":"sandbox","accountId":"(acc_[0-9a-f]{24})","status":"consent_required","consentSessionId":"(cs_[0-9a-f]{24})","createdAt":"[0-9-]{10}T[0-9:]{8}Z"\}$`).FindStringSubmatch(answer)
	if m == nil {
		t.Fatalf("the replayed answer is not the account: %s", answer)
	}
	if n := s.count(`SELECT count(*) FROM fiat_accounts WHERE key_id = 'acme'`); n != 1 {
		t.Errorf("%d accounts for one onboarding", n)
	}
	if r := s.post("/v1/fiat/consent/status", key, `{"consentSessionId":"`+m[2]+`"}`); r.Status != 200 || r.Body != `{"environment":"sandbox","consentSessionId":"`+m[2]+`","state":"pending"}` {
		t.Errorf("the account's consent session: %d %s", r.Status, r.Body)
	}
}
