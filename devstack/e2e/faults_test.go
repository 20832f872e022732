package e2e

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
)

// raw sends bytes over a fresh connection to the gateway and reads until the
// server closes it (or 3 s pass): what a client at the socket sees.
func (s *stack) raw(payload string, pause time.Duration, rest string) (answer string, closed bool) {
	s.t.Helper()
	c, err := net.Dial("tcp", strings.TrimPrefix(s.GatewayURL, "http://"))
	if err != nil {
		s.t.Fatal(err)
	}
	defer c.Close()
	io.WriteString(c, payload)
	if pause > 0 {
		time.Sleep(pause)
		io.WriteString(c, rest)
	}
	c.SetReadDeadline(time.Now().Add(3 * time.Second))
	b, err := io.ReadAll(c)
	return string(b), err == nil // EOF: closed by the server; a timeout: kept open
}

// Every answer the gateway controls is the envelope; a body a front proxy
// could read differently is refused, and a request framed by
// Transfer-Encoding (or HTTP/1.0) is answered with its connection closed,
// so nothing rides behind it.
func TestRawHTTPAnswersAreTheEnvelope(t *testing.T) {
	// Not parallel: a stack of its own, timed against bounds (package e2e).
	s := startStack(t, withEnv("HTTP_READ_TIMEOUT", "1s"))
	key := s.issue("acme", "--products", "bank", "--source-chains", "84532", "--rate", "1000")
	head := "POST /v1/bank/payout/quote HTTP/1.1\r\nHost: gw\r\nAuthorization: Bearer " + key + "\r\n"
	body := `{"cryptoCurrency":"USDC","chain":84532,"fiatCurrency":"EUR","country":"DE","cryptoAmount":"10"}`
	cl := "Content-Length: " + itoa(len(body)) + "\r\n"
	for _, tt := range []struct {
		name, payload, want string
	}{
		{"two Content-Type headers", head + "Content-Type: application/json\r\nContent-Type: text/plain\r\n" + cl + "\r\n" + body,
			`{"environment":"sandbox","error":{"code":"invalid_request","message":"Send one Content-Type header, not several."}}`},
		{"a gzip body", head + "Content-Type: application/json\r\nContent-Encoding: gzip\r\n" + cl + "\r\n" + body,
			`{"environment":"sandbox","error":{"code":"invalid_request","message":"Request bodies must not be encoded: send them without Content-Encoding."}}`},
	} {
		t.Run(tt.name, func(t *testing.T) {
			answer, closed := s.raw(tt.payload, 0, "")
			if !strings.HasPrefix(answer, "HTTP/1.1 400 ") || !strings.HasSuffix(answer, tt.want) || !closed {
				t.Fatalf("closed %v:\n%s", closed, answer)
			}
		})
	}
	next := "GET /v1/currencies HTTP/1.1\r\nHost: gw\r\nAuthorization: Bearer " + key + "\r\n\r\n"
	for _, tt := range []struct{ name, payload string }{
		{"Content-Length with Transfer-Encoding, a request behind it", head + "Content-Type: application/json\r\n" + cl + "Transfer-Encoding: chunked\r\n\r\n" + hexLen(body) + "\r\n" + body + "\r\n0\r\n\r\n" + next},
		{"chunked, a request behind it", head + "Content-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n" + hexLen(body) + "\r\n" + body + "\r\n0\r\n\r\n" + next},
		{"HTTP/1.0 kept alive, a chunked body that is a request", strings.Replace(head, "HTTP/1.1", "HTTP/1.0", 1) + "Content-Type: application/json\r\n" + cl +
			"Connection: keep-alive\r\nTransfer-Encoding: chunked\r\n\r\n" + body + hexLen(next) + "\r\n" + next + "\r\n0\r\n\r\n"},
	} {
		t.Run(tt.name+": answered once, then closed", func(t *testing.T) {
			answer, closed := s.raw(tt.payload, 0, "")
			if !strings.HasPrefix(answer, "HTTP/1.") || strings.Count(answer, "HTTP/1.") != 1 || !strings.Contains(answer, "\r\nConnection: close\r\n") || !closed ||
				!strings.Contains(answer, `{"environment":"sandbox",`) {
				t.Fatalf("closed %v:\n%s", closed, answer)
			}
		})
	}
	t.Run("OPTIONS * is answered in the envelope", func(t *testing.T) {
		answer, _ := s.raw("OPTIONS * HTTP/1.1\r\nHost: gw\r\nConnection: close\r\n\r\n", 0, "")
		if !strings.HasPrefix(answer, "HTTP/1.1 404 ") || !strings.HasSuffix(answer, `{"environment":"sandbox","error":{"code":"not_found","message":"No such endpoint."}}`) {
			t.Fatalf("%s", answer)
		}
	})
	t.Run("a bodiless request with a Content-Encoding is served", func(t *testing.T) {
		answer, _ := s.raw("GET /health HTTP/1.1\r\nHost: gw\r\nContent-Encoding: gzip\r\nConnection: close\r\n\r\n", 0, "")
		if !strings.HasPrefix(answer, "HTTP/1.1 200 ") || !strings.HasSuffix(answer, `{"ok":true}`) {
			t.Fatalf("%s", answer)
		}
	})
	t.Run("a body too slow for the read timeout is 408 in the envelope", func(t *testing.T) {
		start := time.Now()
		answer, closed := s.raw(head+"Content-Type: application/json\r\n"+cl+"\r\n"+body[:10], 1500*time.Millisecond, body[10:])
		want := `{"environment":"sandbox","error":{"code":"request_timeout","message":"The request body did not arrive in time; send it again."}}`
		if !strings.HasPrefix(answer, "HTTP/1.1 408 ") || !strings.HasSuffix(answer, want) || !closed || time.Since(start) > 3*time.Second {
			t.Fatalf("after %s, closed %v:\n%s", time.Since(start), closed, answer)
		}
	})
}

