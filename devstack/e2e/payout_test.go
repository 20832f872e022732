package e2e

import (
	"context"
	"net/http"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/partnerpay/api/pkg/idempotency"
)

var payoutBody = regexp.MustCompile(`^\{"environment":"sandbox","mock":true,"payoutId":"(bpo_[0-9a-f]{32})","quoteId":"(bpq_\d+_[0-9a-f]{32})","status":"pending","rail":"([a-z_]+)","estimatedSettlement":"([A-Z0-9]+)"\}$`)

const executePath = "/v1/bank/payout"

// quoteID prices body with key and returns the quote id.
func (s *stack) quoteID(key, body string) string {
	s.t.Helper()
	return checkQuote(s.t, s.post("/v1/bank/payout/quote", key, body)).ID
}

func executeBody(quoteID, iban string) string {
	return `{"quoteId":"` + quoteID + `","beneficiary":{"name":"Ada Lovelace","iban":"` + iban + `"}}`
}

// payoutID checks a 200 execution and returns its payout id.
func payoutID(t *testing.T, r response, quoteID string) string {
	t.Helper()
	m := payoutBody.FindStringSubmatch(r.Body)
	if r.Status != 200 || m == nil {
		t.Fatalf("execution: %d %s", r.Status, r.Body)
	}
	if m[2] != quoteID {
		t.Fatalf("payout for quote %s, want %s", m[2], quoteID)
	}
	return m[1]
}

const eurQuote = `{"cryptoCurrency":"USDC","chain":84532,"fiatCurrency":"EUR","country":"DE","cryptoAmount":"%s"}`

func eur(amount string) string { return strings.Replace(eurQuote, "%s", amount, 1) }

