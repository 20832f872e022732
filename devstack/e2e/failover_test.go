package e2e

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/redis/go-redis/v9"

	"github.com/partnerpay/api/devstack"
	"github.com/partnerpay/api/pkg/idempotency"
	"github.com/partnerpay/api/testkit/pglocal"
	"github.com/partnerpay/api/testkit/redistest"
)

// The payout load of the failover tests: workers quote distinct amounts
// and execute each quote, to one of two beneficiaries, a third of them
// with an Idempotency-Key, and every fifth one twice at once for both
// beneficiaries. Every acknowledged (200) payout is kept for the checks.

type beneficiary struct{ name, iban string }

var (
	ada     = beneficiary{"Ada Lovelace", "DE89370400440532013000"}
	charles = beneficiary{"Charles Babbage", "DE12500105170648489890"}
	eve     = beneficiary{"Eve Mallory", "DE74123456780000000042"}
)

func (b beneficiary) execute(quoteID string) string {
	return `{"quoteId":"` + quoteID + `","beneficiary":{"name":"` + b.name + `","iban":"` + b.iban + `"}}`
}

// ack is an acknowledged payout: what the partner was told.
type ack struct {
	quoteID, payoutID string
	to                beneficiary
	idemKey, answer   string
}

// call is one request of the load: which, when it started, and whether it
// worked.
type call struct {
	path  string
	start time.Time
	took  time.Duration
	ok    bool
}

type payoutLoad struct {
	s    *stack
	key  string
	n    atomic.Int64
	stop chan struct{}
	wg   sync.WaitGroup

	mu    sync.Mutex
	acks  []ack
	calls []call
	races int // quotes executed twice at once
}

var loadClient = &http.Client{Timeout: 15 * time.Second}

// send is s.do without failing the test: under a fault, calls fail.
func (l *payoutLoad) send(path, body, idemKey string) (int, string, http.Header) {
	req, _ := http.NewRequest(http.MethodPost, l.s.GatewayURL+path, strings.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+l.key)
	req.Header.Set("Content-Type", "application/json")
	if idemKey != "" {
		req.Header.Set("Idempotency-Key", idemKey)
	}
	start := time.Now()
	resp, err := loadClient.Do(req)
	status, answer := 0, ""
	var h http.Header
	if err == nil {
		b, rerr := io.ReadAll(resp.Body)
		resp.Body.Close()
		if rerr == nil {
			status, answer, h = resp.StatusCode, string(b), resp.Header
		}
	}
	l.mu.Lock()
	l.calls = append(l.calls, call{path: path, start: start, took: time.Since(start), ok: status == 200 || status == 409})
	l.mu.Unlock()
	return status, answer, h
}

func startLoad(t *testing.T, s *stack, workers int) *payoutLoad {
	l := &payoutLoad{s: s, stop: make(chan struct{})}
	l.key = s.issue("loadkey", "--products", "bank", "--source-chains", "84532", "--rate", "100000", "--max-execution-usd", "1000000")
	untilClosed(&l.wg, workers, l.stop, func() { l.once(t) })
	return l
}

func (l *payoutLoad) once(t *testing.T) {
	i := l.n.Add(1)
	amount := fmt.Sprintf("%d.%02d", 10+i/100, i%100) // one quote per iteration
	status, body, _ := l.send("/v1/bank/payout/quote", eur(amount), "")
	if status != 200 {
		return
	}
	q := quoteOf(body)
	to := []beneficiary{ada, charles}[i%2]
	idem := ""
	if i%3 == 0 {
		idem = fmt.Sprintf("load-%d", i)
	}
	if i%5 != 0 {
		if status, answer, _ := l.send(executePath, to.execute(q), idem); status == 200 {
			l.record(t, ack{quoteID: q, payoutID: payoutOf(answer), to: to, idemKey: idem, answer: answer})
		}
		return
	}
	// Both beneficiaries at once: one payout, to one of them.
	var wg sync.WaitGroup
	results := make([]ack, 2)
	codes := make([]int, 2)
	for j, b := range []beneficiary{ada, charles} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			status, answer, _ := l.send(executePath, b.execute(q), "")
			codes[j] = status
			if status == 200 {
				results[j] = ack{quoteID: q, payoutID: payoutOf(answer), to: b, answer: answer}
			}
		}()
	}
	wg.Wait()
	l.mu.Lock()
	l.races++
	l.mu.Unlock()
	if codes[0] == 200 && codes[1] == 200 {
		t.Errorf("quote %s executed for both beneficiaries: %s and %s", q, results[0].payoutID, results[1].payoutID)
	}
	for j := range results {
		if codes[j] == 200 {
			l.record(t, results[j])
		}
	}
}

