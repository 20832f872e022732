package e2e

import (
	"context"
	"net/http"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/partnerpay/api/pkg/idempotency"
)

// payoutBody is a payout answer: its fields in their order, the deposit
// instructions, the beneficiary masked to its name and four characters.
var payoutBody = regexp.MustCompile(`^\{"environment":"sandbox","mock":true,"payoutId":"(bpo_[0-9a-f]{32})","quoteId":"(bpq_\d+_[0-9a-f]{32})","status":"([a-z_]+)",` +
	`"rail":"([a-z_]+)","estimatedSettlement":"([A-Z0-9]+)","deposit":\{"address":"0x[0-9a-fA-F]{40}","chain":\d+,"cryptoCurrency":"[A-Z]+",` +
	`"token":"0x[0-9a-fA-F]{40}","amount":"1234567\.89","expiresAt":"[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9:]{8}Z"\},"beneficiary":\{"name":"[^"]*","account":"[^"]{1,4}"\}` +
	`(,"reference":"[^"]*")?(,"refundAddress":"0x[0-9a-fA-F]{40}")?,"createdAt":"[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9:]{8}Z","refunds":\[[^\]]*\]\}$`)

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
		mine := s.quoteID(acme, eur("51"))
		usd := s.quoteID(acme, `{"cryptoCurrency":"USDC","chain":84532,"fiatCurrency":"USD","country":"US","cryptoAmount":"51","rail":"ach"}`)
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
				403, errorBody("execution_capped", "This payout is worth more than the key's maxExecutionUsd of 100 USD at the reference rates of GET /v1/rates.")},
			{"IBAN with a bad checksum: our check names the field, error.fields is for the bank's", acme, executeBody(mine, "DE88370400440532013000"),
				400, errorBody("invalid_request", "beneficiary.iban has an invalid checksum; check it for a mistyped character.")},
			{"IBAN of the wrong length", acme, `{"quoteId":"` + mine + `","beneficiary":{"name":"A","iban":"DE8937040044053201300"}}`,
				400, errorBody("invalid_request", "beneficiary.iban is not an IBAN: its length or characters do not fit its country's format.")},
			{"an IBAN of another country than the quote's", acme, executeBody(mine, "FR1420041010050500013M02606"),
				400, errorBody("invalid_request", "beneficiary.iban is an account in FR; this quote pays out to DE.")},
			{"a US account on a SEPA quote", acme, `{"quoteId":"` + mine + `","beneficiary":{"name":"A","routingNumber":"021000021","accountNumber":"123456789","accountType":"checking"}}`,
				400, errorBody("invalid_request", `Unknown field "beneficiary.routingNumber".`)},
			{"an IBAN on an ACH quote", acme, executeBody(usd, "DE89370400440532013000"),
				400, errorBody("invalid_request", `Unknown field "beneficiary.iban".`)},
			{"an ABA routing number with a broken checksum", acme, `{"quoteId":"` + usd + `","beneficiary":{"name":"A","routingNumber":"021000022","accountNumber":"123456789","accountType":"checking"}}`,
				400, errorBody("invalid_request", "beneficiary.routingNumber has an invalid checksum; check it for a mistyped digit.")},
			{"no name", acme, `{"quoteId":"` + mine + `","beneficiary":{"name":"","iban":"DE8937040044053201300"}}`,
				400, errorBody("invalid_request", "beneficiary.name is required: the account holder's name.")},
			{"a malformed quote id is unknown", acme, executeBody("bpq_84532_XYZ", "DE89370400440532013000"),
				404, errorBody("quote_not_found", "No quote with this quoteId exists for this key.")},
			{"no quote id", acme, `{"beneficiary":{"name":"A","iban":"DE89370400440532013000"}}`,
				400, errorBody("invalid_request", "quoteId is required: the id of a quote from POST /v1/bank/payout/quote.")},
			{"unknown field", acme, `{"quoteId":"` + mine + `","beneficiary":{"name":"A","iban":"DE89370400440532013000","swift":"DEUTDEFF"}}`,
				400, errorBody("invalid_request", `Unknown field "beneficiary.swift".`)},
			{"a reference too long", acme, `{"quoteId":"` + mine + `","beneficiary":{"name":"A","iban":"DE89370400440532013000"},"reference":"` + strings.Repeat("r", 65) + `"}`,
				400, errorBody("invalid_request", "reference, when sent, must be 1 to 64 printable ASCII characters: your own id for the payout.")},
			{"a field given twice", acme, `{"quoteId":"x","quoteId":"y","beneficiary":{"name":"A","iban":"x"}}`,
				400, errorBody("invalid_request", `Field "quoteId" is given twice.`)},
			{"field names match exactly", acme, `{"QuoteId":"x","beneficiary":{"name":"A","iban":"x"}}`,
				400, errorBody("invalid_request", `Unknown field "QuoteId".`)},
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
	// Two seconds: the new instance below must still be open when it is
	// executed, on a loaded CI machine too.
	s := startStack(t, withEnv("QUOTE_TTL", "2s"))
	key := s.issue("acme", "--products", "bank", "--source-chains", "84532", "--rate", "1000")
	q := s.quoteID(key, eur("10"))
	time.Sleep(2100 * time.Millisecond)
	r := s.post(executePath, key, executeBody(q, "DE89370400440532013000"))
	want := errorBody("quote_expired", "This quote has expired; request a new quote. Expired quotes are never repriced.")
	if r.Status != 410 || r.Body != want {
		t.Fatalf("got %d %s, want 410 %s", r.Status, r.Body, want)
	}
	// Quoting again opens a new instance: the old id is never priced again.
	again := s.quoteID(key, eur("10"))
	if again == q {
		t.Fatalf("re-quoting after expiry brought back %s: whoever holds it would execute at the new price", q)
	}
	payoutID(t, s.post(executePath, key, executeBody(again, "DE89370400440532013000")), again)
	if r := s.post(executePath, key, executeBody(q, "DE89370400440532013000")); r.Status != 410 || r.Body != want {
		t.Fatalf("the old id after a re-quote: %d %s", r.Status, r.Body)
	}
}