// Nothing a client sends can create a series: 500 requests with random
// methods and paths leave the gateway's series count unchanged.
func TestRandomMethodsAndPathsCreateNoSeries(t *testing.T) {
	// Not parallel: a stack of its own, timed against bounds (package e2e).
	s := startStack(t)
	s.issue("acme", "--products", "bank", "--source-chains", "84532", "--rate", "1000")
	send := func(method, path string) {
		req, _ := http.NewRequest(method, s.GatewayURL+path, nil)
		if resp, err := client.Do(req); err == nil {
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
		}
	}
	// One of each kind first, so that the series they belong to exist.
	send("FOO", "/x")
	send("GET", "/x")
	send("FOO", "/v1/x")
	send("GET", "/v1/x")
	before := seriesCount(s.metrics("gateway"))
	r := rand.New(rand.NewPCG(1, 2))
	letters := "ABCDEFGHIJKLMNOPQRSTUVWXYZ"
	for i := range 500 {
		var m strings.Builder
		for range 1 + r.IntN(12) {
			m.WriteByte(letters[r.IntN(len(letters))])
		}
		path := "/" + strings.Repeat("p", r.IntN(3)) + itoa(r.IntN(1<<30))
		if i%2 == 0 {
			path = "/v1" + path
		}
		send(m.String(), path)
	}
	if after := seriesCount(s.metrics("gateway")); after != before {
		t.Fatalf("500 random methods and paths took the gateway from %d to %d series", before, after)
	}
}

func seriesCount(metrics string) int {
	n := 0
	for _, line := range strings.Split(metrics, "\n") {
		if line != "" && !strings.HasPrefix(line, "#") && !strings.HasPrefix(line, "go_") && !strings.HasPrefix(line, "process_") {
			n++
		}
	}
	return n
}