func TestPayoutExecution(t *testing.T) {
	s := startStack(t)
	acme := s.issue("acme", "--products", "bank", "--source-chains", "84532", "--rate", "1000", "--max-execution-usd", "25000")
	globex := s.issue("globex", "--products", "bank", "--source-chains", "84532", "--rate", "1000")
	small := s.issue("small", "--products", "bank", "--source-chains", "84532", "--rate", "1000", "--max-execution-usd", "100")

	t.Run("executes a quote once and answers the same payout again", func(t *testing.T) {
		q := s.quoteID(acme, eur("100"))
		first := s.post(executePath, acme, executeBody(q, "DE89370400440532013000"))
		id := payoutID(t, first, q)
		if !strings.Contains(first.Body, `"rail":"sepa_instant","estimatedSettlement":"PT10S"`) {
			t.Errorf("the payout carries the quote's rail: %s", first.Body)
		}
		again := s.post(executePath, acme, executeBody(q, "DE89 3704 0044 0532 0130 00"))
		if payoutID(t, again, q) != id || again.Body != first.Body {
			t.Fatalf("second execution: %s, want %s", again.Body, first.Body)
		}
	})

	t.Run("20 concurrent executions of one quote make one payout", func(t *testing.T) {
		q := s.quoteID(acme, eur("200"))
		ids := s.concurrently(20, func() response { return s.post(executePath, acme, executeBody(q, "DE89370400440532013000")) })
		want := payoutID(t, ids[0], q)
		for _, r := range ids {
			if payoutID(t, r, q) != want {
				t.Fatalf("two payouts for one quote: %s and %s", want, r.Body)
			}
		}
	})

	t.Run("20 concurrent executions sharing an Idempotency-Key", func(t *testing.T) {
		q := s.quoteID(acme, eur("300"))
		answers := s.concurrently(20, func() response {
			return s.do("POST", executePath, acme, executeBody(q, "DE89370400440532013000"), "Idempotency-Key", "pay-300")
		})
		var id string
		ok := 0
		for _, r := range answers {
			switch r.Status {
			case 200:
				ok++
				if got := payoutID(t, r, q); id == "" {
					id = got
				} else if got != id {
					t.Fatalf("two payouts: %s and %s", id, got)
				}
			case 409:
				if r.Body != errorBody("idempotency_in_progress", "A request with this Idempotency-Key is still in progress; retry shortly.") {
					t.Errorf("409 body %s", r.Body)
				}
			default:
				t.Errorf("unexpected %d %s", r.Status, r.Body)
			}
		}
		if ok == 0 {
			t.Fatal("no execution succeeded")
		}
	})

	t.Run("refusals", func(t *testing.T) {
		foreign := s.quoteID(globex, eur("50"))
		tooBig := s.quoteID(small, eur("100.01"))
		tests := []struct {
			name, key, body string
			status          int
			want            string
		}{
			{"unknown quote", acme, executeBody("bpq_84532_00000000000000000000000000000000", "DE89370400440532013000"),
				404, errorBody("quote_not_found", "No quote with this quoteId exists for this key.")},
			{"another key's quote answers as unknown", acme, executeBody(foreign, "DE89370400440532013000"),
				404, errorBody("quote_not_found", "No quote with this quoteId exists for this key.")},
			{"above the key's ceiling", small, executeBody(tooBig, "DE89370400440532013000"),
				403, errorBody("execution_capped", "This payout is worth more than the key's maxExecutionUsd of 100 USD at the reference rates of GET /v1/limits.")},
			{"IBAN with a bad checksum", acme, executeBody(foreign, "DE88370400440532013000"),
				400, `{"environment":"sandbox","error":{"code":"invalid_request","message":"The beneficiary is not valid; see error.fields.","fields":{"beneficiary.iban":"invalid_checksum"}}}`},
			{"IBAN of the wrong length and no name", acme, `{"quoteId":"` + foreign + `","beneficiary":{"name":"","iban":"DE8937040044053201300"}}`,
				400, `{"environment":"sandbox","error":{"code":"invalid_request","message":"The beneficiary is not valid; see error.fields.","fields":{"beneficiary.iban":"invalid_format","beneficiary.name":"required"}}}`},
			{"no quote id", acme, `{"beneficiary":{"name":"A","iban":"DE89370400440532013000"}}`,
				400, errorBody("invalid_request", "quoteId is required: the id of a quote from POST /v1/bank/payout/quote.")},
			{"unknown field", acme, `{"quoteId":"x","beneficiary":{"name":"A","iban":"x","bic":"DEUTDEFF"}}`,
				400, errorBody("invalid_request", `Unknown field "bic".`)},
		}
		for _, tt := range tests {
			t.Run(tt.name, func(t *testing.T) {
				r := s.post(executePath, tt.key, tt.body)
				if r.Status != tt.status || r.Body != tt.want {
					t.Fatalf("got %d %s\nwant %d %s", r.Status, r.Body, tt.status, tt.want)
				}
			})
		}
		if strings.Contains(s.logs.String(), "Ada Lovelace") || strings.Contains(s.logs.String(), "DE89370400440532013000") {
			t.Error("a beneficiary's name or IBAN reached the logs")
		}
	})

	t.Run("a quote executes in the limits its key lives under", func(t *testing.T) {
		if r := s.post(executePath, s.issue("fiat", "--products", "fiat", "--rate", "1000"), `{}`); r.Status != 403 {
			t.Errorf("execution without the bank product: %d", r.Status)
		}
	})
}

func TestExpiredQuoteIsRefusedNeverRepriced(t *testing.T) {
	s := startStack(t, withEnv("QUOTE_TTL", "1s"))
	key := s.issue("acme", "--products", "bank", "--source-chains", "84532", "--rate", "1000")
	q := s.quoteID(key, eur("10"))
	time.Sleep(1100 * time.Millisecond)
	r := s.post(executePath, key, executeBody(q, "DE89370400440532013000"))
	want := errorBody("quote_expired", "This quote has expired; request a new quote. Expired quotes are never repriced.")
	if r.Status != 410 || r.Body != want {
		t.Fatalf("got %d %s, want 410 %s", r.Status, r.Body, want)
	}
	// Quoting again gives a fresh expiry; the same id then executes.
	if again := s.quoteID(key, eur("10")); again != q {
		t.Fatalf("re-quote id %s, want %s", again, q)
	}
	payoutID(t, s.post(executePath, key, executeBody(q, "DE89370400440532013000")), q)
}