// A second, identical payout is a new quote and a new payout, never the
// first one again; and an executed quote is bound to its beneficiary.
func TestASecondIdenticalPayoutIsNotMergedIntoTheFirst(t *testing.T) {
	secondIdenticalPayout(t, startStack(t))
}

func secondIdenticalPayout(t *testing.T, s *stack) {
	key := s.issue("acme", "--products", "bank", "--source-chains", "84532", "--rate", "1000")
	const gbp = `{"cryptoCurrency":"USDC","chain":84532,"fiatCurrency":"GBP","country":"GB","cryptoAmount":"42"}`
	alice := `{"quoteId":"%s","beneficiary":{"name":"Alice Liddell","sortCode":"60-16-13","accountNumber":"31926819"}}`
	bob := `{"quoteId":"%s","beneficiary":{"name":"Bob Cratchit","sortCode":"20-15-30","accountNumber":"93459012"}}`
	body := func(tmpl, q string) string { return strings.Replace(tmpl, "%s", q, 1) }

	q1 := s.quoteID(key, gbp)
	p1 := payoutID(t, s.do("POST", executePath, key, body(alice, q1), "Idempotency-Key", "alice-1"), q1)

	r := s.do("POST", executePath, key, body(bob, q1), "Idempotency-Key", "bob-1")
	want := errorBody("quote_already_executed", "This quote was already executed for another beneficiary; nothing was sent. Request a new quote for a new payout.")
	if r.Status != 409 || r.Body != want {
		t.Fatalf("Bob on Alice's executed quote: %d %s\nwant 409 %s", r.Status, r.Body, want)
	}
	q2 := s.quoteID(key, gbp)
	if q2 == q1 {
		t.Fatal("the same request after execution answered the executed quote")
	}
	p2 := payoutID(t, s.do("POST", executePath, key, body(bob, q2), "Idempotency-Key", "bob-2"), q2)
	if p2 == p1 {
		t.Fatal("Bob's payout is Alice's")
	}
	if again := payoutID(t, s.post(executePath, key, body(alice, q1)), q1); again != p1 {
		t.Errorf("Alice's quote again: %s, want %s", again, p1)
	}
}

// Twenty concurrent executions of one quote for two beneficiaries: exactly
// one payout; every answer is that payout (to its beneficiary) or 409.
func TestConcurrentExecutionsWithMixedBeneficiaries(t *testing.T) {
	s := startStack(t)
	key := s.issue("acme", "--products", "bank", "--source-chains", "84532", "--rate", "1000")
	q := s.quoteID(key, eur("250"))
	var i atomic.Int32
	answers := s.concurrently(20, func() response {
		if i.Add(1)%2 == 0 {
			return s.post(executePath, key, executeBody(q, "DE89370400440532013000"))
		}
		return s.post(executePath, key, `{"quoteId":"`+q+`","beneficiary":{"name":"Charles Babbage","iban":"DE12500105170648489890"}}`)
	})
	ids := map[string]bool{}
	for _, r := range answers {
		switch r.Status {
		case 200:
			ids[payoutID(t, r, q)] = true
		case 409:
			if !strings.Contains(r.Body, `"code":"quote_already_executed"`) {
				t.Errorf("409 %s", r.Body)
			}
		default:
			t.Errorf("unexpected %d %s", r.Status, r.Body)
		}
	}
	if len(ids) != 1 {
		t.Fatalf("%d payouts for one quote", len(ids))
	}
}