// No client-sent id reaches a log whole: a 900 KiB id and a 900 KiB field
// name leave no log line over 4 KiB, and a message quotes 64 characters.
func TestHugeClientInputMakesNoHugeLogLine(t *testing.T) {
	// Not parallel: a stack of its own, timed against bounds (package e2e).
	s := startStack(t)
	key := s.issue("acme", "--products", "bank,fiat", "--source-chains", "84532", "--destination-chains", "84532", "--rate", "1000")
	huge := strings.Repeat("x", 900<<10)
	for _, c := range []struct{ path, body string }{
		{"/v1/fiat/status", `{"virtualAccountId":"va_` + huge + `"}`},
		{"/v1/fiat/virtual-accounts", `{"accountId":"acc_` + huge + `","currency":"EUR"}`},
		{"/v1/fiat/consent/status", `{"consentSessionId":"cs_` + huge + `"}`},
		{"/v1/bank/payout", `{"quoteId":"bpq_` + huge + `","beneficiary":{"name":"A","iban":"DE89370400440532013000"}}`},
	} {
		if r := s.post(c.path, key, c.body); r.Status != 404 || len(r.Body) > 200 {
			t.Errorf("%s with a 900 KiB id: %d %.200s", c.path, r.Status, r.Body)
		}
	}
	r := s.post("/v1/bank/payout/quote", key, `{"`+huge+`":1}`)
	if want := errorBody("invalid_request", `Unknown field "`+strings.Repeat("x", 63)+`"….`); r.Status != 400 || r.Body != want {
		t.Errorf("a 900 KiB field name: %d %.300s", r.Status, r.Body)
	}
	// Logs cross a pipe: wait for the last request's own line first.
	if !s.logged(`"request_id":"` + r.Header.Get("X-Request-Id") + `"`) {
		t.Fatal("the last request's log line never came")
	}
	longest := 0
	sc := bufio.NewScanner(strings.NewReader(s.logs.String()))
	sc.Buffer(make([]byte, 4<<20), 4<<20)
	for sc.Scan() {
		longest = max(longest, len(sc.Text()))
	}
	if longest > 4<<10 {
		t.Fatalf("the longest log line is %d bytes", longest)
	}
	if strings.Contains(s.logs.String(), strings.Repeat("x", 100)) {
		t.Error("a client-sent id reached a log")
	}
}

// With Redis killed or frozen under load, requests that need no record do
// not fail, and a 5/s key is still limited (in-process).
func TestRedisKilledOrFrozenUnderLoad(t *testing.T) {
	// Not parallel: a stack of its own, timed against bounds (package e2e).
	s := startStack(t)
	busy := s.issue("busy", "--products", "bank", "--source-chains", "84532", "--rate", "100000")
	// A 5/s key of its own for each fault: its bucket untouched by the
	// other's burst.
	slow := map[string]string{
		"SIGKILL": s.issue("slow-kill", "--products", "bank", "--source-chains", "84532", "--rate", "5"),
		"SIGSTOP": s.issue("slow-stop", "--products", "bank", "--source-chains", "84532", "--rate", "5"),
	}
	fallback := func(on bool) func() bool {
		want := "partnerapi_gateway_ratelimit_fallback_active 0"
		if on {
			want = "partnerapi_gateway_ratelimit_fallback_active 1"
		}
		return func() bool { return strings.Contains(s.metrics("gateway"), want) }
	}
	for _, fault := range []struct {
		name        string
		start, stop func()
	}{
		{"SIGKILL", s.redis.Stop, s.redis.Restart},
		{"SIGSTOP", s.redis.Pause, s.redis.Resume},
	} {
		t.Run(fault.name, func(t *testing.T) {
			var sent, failed atomic.Int32
			stop := make(chan struct{})
			var wg sync.WaitGroup
			untilClosed(&wg, 4, stop, func() {
				sent.Add(1)
				if r := s.get("/v1/limits", busy); r.Status != 200 {
					failed.Add(1)
				}
			})
			more := func(n int32) func() bool {
				from := sent.Load()
				return func() bool { return sent.Load() >= from+n }
			}
			wait := func(what string, cond func() bool) {
				t.Helper()
				if !eventually(10*time.Second, cond) {
					t.Fatalf("%s: not within 10 s", what)
				}
			}
			wait("the load runs", more(10))
			fault.start()
			wait("the gateway limits in-process", fallback(true))
			passed := 0
			for _, r := range s.burst(20, slow[fault.name]) {
				if r.Status == 200 {
					passed++
				}
			}
			wait("the load goes on through the fault", more(20))
			fault.stop()
			wait("Redis answers the gateway again", fallback(false))
			wait("the load goes on after it", more(10))
			close(stop)
			wg.Wait()
			// The waits above saw the load run before, through and after
			// the fault (at least 40 requests, however slow the machine).
			if failed.Load() != 0 {
				t.Errorf("%d of %d requests failed while Redis was down", failed.Load(), sent.Load())
			}
			if passed < 1 || passed > 6 {
				t.Errorf("a 5/s key passed %d of 20 at once while Redis was down", passed)
			}
		})
	}
}