func (l *payoutLoad) record(t *testing.T, a ack) {
	if a.payoutID == "" {
		t.Errorf("a 200 that is not a payout: %s", a.answer)
		return
	}
	l.mu.Lock()
	l.acks = append(l.acks, a)
	l.mu.Unlock()
}

// longest is the longest any call waited for its answer.
func (l *payoutLoad) longest() time.Duration {
	l.mu.Lock()
	defer l.mu.Unlock()
	var m time.Duration
	for _, c := range l.calls {
		m = max(m, c.took)
	}
	return m
}

func (l *payoutLoad) halt() {
	close(l.stop)
	l.wg.Wait()
}

// waitAcks waits until the load has acknowledged n payouts.
func (l *payoutLoad) waitAcks(t *testing.T, n int) {
	t.Helper()
	if !eventually(60*time.Second, func() bool {
		l.mu.Lock()
		defer l.mu.Unlock()
		return len(l.acks) >= n
	}) {
		t.Fatalf("the load acknowledged fewer than %d payouts in 60s", n)
	}
}

// recovery measures, for a fault that ended at ended and the calls to path
// (those that need what failed): how long after it the first one
// succeeded, and how many that started more than grace after it failed.
func (l *payoutLoad) recovery(path string, ended time.Time, grace time.Duration) (firstOK, lastFailure time.Duration, lateFailures, failed int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	firstOK = -1
	lastFailure = -time.Hour
	for _, c := range l.calls {
		if c.path != path {
			continue
		}
		if !c.ok {
			failed++
			lastFailure = max(lastFailure, c.start.Sub(ended))
		}
		if c.start.Before(ended) {
			continue
		}
		if c.ok && (firstOK < 0 || c.start.Sub(ended) < firstOK) {
			firstOK = c.start.Sub(ended)
		}
		if !c.ok && c.start.Sub(ended) > grace {
			lateFailures++
		}
	}
	return firstOK, lastFailure, lateFailures, failed
}

// check asks again for every acknowledged payout: the same beneficiary
// gets the same payout (and its Idempotency-Key the same answer), anyone
// else 409 and nothing moves; and the database holds each one once, bound
// to its beneficiary. It returns the lost and the duplicated payouts.
func (l *payoutLoad) check(t *testing.T) (lost, duplicated int) {
	t.Helper()
	byQuote := map[string]ack{}
	for _, a := range l.acks {
		if prev, ok := byQuote[a.quoteID]; ok && (prev.payoutID != a.payoutID || prev.to != a.to) {
			duplicated++
			t.Errorf("quote %s acknowledged as %s to %s and as %s to %s", a.quoteID, prev.payoutID, prev.to.name, a.payoutID, a.to.name)
		}
		byQuote[a.quoteID] = a
	}
	for _, a := range l.acks {
		if status, answer, _ := l.send(executePath, a.to.execute(a.quoteID), ""); status != 200 || answer != a.answer {
			lost++
			t.Errorf("acknowledged payout %s of %s: now %d %s", a.payoutID, a.quoteID, status, answer)
		}
		if status, answer, _ := l.send(executePath, eve.execute(a.quoteID), ""); status != 409 || !strings.Contains(answer, `"code":"quote_already_executed"`) {
			duplicated++
			t.Errorf("quote %s for another beneficiary: %d %s", a.quoteID, status, answer)
		}
		if a.idemKey != "" {
			if status, answer, h := l.send(executePath, a.to.execute(a.quoteID), a.idemKey); status != 200 || answer != a.answer || h.Get("Idempotent-Replayed") != "true" {
				lost++
				t.Errorf("replay of %s: %d %s", a.idemKey, status, answer)
			}
		}
	}
	ctx := context.Background()
	c, err := pgx.Connect(ctx, l.s.DatabaseURL)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close(ctx)
	rows, err := c.Query(ctx, `SELECT quote_id, id, beneficiary_name FROM payouts WHERE key_id = 'loadkey'`)
	if err != nil {
		t.Fatal(err)
	}
	stored := map[string][2]string{}
	for rows.Next() {
		var q, id, name string
		if err := rows.Scan(&q, &id, &name); err != nil {
			t.Fatal(err)
		}
		stored[q] = [2]string{id, name}
	}
	for q, a := range byQuote {
		if got := stored[q]; got != [2]string{a.payoutID, a.to.name} {
			lost++
			t.Errorf("quote %s: stored %v, acknowledged %s to %s", q, got, a.payoutID, a.to.name)
		}
	}
	return lost, duplicated
}

