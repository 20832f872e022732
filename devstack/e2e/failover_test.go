package e2e

import (
	"context"
	"fmt"
	"io"
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

	"github.com/partnerpay/api/devstack"
	"github.com/partnerpay/api/pkg/pglocal"
)

// The payout load of the failover tests: workers quote distinct amounts
// and execute each quote, to one of two beneficiaries, a third of them
// with an Idempotency-Key, and every fifth one twice at once for both
// beneficiaries. Every acknowledged (200) payout is kept for the checks.

type beneficiary struct{ name, iban string }

var (
	ada     = beneficiary{"Ada Lovelace", "DE89370400440532013000"}
	charles = beneficiary{"Charles Babbage", "FR1420041010050500013M02606"}
	eve     = beneficiary{"Eve Mallory", "GB29NWBK60161331926819"}
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
	l.calls = append(l.calls, call{path: path, start: start, ok: status == 200 || status == 409})
	l.mu.Unlock()
	return status, answer, h
}

func startLoad(t *testing.T, s *stack, workers int) *payoutLoad {
	l := &payoutLoad{s: s, stop: make(chan struct{})}
	l.key = s.issue("loadkey", "--products", "bank", "--source-chains", "84532", "--rate", "100000", "--max-execution-usd", "1000000")
	for range workers {
		l.wg.Add(1)
		go func() {
			defer l.wg.Done()
			for {
				select {
				case <-l.stop:
					return
				default:
				}
				l.once(t)
			}
		}()
	}
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

func (l *payoutLoad) halt() {
	close(l.stop)
	l.wg.Wait()
}

// waitAcks waits until the load has acknowledged n payouts.
func (l *payoutLoad) waitAcks(t *testing.T, n int) {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for time.Now().Before(deadline) {
		l.mu.Lock()
		got := len(l.acks)
		l.mu.Unlock()
		if got >= n {
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatalf("the load acknowledged fewer than %d payouts in 60s", n)
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

// A primary with a synchronous standby; the primary is killed (SIGKILL)
// under payout load and the standby promoted: no acknowledged payout is
// lost, none is executed again or to anyone else, and calls fail for no
// longer than the promotion plus 5 s.
func TestPayoutsSurviveAPostgreSQLFailover(t *testing.T) {
	dir, err := pglocal.TempDir("pgfailover-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	primary, err := pglocal.New(pglocal.Options{Dir: filepath.Join(dir, "primary"),
		Settings: []string{"synchronous_standby_names=*", "synchronous_commit=on"}})
	if err != nil {
		t.Fatal(err)
	}
	if err := primary.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(primary.Kill)
	standby, err := primary.Standby(filepath.Join(dir, "standby"), nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(standby.Kill)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := primary.WaitStreaming(ctx, 1); err != nil {
		t.Fatal(err)
	}
	if err := primary.CreateDatabase(ctx, "failover"); err != nil {
		t.Fatal(err)
	}
	url := "postgres://postgres@" + primary.Addr() + "," + standby.Addr() + "/failover?sslmode=disable&target_session_attrs=read-write"
	s := startStack(t, func(o *devstack.Options) { o.DatabaseURL = url })
	l := startLoad(t, s, 6)
	l.waitAcks(t, 40)

	killed := time.Now()
	primary.Kill()
	if err := standby.Promote(); err != nil {
		t.Fatal(err)
	}
	promoted := time.Now()
	time.Sleep(6 * time.Second)
	l.halt()
	t.Logf("promotion took %.2fs after the kill", promoted.Sub(killed).Seconds())
	lost, duplicated := l.check(t)
	l.report(t, "PostgreSQL primary SIGKILL, standby promoted", executePath, killed, promoted, lost, duplicated)
}

// Redis is killed (SIGKILL) under payout load: one node restarted, or, in
// the Redis Cluster pass, one master whose replica the cluster promotes.
// Redis holds only quote offers, so no acknowledged payout is lost or
// executed again, and calls that need Redis work again within 5 s of
// Redis being back.
func TestPayoutsSurviveARedisFailure(t *testing.T) {
	s := startStack(t)
	l := startLoad(t, s, 6)
	l.waitAcks(t, 40)
	var ended time.Time
	fault := ""
	began := time.Now()
	if onCluster() {
		fault = "Redis Cluster master SIGKILL, replica promoted"
		dead, err := sharedCluster.KillMaster()
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			dead.Restart() // back as a replica, for the next tests
			if err := sharedCluster.WaitOK(); err != nil {
				t.Error(err)
			}
		})
		if err := sharedCluster.WaitPromoted(dead, 30*time.Second); err != nil {
			t.Fatal(err)
		}
		ended = time.Now()
	} else {
		fault = "Redis SIGKILL, restarted"
		s.redis.Stop()
		time.Sleep(3 * time.Second)
		s.redis.Restart()
		ended = time.Now()
	}
	time.Sleep(6 * time.Second)
	l.halt()
	lost, duplicated := l.check(t)
	l.report(t, fault, "/v1/bank/payout/quote", began, ended, lost, duplicated)
}