// A frozen service (SIGSTOP, under traffic): the gateway's probe of its
// health notices within a few seconds and opens the circuit; the callers
// waiting on it then get 500 at once, not at their route's timeout, and so
// does every caller after; when it is back, calls go through again.
func TestAFrozenServiceFailsFast(t *testing.T) {
	// Not parallel: a stack of its own, timed against bounds (package e2e).
	s := startStack(t)
	key := s.issue("acme", "--products", "bank", "--source-chains", "84532", "--rate", "1000")
	payout := s.Services["payout"]
	want := errorBody("internal", "Internal error; it has been logged.")
	quote := fmt.Sprintf(eurQuote, "10")
	if r := s.post("/v1/bank/payout/quote", key, quote); r.Status != 200 {
		t.Fatalf("before: %d %s", r.Status, r.Body)
	}
	if err := payout.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	frozen := time.Now()
	var mu sync.Mutex
	var longest time.Duration
	for _, r := range s.concurrently(5, func() response {
		start := time.Now()
		r := s.post("/v1/bank/payout/quote", key, quote)
		mu.Lock()
		longest = max(longest, time.Since(start))
		mu.Unlock()
		return r
	}) {
		if r.Status != 500 || r.Body != want {
			t.Errorf("%d %s", r.Status, r.Body)
		}
	}
	// The route's timeout is 5 s; the probe notices after two missed
	// seconds (about 3 s in all), and releases the callers then.
	if longest > 4750*time.Millisecond {
		t.Errorf("callers waited up to %s; the probe should have released them within about 3 s", longest)
	}
	if !s.logged(`"msg":"upstream circuit open","service":"gateway","upstream":"payout","why":"its health stopped answering"`) {
		t.Error("the probe did not open the circuit")
	}
	// With the circuit open no partner call waits on the frozen service,
	// however long it stays frozen.
	for range 3 {
		start := time.Now()
		if r := s.post("/v1/bank/payout/quote", key, quote); r.Status != 500 || time.Since(start) > time.Second {
			t.Errorf("with the circuit open: %d after %s", r.Status, time.Since(start))
		}
	}
	t.Logf("frozen for %s: callers waited at most %s", time.Since(frozen).Round(time.Millisecond), longest.Round(time.Millisecond))
	// The reference reads do not need payout: the gateway answers them.
	if r := s.get("/v1/limits", key); r.Status != 200 || !strings.HasPrefix(r.Body, `{"environment":"sandbox","settlementNotation":`) {
		t.Errorf("GET /v1/limits with payout frozen: %d %s", r.Status, r.Body)
	}
	if v, _ := metricValue(s.metrics("gateway"), "partnerapi_gateway_upstream_circuit_state", map[string]string{"upstream": "payout"}); v != 2 {
		t.Errorf("circuit state %v, want 2 (open)", v)
	}
	payout.Signal(syscall.SIGCONT)
	s.waitForWithin(10*time.Second, func() bool { return s.post("/v1/bank/payout/quote", key, quote).Status == 200 })
}