var quoteIDIn = regexp.MustCompile(`"quoteId":"(bpq_\d+_[0-9a-f]{32})"`)

func quoteOf(body string) string {
	if m := quoteIDIn.FindStringSubmatch(body); m != nil {
		return m[1]
	}
	return ""
}

func payoutOf(body string) string {
	if m := payoutBody.FindStringSubmatch(body); m != nil {
		return m[1]
	}
	return ""
}

// report logs what the issue's note gives for each fault.
// path names the calls that need what failed.
func (l *payoutLoad) report(t *testing.T, fault, path string, began, ended time.Time, lost, duplicated int) {
	firstOK, lastFailure, late, failed := l.recovery(path, ended, 5*time.Second)
	last := "none after it"
	if lastFailure > -time.Hour {
		last = fmt.Sprintf("%+.2fs", lastFailure.Seconds())
	}
	t.Logf("%s (%.2fs from the fault to its end): %d calls, %d of %s failed; %d payouts acknowledged (%d raced for two beneficiaries); %d lost, %d duplicated; relative to the fault's end, first success %+.2fs, last failure %s; %d failures later than 5s after it",
		fault, ended.Sub(began).Seconds(), len(l.calls), failed, path, len(l.acks), l.races, lost, duplicated, firstOK.Seconds(), last, late)
	if firstOK < 0 || firstOK > 5*time.Second {
		t.Errorf("%s: calls succeeded again %.2fs after the fault ended, want within 5s", fault, firstOK.Seconds())
	}
	if late > 0 {
		t.Errorf("%s: %d calls failed more than 5s after the fault ended", fault, late)
	}
}

// pgCluster is PostgreSQL as production runs it (DESIGN §6): a primary
// whose commits wait for ANY 1 of two synchronous standbys, each reached
// through a link the test can stall (a partition, a hung disk) and cut.
type pgCluster struct {
	primary  *pglocal.Server
	standbys [2]*pglocal.Server
	links    [2]*pglocal.Link
	url      string // every node, target_session_attrs=read-write
}

func startPGCluster(t *testing.T) *pgCluster {
	t.Helper()
	dir, err := pglocal.TempDir("pgfailover-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	c := &pgCluster{}
	c.primary, err = pglocal.New(pglocal.Options{Dir: filepath.Join(dir, "primary"),
		Settings: []string{"synchronous_standby_names=ANY 1 (s1, s2)", "synchronous_commit=on"}})
	if err != nil {
		t.Fatal(err)
	}
	if err := c.primary.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.primary.Kill)
	hosts := []string{c.primary.Addr()}
	for i, name := range []string{"s1", "s2"} {
		st, link, err := c.primary.StandbyVia(filepath.Join(dir, name), name, nil)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { link.Close(); st.Kill() })
		c.standbys[i], c.links[i] = st, link
		hosts = append(hosts, st.Addr())
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := c.primary.WaitStreaming(ctx, 2); err != nil {
		t.Fatal(err)
	}
	if err := c.primary.CreateDatabase(ctx, "failover"); err != nil {
		t.Fatal(err)
	}
	c.url = "postgres://postgres@" + strings.Join(hosts, ",") + "/failover?sslmode=disable&target_session_attrs=read-write"
	return c
}