func TestIdempotencyOfExecution(t *testing.T) {
	s := startStack(t)
	key := s.issue("acme", "--products", "bank", "--source-chains", "84532", "--rate", "1000")
	q := s.quoteID(key, eur("42"))
	body := executeBody(q, "DE89370400440532013000")

	first := s.do("POST", executePath, key, body, "Idempotency-Key", "order-42")
	payoutID(t, first, q)

	t.Run("replay: same status and body, byte for byte", func(t *testing.T) {
		r := s.do("POST", executePath, key, body, "Idempotency-Key", "order-42")
		if r.Status != first.Status || r.Body != first.Body || r.Header.Get("Idempotent-Replayed") != "true" {
			t.Fatalf("replay %d %s (replayed %q)", r.Status, r.Body, r.Header.Get("Idempotent-Replayed"))
		}
	})
	t.Run("replay of a refusal is the same refusal", func(t *testing.T) {
		bad := executeBody(q, "DE00")
		a := s.do("POST", executePath, key, bad, "Idempotency-Key", "bad-1")
		b := s.do("POST", executePath, key, bad, "Idempotency-Key", "bad-1")
		if a.Status != 400 || b.Status != 400 || a.Body != b.Body {
			t.Fatalf("%d %s / %d %s", a.Status, a.Body, b.Status, b.Body)
		}
	})
	t.Run("same key, another body", func(t *testing.T) {
		r := s.do("POST", executePath, key, executeBody(q, "GB82WEST12345698765432"), "Idempotency-Key", "order-42")
		want := errorBody("idempotency_key_reused", "This Idempotency-Key was used for a different request in the last 24 hours; use a new key for a new request.")
		if r.Status != 422 || r.Body != want {
			t.Fatalf("got %d %s", r.Status, r.Body)
		}
	})
	t.Run("while the first is in flight", func(t *testing.T) {
		s.seedInFlight("acme", "still-running", executePath, body)
		r := s.do("POST", executePath, key, body, "Idempotency-Key", "still-running")
		want := errorBody("idempotency_in_progress", "A request with this Idempotency-Key is still in progress; retry shortly.")
		if r.Status != 409 || r.Body != want || r.Header.Get("Retry-After") != "1" {
			t.Fatalf("got %d %s", r.Status, r.Body)
		}
	})
	t.Run("a malformed key", func(t *testing.T) {
		r := s.do("POST", executePath, key, body, "Idempotency-Key", strings.Repeat("k", 256))
		if r.Status != 400 || r.Body != errorBody("invalid_request", "Idempotency-Key must be 1 to 255 printable ASCII characters.") {
			t.Fatalf("got %d %s", r.Status, r.Body)
		}
	})
	t.Run("keys are per partner key", func(t *testing.T) {
		other := s.issue("globex", "--products", "bank", "--source-chains", "84532", "--rate", "1000")
		oq := s.quoteID(other, eur("42"))
		r := s.do("POST", executePath, other, executeBody(oq, "DE89370400440532013000"), "Idempotency-Key", "order-42")
		payoutID(t, r, oq)
	})
	t.Run("a restart between the two calls loses nothing", func(t *testing.T) {
		p := s.Services["payout"]
		p.Stop()
		if err := p.Start(); err != nil {
			t.Fatal(err)
		}
		if err := p.WaitHealthy(context.Background(), 10*time.Second); err != nil {
			t.Fatal(err)
		}
		r := s.do("POST", executePath, key, body, "Idempotency-Key", "order-42")
		if r.Status != first.Status || r.Body != first.Body {
			t.Fatalf("replay after restart: %d %s, want %s", r.Status, r.Body, first.Body)
		}
		r = s.post(executePath, key, body)
		if r.Body != first.Body {
			t.Fatalf("execution after restart: %s, want %s", r.Body, first.Body)
		}
	})
}

// seedInFlight claims an Idempotency-Key the way a request still running
// holds it, through the idempotency package's own store: the deterministic
// way to meet an in-flight key.
func (s *stack) seedInFlight(keyID, idemKey, path, body string) {
	s.t.Helper()
	rdb := redis.NewClient(&redis.Options{Addr: s.redis.Addr})
	defer rdb.Close()
	store := idempotency.NewRedisStore(rdb)
	fp := idempotency.Fingerprint(http.MethodPost, path, []byte(body))
	if _, claimed, err := store.Claim(context.Background(), idempotency.StoreKey(keyID, idemKey), fp, time.Minute); err != nil || !claimed {
		s.t.Fatalf("seed an in-flight request: claimed %v, %v", claimed, err)
	}
}

// concurrently runs f n times at once and returns every answer.
func (s *stack) concurrently(n int, f func() response) []response {
	out := make([]response, n)
	var wg sync.WaitGroup
	start := make(chan struct{})
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			out[i] = f()
		}()
	}
	close(start)
	wg.Wait()
	return out
}