// One service's death stays its own (DESIGN §6): with payout killed, a
// fiat-only partner's calls and every reference read still answer, the
// config with the key's own grants; payout's routes fail fast.
func TestAKilledServiceTakesOnlyItsOwnRoutes(t *testing.T) {
	// Not parallel: a stack of its own, timed against bounds (package e2e).
	s := startStack(t)
	key := s.issue("fiat-only", "--products", "fiat", "--source-chains", "84532", "--rate", "1000")
	bank := s.issue("bank-only", "--products", "bank", "--source-chains", "84532", "--rate", "1000")
	reads := []string{"/v1/config", "/v1/currencies", "/v1/limits", "/v1/countries", "/v1/statuses", "/v1/payment-methods", "/v1/rates"}
	before := map[string]string{}
	for _, path := range reads {
		r := s.get(path, key)
		if r.Status != 200 {
			t.Fatalf("GET %s before the kill: %d %s", path, r.Status, r.Body)
		}
		before[path] = r.Body
	}
	payout := s.Services["payout"]
	if err := payout.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	payout.Wait(10 * time.Second)
	for round := range 3 { // the first calls find it dead, the later ones its circuit open
		for _, path := range reads {
			if r := s.get(path, key); r.Status != 200 || r.Body != before[path] {
				t.Errorf("round %d, GET %s with payout dead: %d %s", round, path, r.Status, r.Body)
			}
		}
		acct := s.do("POST", "/v1/fiat/accounts", key, onboardBody(fmt.Sprintf("ada-%d@example.com", round)),
			"Idempotency-Key", fmt.Sprintf("dead-payout-%d", round))
		if acct.Status != 200 || !strings.Contains(acct.Body, `"accountId":"acc_`) {
			t.Errorf("round %d, onboarding with payout dead: %d %s", round, acct.Status, acct.Body)
		}
		if r := s.post("/v1/bank/payout/quote", bank, fmt.Sprintf(eurQuote, "10")); r.Status != 500 {
			t.Errorf("round %d, a quote with payout dead: %d %s", round, r.Status, r.Body)
		}
	}
}

// A service that restarts closes the gateway's idle connections to it; the
// next requests, even POSTs without an Idempotency-Key (never sent twice),
// go out on new connections and none fails.
func TestARestartedServiceCostsNoRequest(t *testing.T) {
	// Not parallel: a stack of its own, timed against bounds (package e2e).
	s := startStack(t)
	key := s.issue("acme", "--products", "bank", "--source-chains", "84532", "--rate", "1000")
	quote := fmt.Sprintf(eurQuote, "10")
	for _, r := range s.concurrently(16, func() response { return s.post("/v1/bank/payout/quote", key, quote) }) {
		if r.Status != 200 {
			t.Fatalf("before the restart: %d %s", r.Status, r.Body)
		}
	}
	payout := s.Services["payout"]
	payout.Stop() // graceful: it closes every idle connection, the gateway's pool among them
	if err := payout.Start(); err != nil {
		t.Fatal(err)
	}
	if err := payout.WaitHealthy(context.Background(), 10*time.Second); err != nil {
		t.Fatal(err)
	}
	for _, r := range s.concurrently(16, func() response { return s.post("/v1/bank/payout/quote", key, quote) }) {
		if r.Status != 200 {
			t.Errorf("after the restart: %d %s", r.Status, r.Body)
		}
	}
}