// failover kills the primary (SIGKILL), cuts both links (what was in
// flight to a standby is lost, as in a partition) and promotes the
// standby that received the most WAL, as a failover manager would.
func (c *pgCluster) failover(t *testing.T) *pglocal.Server {
	t.Helper()
	c.primary.Kill()
	for _, l := range c.links {
		l.Cut()
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	next, err := pglocal.MostAdvanced(ctx, c.standbys[:]...)
	if err != nil {
		t.Fatal(err)
	}
	if err := next.Promote(); err != nil {
		t.Fatal(err)
	}
	return next
}

// A primary with two synchronous standbys (ANY 1), one of them stalled
// before the load starts: payouts go on committing through the other. The
// primary is killed (SIGKILL) under payout load and the standby with the
// most WAL promoted: no acknowledged payout is lost, none is executed again
// or to anyone else, and calls fail for no longer than the promotion plus
// 5 s.
func TestPayoutsSurviveAPostgreSQLFailover(t *testing.T) {
	// Not parallel: a stack of its own, killed or failed over and timed
	// against bounds (package e2e: one stack at a time).
	c := startPGCluster(t)
	s := startStack(t, func(o *devstack.Options) { o.DatabaseURL = c.url })
	stalled := time.Now()
	c.links[1].Stall()
	l := startLoad(t, s, 6)
	l.waitAcks(t, 40)
	l.mu.Lock()
	t.Logf("with one standby stalled: %d payouts acknowledged in %.2fs", len(l.acks), time.Since(stalled).Seconds())
	l.mu.Unlock()

	killed := time.Now()
	c.failover(t)
	promoted := time.Now()
	time.Sleep(6 * time.Second)
	l.halt()
	t.Logf("promotion took %.2fs after the kill; the longest call took %.2fs", promoted.Sub(killed).Seconds(), l.longest().Seconds())
	lost, duplicated := l.check(t)
	l.report(t, "one standby stalled, then the primary SIGKILLed and the other standby promoted", executePath, killed, promoted, lost, duplicated)
}

// The hole a Jepsen-style run found (issue 36), and the two it left
// (issue 46): both standbys stall, a payout's commit (or a keyed request's
// claim) waits for them, its caller is told "in progress, retry shortly";
// the primary dies and a standby without that WAL is promoted. No 200
// rested on the lost row; nobody but the first beneficiary ever gets a 200
// for the quote, whether the first beneficiary's retry comes before or
// after anyone else's call; and every read whose answer rests on rows read
// back answers 409 idempotency_in_progress with Retry-After within its
// budget while the standbys stall, never a 500, never late.
func TestNoAcknowledgementRestsOnARowTheStandbyLacks(t *testing.T) {
	// Not parallel: a stack of its own, killed or failed over and timed
	// against bounds (package e2e: one stack at a time).
	c := startPGCluster(t)
	s := startStack(t, func(o *devstack.Options) { o.DatabaseURL = c.url })
	key := s.issue("seq", "--products", "bank,fiat,card", "--source-chains", "84532", "--destination-chains", "84532",
		"--tokens", "84532:"+baseSepoliaUSDC, "--rate", "1000", "--max-execution-usd", "1000000")
	quoteOf := func(amount string) string {
		r := s.post("/v1/bank/payout/quote", key, eur(amount))
		if r.Status != 200 {
			t.Fatalf("quote: %d %s", r.Status, r.Body)
		}
		return quoteIDIn.FindStringSubmatch(r.Body)[1]
	}
	// A's quote (no key), B's two keyed quotes: one B retries before Eve
	// tries it, one Eve tries first.
	q, qKeyed, qKeyedEveFirst := quoteOf("10.00"), quoteOf("11.00"), quoteOf("11.50")

	// What the reads read: records committed, and on the standbys, before
	// the stall.
	first := s.post(executePath, key, ada.execute(quoteOf("9.00")))
	paid := payoutOf(first.Body)
	if first.Status != 200 || paid == "" {
		t.Fatalf("a payout before the stall: %d %s", first.Status, first.Body)
	}
	order := decodeOK(t, s.post("/v1/orders", key, `{"direction":"buy","cryptoCurrency":"USDC","chain":84532,"fiatCurrency":"EUR","country":"DE","fiatAmount":"100","walletAddress":"`+orderWallet+`"}`))["orderId"].(string)
	acc := decodeOK(t, s.post("/v1/fiat/accounts", key, onboardBody("ada@example.com")))
	accountID, sessionID := acc["accountId"].(string), acc["consentSessionId"].(string)
	reads := []struct{ name, method, path, body string }{
		{"payout status", "POST", "/v1/bank/payout/status", `{"payoutId":"` + paid + `"}`},
		{"payouts list", "GET", "/v1/bank/payouts", ""},
		{"order status", "POST", "/v1/orders/status", `{"orderId":"` + order + `"}`},
		{"orders list", "GET", "/v1/orders", ""},
		{"consent status", "POST", "/v1/fiat/consent/status", `{"consentSessionId":"` + sessionID + `"}`},
		{"accounts list", "GET", "/v1/fiat/accounts", ""},
		{"virtual accounts list", "GET", "/v1/fiat/virtual-accounts", ""},
		{"deposits list", "GET", "/v1/fiat/deposits", ""},
		{"funding status", "POST", "/v1/fiat/status", `{"accountId":"` + accountID + `","depositId":"dep_00000000000000000000000000000000"}`},
	}
	before := map[string]string{} // each read's answer, from rows on the standbys
	for _, r := range reads {
		got := s.do(r.method, r.path, key, r.body)
		if got.Status != 200 && !(r.name == "funding status" && got.Status == 404) {
			t.Fatalf("%s before the stall: %d %s", r.name, got.Status, got.Body)
		}
		before[r.name] = got.Body
	}

	var acked []ack // every 200 A or B got
	call := func(who string, b beneficiary, quoteID, idemKey string) response {
		start := time.Now()
		var r response
		if idemKey != "" {
			r = s.do("POST", executePath, key, b.execute(quoteID), "Idempotency-Key", idemKey)
		} else {
			r = s.post(executePath, key, b.execute(quoteID))
		}
		t.Logf("%s: %d in %.2fs %s", who, r.Status, time.Since(start).Seconds(), r.Body)
		if waited := time.Since(start); waited > 10*time.Second {
			t.Errorf("%s waited %.2fs: longer than the route's limit", who, waited.Seconds())
		}
		if r.Status == 200 {
			acked = append(acked, ack{quoteID: quoteID, payoutID: payoutOf(r.Body), to: b, idemKey: idemKey, answer: r.Body})
		}
		return r
	}
	inProgress := `"code":"idempotency_in_progress"`

	c.links[0].Stall()
	c.links[1].Stall()
	// A read is answered from rows the standbys have, or not yet: while
	// nothing has been written since they caught up, a read confirms at
	// once (database.DB.Confirm) and answers what it answered before the
	// stall; once anything is written (a worker's round, a payout), it
	// waits for them and, within its budget, answers 409.
	for _, r := range reads {
		start := time.Now()
		got := s.do(r.method, r.path, key, r.body)
		took := time.Since(start)
		t.Logf("%s, both standbys stalled: %d in %.2fs", r.name, got.Status, took.Seconds())
		sameAsBefore := (got.Status == 200 || (r.name == "funding status" && got.Status == 404)) && got.Body == before[r.name]
		if !sameAsBefore && (got.Status != 409 || !strings.Contains(got.Body, inProgress) || got.Header.Get("Retry-After") == "") {
			t.Errorf("%s, both standbys stalled: %d %s, want what the standbys have (%s) or 409 idempotency_in_progress with Retry-After", r.name, got.Status, got.Body, before[r.name])
		}
		if took > 4*time.Second {
			t.Errorf("%s, both standbys stalled: answered after %.2fs, want within its budget (2 s, and the route's time to reach it)", r.name, took.Seconds())
		}
	}
	for _, attempt := range []string{"A's call, both standbys stalled", "A's retry, both standbys stalled"} {
		if r := call(attempt, ada, q, ""); r.Status != 409 || !strings.Contains(r.Body, inProgress) || r.Header.Get("Retry-After") == "" {
			t.Errorf("%s: %d %s, want 409 idempotency_in_progress with Retry-After", attempt, r.Status, r.Body)
		}
	}
	for _, b := range []struct{ quote, idem string }{{qKeyed, "seq-b"}, {qKeyedEveFirst, "seq-b2"}} {
		for _, attempt := range []string{"B's keyed call, both standbys stalled", "B's keyed retry, both standbys stalled"} {
			if r := call(attempt, charles, b.quote, b.idem); r.Status != 409 || !strings.Contains(r.Body, inProgress) {
				t.Errorf("%s: %d %s, want 409 idempotency_in_progress", attempt, r.Status, r.Body)
			}
		}
	}
	for _, quote := range []string{q, qKeyedEveFirst} {
		if r := call("Eve, both standbys stalled", eve, quote, ""); r.Status == 200 {
			t.Errorf("Eve was paid %s, told to A or B as in progress", quote)
		}
	}

	c.failover(t)
	// Wait until payouts commit on the promoted standby.
	deadline := time.Now().Add(60 * time.Second)
	for i := 0; ; i++ {
		probe := quoteOf(fmt.Sprintf("12.%02d", i%100))
		if r := s.post(executePath, key, ada.execute(probe)); r.Status == 200 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("no payout committed within 60s of the promotion")
		}
		time.Sleep(100 * time.Millisecond)
	}
	// A's and B's quotes began executing for them before the fault: nobody
	// else is ever paid them, whether or not their payouts survived, and
	// whether the first beneficiary's retry comes first or last.
	alreadyExecuted := `"code":"quote_already_executed"`
	if r := call("Eve on A's quote after the failover", eve, q, ""); r.Status != 409 || !strings.Contains(r.Body, alreadyExecuted) {
		t.Errorf("Eve on A's quote after the failover: %d %s, want 409 quote_already_executed", r.Status, r.Body)
	}
	call("A's retry after the failover", ada, q, "")
	if r := call("B's keyed retry after the failover, before Eve", charles, qKeyed, "seq-b"); r.Status != 200 {
		t.Errorf("B's keyed retry after the failover: %d %s, want B's payout", r.Status, r.Body)
	}
	if r := call("Eve on B's quote after B's retry", eve, qKeyed, ""); r.Status != 409 || !strings.Contains(r.Body, alreadyExecuted) {
		t.Errorf("Eve on B's quote after B's retry: %d %s, want 409 quote_already_executed", r.Status, r.Body)
	}
	if r := call("Eve on B's second quote, before B's retry", eve, qKeyedEveFirst, ""); r.Status != 409 || !strings.Contains(r.Body, alreadyExecuted) {
		t.Errorf("Eve on B's second quote before B's retry: %d %s, want 409 quote_already_executed", r.Status, r.Body)
	}
	if r := call("B's keyed retry on its second quote, after Eve", charles, qKeyedEveFirst, "seq-b2"); r.Status != 200 {
		t.Errorf("B's keyed retry after Eve's call: %d %s, want B's payout", r.Status, r.Body)
	}
	// Whatever 200 came is there, the same, and still nobody else's; no
	// quote was paid to two beneficiaries.
	paidTo := map[string]ack{}
	for _, a := range acked {
		if prev, ok := paidTo[a.quoteID]; ok && (prev.to != a.to || prev.payoutID != a.payoutID) {
			t.Errorf("quote %s acknowledged as %s to %s and as %s to %s", a.quoteID, prev.payoutID, prev.to.name, a.payoutID, a.to.name)
		}
		paidTo[a.quoteID] = a
		r := s.post(executePath, key, a.to.execute(a.quoteID))
		if r.Status != 200 || payoutOf(r.Body) != a.payoutID {
			t.Errorf("acknowledged payout %s of %s: now %d %s", a.payoutID, a.quoteID, r.Status, r.Body)
		}
		other := eve
		if a.to == eve {
			other = ada
		}
		if r := s.post(executePath, key, other.execute(a.quoteID)); r.Status != 409 {
			t.Errorf("acknowledged quote %s for another beneficiary: %d %s", a.quoteID, r.Status, r.Body)
		}
	}
}