// Redis holds only quote offers: an acknowledged payout is the system of
// record's, so with Redis killed (SIGKILL) the same execution and its
// idempotent replay still answer the same payout, and once Redis is back
// the same quote request opens a new quote.
func TestAnAcknowledgedPayoutOutlivesKill9OfRedis(t *testing.T) {
	s := startStack(t)
	key := s.issue("acme", "--products", "bank", "--source-chains", "84532", "--rate", "1000")
	q := s.quoteID(key, eur("77"))
	body := executeBody(q, "DE89370400440532013000")
	first := s.do("POST", executePath, key, body, "Idempotency-Key", "crash-1")
	payoutID(t, first, q)
	s.redis.Stop() // SIGKILL: no shutdown, no save
	if r := s.post(executePath, key, body); r.Status != 200 || r.Body != first.Body {
		t.Fatalf("with Redis down: %d %s, want the same payout %s", r.Status, r.Body, first.Body)
	}
	other := s.post(executePath, key, `{"quoteId":"`+q+`","beneficiary":{"name":"Charles Babbage","iban":"DE12500105170648489890"}}`)
	if other.Status != 409 || !strings.Contains(other.Body, `"code":"quote_already_executed"`) {
		t.Fatalf("another beneficiary with Redis down: %d %s", other.Status, other.Body)
	}
	replay := s.do("POST", executePath, key, body, "Idempotency-Key", "crash-1")
	if replay.Body != first.Body || replay.Header.Get("Idempotent-Replayed") != "true" {
		t.Fatalf("idempotent replay with Redis down: %s (replayed %q)", replay.Body, replay.Header.Get("Idempotent-Replayed"))
	}
	s.redis.Restart()
	var r response
	s.waitFor(func() bool {
		r = s.post("/v1/bank/payout/quote", key, eur("77"))
		return r.Status == 200
	})
	if again := checkQuote(t, r).ID; again == q {
		t.Error("after the crash the same request answered the executed quote")
	}
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
	t.Run("a refusal is not remembered: the fixed request is served under the same key", func(t *testing.T) {
		q2 := s.quoteID(key, eur("43"))
		at := len("bpq_84532_") + 10 // a typo in the id's middle
		typo := q2[:at] + "0" + q2[at+1:]
		if typo == q2 {
			typo = q2[:at] + "1" + q2[at+1:]
		}
		for _, bad := range []struct {
			body   string
			status int
		}{{executeBody(q2, "DE00"), 400}, {executeBody(typo, "DE89370400440532013000"), 404}} {
			if r := s.do("POST", executePath, key, bad.body, "Idempotency-Key", "fix-1"); r.Status != bad.status {
				t.Fatalf("the mistyped request: %d %s, want %d", r.Status, r.Body, bad.status)
			}
		}
		fixed := s.do("POST", executePath, key, executeBody(q2, "DE89370400440532013000"), "Idempotency-Key", "fix-1")
		payoutID(t, fixed, q2)
		if r := s.do("POST", executePath, key, executeBody(q2, "DE89370400440532013000"), "Idempotency-Key", "fix-1"); r.Body != fixed.Body || r.Header.Get("Idempotent-Replayed") != "true" {
			t.Fatalf("the fixed request again: %s", r.Body)
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
// holds it: a claim row in the stack's database, locked for a minute.
func (s *stack) seedInFlight(keyID, idemKey, path, body string) {
	s.t.Helper()
	ctx := context.Background()
	c, err := pgx.Connect(ctx, s.DatabaseURL)
	if err != nil {
		s.t.Fatal(err)
	}
	defer c.Close(ctx)
	now := time.Now().UTC()
	if _, err := c.Exec(ctx, `INSERT INTO idempotency_keys (key_id, key_hash, fingerprint, seed, created_at, locked_until) VALUES ($1, $2, $3, 'seed', $4, $5)`,
		keyID, idempotency.KeyHash(idemKey), idempotency.Fingerprint(http.MethodPost, path, []byte(body)), now, now.Add(time.Minute)); err != nil {
		s.t.Fatalf("seed an in-flight request: %v", err)
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