// SIGTERM with requests in flight that take longer than 10 s: none is cut.
func TestShutdownCutsNoRequestInFlight(t *testing.T) {
	for _, victim := range []string{"gateway", "fiat"} {
		t.Run(victim, func(t *testing.T) {
			t.Parallel() // each waits out the bank's 11 s, on a stack of its own
			s := startStack(t, withEnv("SANDBOXBANK_LATENCY", "11s"), withEnv("SHUTDOWN_DRAIN", "1s"))
			key := s.issue("acme", "--products", "fiat", "--destination-chains", "84532", "--rate", "1000")
			answers := make(chan string, 2)
			patient := &http.Client{Timeout: 40 * time.Second}
			for _, email := range []string{"ada@example.com", "grace@example.com"} {
				go func() {
					req, _ := http.NewRequest("POST", s.GatewayURL+"/v1/fiat/accounts", strings.NewReader(onboardBody(email)))
					req.Header.Set("Authorization", "Bearer "+key)
					req.Header.Set("Content-Type", "application/json")
					resp, err := patient.Do(req)
					if err != nil {
						answers <- err.Error()
						return
					}
					b, _ := io.ReadAll(resp.Body)
					resp.Body.Close()
					answers <- strconv.Itoa(resp.StatusCode) + " " + string(b)
				}()
			}
			// Both are in flight once the bank holds them.
			s.waitForWithin(10*time.Second, func() bool {
				v, _ := metricValue(s.metrics("sandboxbank"), "partnerapi_http_requests_in_flight", nil)
				return v >= 2
			})
			p := s.Services[victim]
			if err := p.Signal(syscall.SIGTERM); err != nil {
				t.Fatal(err)
			}
			if victim == "gateway" {
				s.waitFor(func() bool {
					resp, err := client.Get("http://" + p.AdminAddr + "/ready")
					if err != nil {
						return false
					}
					resp.Body.Close()
					return resp.StatusCode == 503
				})
			}
			for range 2 {
				if r := <-answers; !strings.HasPrefix(r, "200 ") || !strings.Contains(r, `"status":"consent_required"`) {
					t.Errorf("a request in flight at SIGTERM: %s", r)
				}
			}
			if !p.Wait(10*time.Second) || p.ExitCode() != 0 {
				t.Errorf("%s did not exit cleanly after its requests: exit %d", victim, p.ExitCode())
			}
		})
	}
}

func itoa(n int) string { return strconv.Itoa(n) }

func hexLen(s string) string { return strconv.FormatInt(int64(len(s)), 16) }