// keyed is one keyed payout request of TestAKilledPayoutServiceLeavesNoKeyedRequestWaiting,
// retried with its key until it has its outcome.
type keyed struct {
	quoteID, idem string
	first, done   time.Time
	status        int
	body          string
}

// The payout service is killed (SIGKILL) under keyed load and started
// again: every request is retried with its Idempotency-Key until it has its
// real outcome, which comes within 3 s of the service being back (a dead
// attempt's claim lapses with its short lease and the retry takes it
// over), and no claim is left holding its key past its lease.
func TestAKilledPayoutServiceLeavesNoKeyedRequestWaiting(t *testing.T) {
	// Not parallel: a stack of its own, killed or failed over and timed
	// against bounds (package e2e: one stack at a time).
	s := startStack(t)
	l := &payoutLoad{s: s}
	l.key = s.issue("keyed", "--products", "bank", "--source-chains", "84532", "--rate", "100000", "--max-execution-usd", "1000000")
	var mu sync.Mutex
	var reqs []*keyed
	var n atomic.Int64
	var inFlight atomic.Int32 // keyed requests between their first attempt and their outcome
	stop := make(chan struct{})
	var wg sync.WaitGroup
	untilClosed(&wg, 8, stop, func() {
		i := n.Add(1)
		status, body, _ := l.send("/v1/bank/payout/quote", eur(fmt.Sprintf("%d.%02d", 20+i/100, i%100)), "")
		if status != 200 {
			time.Sleep(20 * time.Millisecond)
			return
		}
		k := &keyed{quoteID: quoteOf(body), idem: fmt.Sprintf("kill-%d", i), first: time.Now()}
		mu.Lock()
		reqs = append(reqs, k)
		mu.Unlock()
		inFlight.Add(1)
		for time.Since(k.first) < 60*time.Second {
			status, body, _ := l.send(executePath, ada.execute(k.quoteID), k.idem)
			final := status == 200 || (status >= 400 && status < 500 && !strings.Contains(body, `"code":"idempotency_in_progress"`))
			if final {
				mu.Lock()
				k.done, k.status, k.body = time.Now(), status, body
				mu.Unlock()
				break
			}
			time.Sleep(50 * time.Millisecond)
		}
		inFlight.Add(-1)
	})
	doneCount := func() int {
		mu.Lock()
		defer mu.Unlock()
		c := 0
		for _, k := range reqs {
			if !k.done.IsZero() {
				c++
			}
		}
		return c
	}
	s.waitFor(func() bool { return doneCount() >= 40 })
	// Kill payout while keyed requests are in flight (each takes milliseconds:
	// watch without sleeping).
	for deadline := time.Now().Add(5 * time.Second); inFlight.Load() < 3 && time.Now().Before(deadline); {
	}
	killed := time.Now()
	s.killAndRestart("payout")
	up := time.Now()
	after := doneCount()
	s.waitFor(func() bool { return doneCount() >= after+40 })
	close(stop)
	wg.Wait()

	var slowest, longestWait time.Duration
	inDoubt := 0
	for _, k := range reqs {
		if k.done.IsZero() {
			t.Errorf("%s never got its outcome", k.idem)
			continue
		}
		if k.status != 200 || payoutOf(k.body) == "" {
			t.Errorf("%s: %d %s, want its payout", k.idem, k.status, k.body)
		}
		longestWait = max(longestWait, k.done.Sub(k.first))
		if k.first.Before(up) && k.done.After(killed) {
			inDoubt++
			slowest = max(slowest, k.done.Sub(up))
		}
		// The outcome is the request's: its key answers it again.
		if status, body, _ := l.send(executePath, ada.execute(k.quoteID), k.idem); status != k.status || body != k.body {
			t.Errorf("%s again: %d %s, want %d %s", k.idem, status, body, k.status, k.body)
		}
	}
	t.Logf("payout SIGKILLed under keyed load, back %.2fs later: %d requests, %d in flight across it; the slowest got its outcome %.2fs after the service was back; the longest any request waited %.2fs",
		up.Sub(killed).Seconds(), len(reqs), inDoubt, slowest.Seconds(), longestWait.Seconds())
	if inDoubt == 0 {
		t.Error("no request was in flight across the kill: the test proved nothing")
	}
	if slowest > 3*time.Second {
		t.Errorf("a request got its outcome %.2fs after the service was back, want within 3s", slowest.Seconds())
	}
	ctx := context.Background()
	c, err := pgx.Connect(ctx, s.DatabaseURL)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close(ctx)
	var stale int
	if err := c.QueryRow(ctx, `SELECT count(*) FROM idempotency_keys WHERE finished_at IS NULL AND released_at IS NULL
		AND locked_until < now() - make_interval(secs => $1)`, idempotency.DefaultLease.Seconds()).Scan(&stale); err != nil {
		t.Fatal(err)
	}
	if stale != 0 {
		t.Errorf("%d claims hold their key past their lease", stale)
	}
}

// One zone is lost with the PostgreSQL primary and the Redis master in it
// (DESIGN §6): B's keyed execution has claimed its key and closed its
// quote's offer in Redis, and is waiting for its payout's insert, when the
// primary is killed (SIGKILL) and the standby with the most WAL promoted,
// and the Redis master is killed and its replica, which stopped following
// it before B's call, promoted: the quote's offer is open again there, with
// no mark of B. C's execution of B's quote is still 409
// quote_already_executed (the quote's binding to B, written in PostgreSQL
// before B's claim, survived with the claim), and B's keyed retry gets
// B's payout.
func TestAZoneLossNeverGivesAKeyedQuoteToAnother(t *testing.T) {
	// Not parallel: a stack of its own, killed or failed over and timed
	// against bounds (package e2e: one stack at a time).
	c := startPGCluster(t)
	master, replica := redistest.Start(t), redistest.Start(t)
	replication, err := pglocal.NewLink(master.Addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(replication.Close)
	// The stack reaches Redis through an address that follows a
	// promotion, as a Service or a virtual IP does.
	front, err := pglocal.NewLink(master.Addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(front.Close)
	ctx := context.Background()
	m := redis.NewClient(&redis.Options{Addr: master.Addr})
	r := redis.NewClient(&redis.Options{Addr: replica.Addr})
	t.Cleanup(func() { m.Close(); r.Close() })
	host, port, _ := net.SplitHostPort(replication.Addr())
	if err := r.Do(ctx, "REPLICAOF", host, port).Err(); err != nil {
		t.Fatal(err)
	}
	s := startStack(t, func(o *devstack.Options) {
		o.DatabaseURL, o.RedisURL, o.RedisClusterURL = c.url, "redis://"+front.Addr()+"/0", ""
	})
	key := s.issue("zone", "--products", "bank", "--source-chains", "84532", "--rate", "1000", "--max-execution-usd", "1000000")
	q := s.post("/v1/bank/payout/quote", key, eur("13.00"))
	if q.Status != 200 {
		t.Fatalf("quote: %d %s", q.Status, q.Body)
	}
	quoteID := quoteIDIn.FindStringSubmatch(q.Body)[1]
	// The replica has the quote's open offer, then stops following.
	if n, err := m.Do(ctx, "WAIT", 1, 5000).Int(); err != nil || n != 1 {
		t.Fatalf("the replica did not take the quote's offer: %d %v", n, err)
	}
	replication.Stall()

	// B's keyed execution: its binding and its claim commit (on a
	// standby), its offer closes on the master, and its payout's insert
	// waits behind a lock the test holds.
	primary, err := pgx.Connect(ctx, c.primary.URL("failover"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { primary.Close(context.Background()) })
	locker, err := pgx.Connect(ctx, c.primary.URL("failover"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { locker.Close(context.Background()) })
	lock, err := locker.Begin(ctx) // ends with the primary
	if err != nil {
		t.Fatal(err)
	}
	if _, err := lock.Exec(ctx, `LOCK TABLE payouts IN SHARE MODE`); err != nil {
		t.Fatal(err)
	}
	bAnswer := make(chan response, 1)
	go func() {
		bAnswer <- s.do("POST", executePath, key, charles.execute(quoteID), "Idempotency-Key", "zone-b")
	}()
	deadline := time.Now().Add(30 * time.Second)
	for {
		var waiting int
		if err := primary.QueryRow(ctx, `SELECT count(*) FROM pg_stat_activity
			WHERE wait_event_type = 'Lock' AND query LIKE '%INSERT INTO payouts%'`).Scan(&waiting); err != nil {
			t.Fatal(err)
		}
		if waiting > 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("B's payout insert never reached the lock")
		}
		time.Sleep(20 * time.Millisecond)
	}
	if marks, err := m.Keys(ctx, "*x:"+quoteID).Result(); err != nil || len(marks) != 1 {
		t.Fatalf("B's closed mark on the master: %v %v", marks, err)
	}

	// The zone is lost: both masters at once.
	c.failover(t)
	master.Stop()
	replication.Cut()
	if err := r.Do(ctx, "REPLICAOF", "NO", "ONE").Err(); err != nil {
		t.Fatal(err)
	}
	front.Retarget(replica.Addr)
	front.Cut()
	if marks, err := r.Keys(ctx, "*x:"+quoteID).Result(); err != nil || len(marks) != 0 {
		t.Fatalf("the promoted replica has B's mark (%v %v): it did not lag", marks, err)
	}
	b := <-bAnswer
	t.Logf("B's call, cut short by the zone's loss: %d %s", b.Status, b.Body)
	if b.Status == 200 && !strings.Contains(b.Body, charles.name) {
		t.Fatalf("B's call was answered another's payout: %s", b.Body)
	}

	// Wait until payouts commit again, on the promoted standby and Redis.
	deadline = time.Now().Add(60 * time.Second)
	for i := 0; ; i++ {
		probe := s.post("/v1/bank/payout/quote", key, eur(fmt.Sprintf("14.%02d", i%100)))
		if probe.Status == 200 {
			if r := s.post(executePath, key, ada.execute(quoteIDIn.FindStringSubmatch(probe.Body)[1])); r.Status == 200 {
				break
			}
		}
		if time.Now().After(deadline) {
			t.Fatal("no payout committed within 60s of the zone's loss")
		}
		time.Sleep(100 * time.Millisecond)
	}
	// C first: the offer is open on the promoted Redis, with no mark of B.
	if r := s.post(executePath, key, eve.execute(quoteID)); r.Status != 409 || !strings.Contains(r.Body, `"code":"quote_already_executed"`) {
		t.Errorf("C on B's quote after the zone's loss: %d %s, want 409 quote_already_executed", r.Status, r.Body)
	}
	// B's retry learns its outcome once the dead attempt's claim lapses.
	deadline = time.Now().Add(30 * time.Second)
	for {
		r := s.do("POST", executePath, key, charles.execute(quoteID), "Idempotency-Key", "zone-b")
		if r.Status == 409 && strings.Contains(r.Body, `"code":"idempotency_in_progress"`) && time.Now().Before(deadline) {
			time.Sleep(200 * time.Millisecond)
			continue
		}
		if r.Status != 200 || !strings.Contains(r.Body, charles.name) {
			t.Fatalf("B's keyed retry after the zone's loss: %d %s, want B's payout", r.Status, r.Body)
		}
		break
	}
	if r := s.post(executePath, key, eve.execute(quoteID)); r.Status != 409 || !strings.Contains(r.Body, `"code":"quote_already_executed"`) {
		t.Errorf("C on B's quote after B's payout: %d %s, want 409 quote_already_executed", r.Status, r.Body)
	}
}