// No answer goes to another request while a service is killed (SIGKILL,
// then started again) or frozen (SIGSTOP, then SIGCONT) under 16
// keep-alive clients: every quote answered carries the quote id its own
// amount was priced at (an open quote answers the same id again), with its
// own X-Request-Id; the others are 500 in the envelope.
func TestNoAnswerCrossesAKilledOrFrozenService(t *testing.T) {
	// Not parallel: a stack of its own, timed against bounds (package e2e).
	s := startStack(t)
	key := s.issue("acme", "--products", "bank", "--source-chains", "84532", "--rate", "100000")
	// Every quote request opens a new quote; one per amount, asked again
	// with its Idempotency-Key, answers the same quote id: what an answer
	// that crossed to another request would not carry.
	ids := map[string]string{} // amount → quote id
	quoteKey := func(amount string) string { return "quote-" + amount }
	for i := range 32 {
		amount := strconv.Itoa(100 + i)
		ids[amount] = quoteIDIn.FindStringSubmatch(s.do("POST", "/v1/bank/payout/quote", key, eur(amount), "Idempotency-Key", quoteKey(amount)).Body)[1]
	}
	payout := s.Services["payout"]
	for _, fault := range []struct {
		name        string
		start, stop func()
	}{
		{"SIGKILL", func() { payout.Signal(syscall.SIGKILL); payout.Wait(5 * time.Second) }, func() {
			if err := payout.Start(); err != nil {
				t.Fatal(err)
			}
		}},
		{"SIGSTOP", func() { payout.Signal(syscall.SIGSTOP) }, func() { payout.Signal(syscall.SIGCONT) }},
	} {
		t.Run(fault.name, func(t *testing.T) {
			var answered, failed, crossed atomic.Int32
			stop := make(chan struct{})
			var wg sync.WaitGroup
			for w := range 16 {
				wg.Add(1)
				go func() {
					defer wg.Done()
					client := &http.Client{Timeout: 15 * time.Second}
					for i := 0; ; i++ {
						select {
						case <-stop:
							return
						default:
						}
						amount := strconv.Itoa(100 + (w*7+i)%32)
						rid := fmt.Sprintf("w%d-%d", w, i)
						req, _ := http.NewRequest("POST", s.GatewayURL+"/v1/bank/payout/quote", strings.NewReader(eur(amount)))
						req.Header.Set("Authorization", "Bearer "+key)
						req.Header.Set("Content-Type", "application/json")
						req.Header.Set("X-Request-Id", rid)
						req.Header.Set("Idempotency-Key", quoteKey(amount))
						resp, err := client.Do(req)
						if err != nil {
							failed.Add(1)
							continue
						}
						b, _ := io.ReadAll(resp.Body)
						resp.Body.Close()
						switch {
						case resp.StatusCode == 200 && strings.Contains(string(b), `"quoteId":"`+ids[amount]+`"`) && resp.Header.Get("X-Request-Id") == rid:
							answered.Add(1)
						case (resp.StatusCode == 500 && string(b) == errorBody("internal", "Internal error; it has been logged.") ||
							resp.StatusCode == 409 && strings.Contains(string(b), `"code":"idempotency_in_progress"`)) && resp.Header.Get("X-Request-Id") == rid:
							failed.Add(1)
							time.Sleep(5 * time.Millisecond) // the circuit fails fast: do not spin
						default:
							crossed.Add(1)
							t.Errorf("%s for %s: %d %s (X-Request-Id %q)", rid, amount, resp.StatusCode, b, resp.Header.Get("X-Request-Id"))
						}
					}
				}()
			}
			s.waitFor(func() bool { return answered.Load() > 100 })
			fault.start()
			time.Sleep(time.Second)
			fault.stop()
			before := answered.Load()
			s.waitForWithin(15*time.Second, func() bool { return answered.Load() > before+100 })
			close(stop)
			wg.Wait()
			t.Logf("%s: %d answered, %d failed, %d crossed", fault.name, answered.Load(), failed.Load(), crossed.Load())
		})
	}
}

// TestMakeRunRestartsAServiceThatExits: make run supervises its services:
// one that dies is restarted after a delay, with a line naming it, and its
// routes answer again; the rest of the stack never stopped.
func TestMakeRunRestartsAServiceThatExits(t *testing.T) {
	// Not parallel: a stack of its own, timed against bounds (package e2e).
	s := startStack(t)
	key := s.issue("acme", "--products", "bank", "--source-chains", "84532", "--rate", "1000")
	pid := s.Services["payout"].Pid() // before the supervisor may change it
	var said syncBuffer
	ctx, cancel := context.WithCancel(context.Background())
	supervised := make(chan struct{})
	go func() {
		defer close(supervised)
		s.Supervise(ctx, func(line string) { said.Write([]byte(line + "\n")) })
	}()
	defer func() { cancel(); <-supervised }() // before the stack stops
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(20 * time.Second)
	for !strings.Contains(said.String(), "devstack: payout is back") {
		if time.Now().After(deadline) {
			t.Fatalf("payout was not restarted within 20s; the supervisor said:\n%s", said.String())
		}
		time.Sleep(50 * time.Millisecond)
	}
	if !strings.Contains(said.String(), "devstack: payout exited (exit code -1); restarting it in 1s\n") {
		t.Errorf("the restart is not explained: %q", said.String())
	}
	if r := s.post("/v1/bank/payout/quote", key, fmt.Sprintf(eurQuote, "10")); r.Status != 200 {
		t.Errorf("a quote after the restart: %d %s", r.Status, r.Body)
	}
}
