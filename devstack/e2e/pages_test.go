package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"sigs.k8s.io/yaml"

	"github.com/partnerpay/api/testkit/pgtest"
)

// pager is the webhook every Alertmanager receiver of the test posts to: it
// notes when each alert reached which receiver, firing and resolved.
type pager struct {
	mu       sync.Mutex
	first    map[string]time.Time   // "receiver alertname route|upstream|job" → first firing arrival
	firing   map[string][]time.Time // every firing arrival
	resolved map[string]time.Time   // first "resolved" after a firing one
	resolves map[string]int         // every "resolved" after a firing one
}

func newPager() *pager {
	return &pager{first: map[string]time.Time{}, firing: map[string][]time.Time{}, resolved: map[string]time.Time{}, resolves: map[string]int{}}
}

func (p *pager) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	var msg struct {
		Alerts []struct {
			Status string            `json:"status"`
			Labels map[string]string `json:"labels"`
		} `json:"alerts"`
	}
	if err := json.NewDecoder(r.Body).Decode(&msg); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	now := time.Now()
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, a := range msg.Alerts {
		what := a.Labels["route"] // what the alert is about: a route, a service or a job
		if what == "" {
			what = a.Labels["upstream"]
		}
		if what == "" {
			what = a.Labels["job"]
		}
		k := strings.TrimPrefix(r.URL.Path, "/") + " " + a.Labels["alertname"] + " " + what
		if a.Status != "firing" {
			if len(p.firing[k]) == 0 {
				continue
			}
			if _, ok := p.resolved[k]; !ok {
				p.resolved[k] = now
			}
			p.resolves[k]++
			continue
		}
		if _, ok := p.first[k]; !ok {
			p.first[k] = now
		}
		p.firing[k] = append(p.firing[k], now)
	}
}

func (p *pager) arrived(k string) (time.Time, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	at, ok := p.first[k]
	return at, ok
}

func (p *pager) resolvedAt(k string) (time.Time, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	at, ok := p.resolved[k]
	return at, ok
}

// notifications counts the firing and the resolved notifications of k.
func (p *pager) notifications(k string) [2]int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return [2]int{len(p.firing[k]), p.resolves[k]}
}

// firingAfter lists the firing notifications of alertname that arrived
// after t.
func (p *pager) firingAfter(alertname string, t time.Time) []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	var out []string
	for k, ats := range p.firing {
		if !strings.Contains(k, " "+alertname+" ") {
			continue
		}
		for _, at := range ats {
			if at.After(t) {
				out = append(out, k+" at "+at.Format(time.RFC3339))
			}
		}
	}
	return out
}

// startAlertmanager runs a real Alertmanager with the repository's routing
// (deploy/alertmanager/alertmanager.yml), each receiver given a webhook to
// p at /<receiver>.
func startAlertmanager(t *testing.T, p *pager) string {
	t.Helper()
	bin, err := exec.LookPath("prometheus-alertmanager")
	if err != nil {
		if bin, err = exec.LookPath("alertmanager"); err != nil {
			t.Fatal("alertmanager is not installed (Debian's prometheus-alertmanager package; .ci/run installs it)")
		}
	}
	b, err := os.ReadFile("../../deploy/alertmanager/alertmanager.yml")
	if err != nil {
		t.Fatal(err)
	}
	var cfg map[string]any
	if err := yaml.Unmarshal(b, &cfg); err != nil {
		t.Fatal(err)
	}
	hook := httptest.NewServer(p)
	t.Cleanup(hook.Close)
	receivers := cfg["receivers"].([]any)
	for _, r := range receivers {
		r := r.(map[string]any)
		r["webhook_configs"] = []any{map[string]any{"url": hook.URL + "/" + r["name"].(string), "send_resolved": true}}
	}
	out, err := yaml.Marshal(cfg)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "alertmanager.yml"), out, 0o600); err != nil {
		t.Fatal(err)
	}
	return runReady(t, "alertmanager", bin, "--config.file="+filepath.Join(dir, "alertmanager.yml"),
		"--storage.path="+filepath.Join(dir, "data"), "--cluster.listen-address=", "--log.level=warn")
}

// TestPagesArriveWithinMinutes: through a real Prometheus and the
// repository's rules and Alertmanager routing, under steady partner
// traffic, a killed service, a hung (SIGSTOPped) one and one with no scrape
// target at all each reach the pager, and the watchdog reaches its dead
// man's switch. The scrape and evaluation interval is 1 s here, so the
// rules' own `for` durations dominate; E2E_PAGE_INTERVAL=15s runs it as
// deployed (docs/operating.md's time-to-page figures).
func TestPagesArriveWithinMinutes(t *testing.T) {
	// Not parallel: a stack of its own, timed against bounds (package e2e).
	if onCluster() {
		t.Skip("the rules do not depend on the Redis store; the single-node run covers this")
	}
	interval := time.Second
	if v := os.Getenv("E2E_PAGE_INTERVAL"); v != "" {
		var err error
		if interval, err = time.ParseDuration(v); err != nil {
			t.Fatal(err)
		}
	}
	s := startStack(t)
	key := s.issue("acme", "--products", "bank,fiat,card", "--source-chains", "84532", "--destination-chains", "84532", "--rate", "1000",
		"--max-execution-usd", "1000000")
	p := newPager()
	am := startAlertmanager(t, p)
	promStart := time.Now()
	prom := startPrometheusWith(t, s, promOptions{interval: interval, alertmanager: am, without: map[string]bool{"consent": true}})

	// Steady partner traffic on payout's and fiat's routes and the reads.
	ctx, stop := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	defer func() { stop(); wg.Wait() }()
	for _, call := range []struct{ method, path, body string }{
		{"POST", "/v1/bank/payout/quote", fmt.Sprintf(eurQuote, "10")},
		{"POST", "/v1/fiat/status", `{"accountId":"acc_00000000000000000000000000","virtualAccountId":"va_00000000000000000000000000"}`},
		{"GET", "/v1/config", ""},
		// A card order: a call to the bank provider, from orders.
		{"POST", "/v1/orders", `{"direction":"buy","cryptoCurrency":"USDC","chain":84532,"fiatCurrency":"EUR","country":"DE","fiatAmount":"100","walletAddress":"` + orderWallet + `"}`},
	} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c := &http.Client{Timeout: 30 * time.Second}
			for ctx.Err() == nil {
				req, _ := http.NewRequestWithContext(ctx, call.method, s.GatewayURL+call.path, strings.NewReader(call.body))
				req.Header.Set("Authorization", "Bearer "+key)
				if call.body != "" {
					req.Header.Set("Content-Type", "application/json")
				}
				if resp, err := c.Do(req); err == nil {
					resp.Body.Close()
				}
				select {
				case <-ctx.Done():
				case <-time.After(100 * time.Millisecond):
				}
			}
		}()
	}

	waitPage := func(k string, since time.Time, within time.Duration) time.Duration {
		t.Helper()
		deadline := since.Add(within)
		for {
			if at, ok := p.arrived(k); ok && !at.After(deadline) {
				return at.Sub(since)
			}
			if time.Now().After(deadline) {
				break
			}
			time.Sleep(200 * time.Millisecond)
		}
		p.mu.Lock()
		got := fmt.Sprint(p.first)
		p.mu.Unlock()
		var firing []string
		for _, api := range []string{"http://" + am + "/api/v2/alerts", prom.base + "/api/v1/alertmanagers", prom.base + "/api/v1/alerts"} {
			if resp, err := client.Get(api); err == nil {
				b, _ := io.ReadAll(io.LimitReader(resp.Body, 4<<10))
				resp.Body.Close()
				firing = append(firing, string(b))
			}
		}
		t.Fatalf("%q did not arrive within %s; the pager got %s; the alerts: %s", k, within, got, strings.Join(firing, "\n"))
		return 0
	}
	// A few scrapes of healthy traffic first.
	deadline := time.Now().Add(30*time.Second + 5*interval)
	for {
		n, err := prom.query(`count_over_time(up{job="gateway"}[1h]) >= 5`)
		if err == nil && n == 1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the gateway was not scraped 5 times: %v", err)
		}
		time.Sleep(200 * time.Millisecond)
	}

	fault := time.Now()
	payout, fiat, bank := s.Services["payout"], s.Services["fiat"], s.Services["sandboxbank"]
	if err := payout.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	if err := fiat.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	defer fiat.Signal(syscall.SIGCONT)
	bank.Stop() // every call orders makes to the provider fails from now on

	// The rules wait a minute; a scrape and an evaluation come on top, and
	// Alertmanager's group_wait (10 s).
	within := 90*time.Second + 6*interval
	killed := waitPage("page UpstreamDown payout", fault, within)
	hung := waitPage("page UpstreamDown fiat", fault, within)
	missing := waitPage("page ScrapeTargetMissing consent", promStart, within)
	deadBank := waitPage("page BankProviderFailing ", fault, 3*time.Minute)
	// Prometheus sends a firing alert again every minute; its very first
	// send can precede its discovery of Alertmanager.
	waitPage("watchdog Watchdog ", promStart, time.Minute+30*time.Second+2*interval)

	// Everything comes back. Each page resolves within two minutes, and
	// nothing that was held back pages now: the routes of the services
	// that were down, and their circuits, stay quiet.
	if err := payout.Start(); err != nil {
		t.Fatal(err)
	}
	fiat.Signal(syscall.SIGCONT)
	if err := bank.Start(); err != nil {
		t.Fatal(err)
	}
	back := time.Now()
	for _, p := range []string{"payout", "fiat", "sandboxbank"} {
		if err := s.Services[p].WaitHealthy(context.Background(), 30*time.Second); err != nil {
			t.Fatalf("%s did not come back: %v", p, err)
		}
	}
	waitResolved := func(k string) time.Duration {
		t.Helper()
		deadline := back.Add(2*time.Minute + 2*interval)
		for {
			if at, ok := p.resolvedAt(k); ok {
				return at.Sub(back)
			}
			if time.Now().After(deadline) {
				t.Fatalf("%q was not resolved within 2 minutes of recovery", k)
			}
			time.Sleep(200 * time.Millisecond)
		}
	}
	killedResolved := waitResolved("page UpstreamDown payout")
	hungResolved := waitResolved("page UpstreamDown fiat")
	bankResolved := waitResolved("page BankProviderFailing ")
	// A little longer than a route alert's `for` and the page route's
	// group_interval: what was held back would have arrived by now.
	quiet := time.Now().Add(time.Minute + 30*time.Second)
	for time.Now().Before(quiet) {
		time.Sleep(time.Second)
	}
	for _, alert := range []string{"PartnerAPIRouteFailing", "GatewayUpstreamCircuitOpen", "PartnerAPIRouteErrorBudgetSlowBurn"} {
		if late := p.firingAfter(alert, back); len(late) > 0 {
			t.Errorf("%s paged after the services were back: %v", alert, late)
		}
	}
	// One fault, one page: the routes the three faults broke (payout's and
	// fiat's, and orders' card orders through the dead bank) and the
	// gateway-wide burn never paged; each fault's page was sent once,
	// then resolved once, and nothing after.
	for _, alert := range []string{"PartnerAPIRouteFailing", "PartnerAPIErrorBudgetFastBurn", "PartnerAPILatencyBudgetFastBurn", "GatewayUpstreamCircuitOpen"} {
		if extra := p.firingAfter(alert, fault); len(extra) > 0 {
			t.Errorf("%s paged for a fault another page covers: %v", alert, extra)
		}
	}
	for _, k := range []string{"page BankProviderFailing ", "page UpstreamDown payout", "page UpstreamDown fiat"} {
		if n := p.notifications(k); n != [2]int{1, 1} {
			t.Errorf("%q: %d firing and %d resolved notifications, want one of each", k, n[0], n[1])
		}
	}
	t.Logf("at a %s interval: time to page: payout killed %.0fs, fiat hung %.0fs, the bank dead %.0fs, consent without a target %.0fs after Prometheus started; "+
		"time to resolved after recovery: payout %.0fs, fiat %.0fs, the bank %.0fs",
		interval, killed.Seconds(), hung.Seconds(), deadBank.Seconds(), missing.Seconds(),
		killedResolved.Seconds(), hungResolved.Seconds(), bankResolved.Seconds())

	// PostgreSQL out of reach of every service for 61 s (and until its page
	// arrived, at a slower interval): one page, DatabaseUnavailable, that
	// names it, sent once and resolved once. The routes it breaks (fiat's
	// status, orders' card orders) and the gateway-wide burn never page,
	// during the outage or after it.
	pg := pgtest.Server(t)
	dbFault := time.Now()
	pg.Stop()
	restarted := false
	defer func() {
		if !restarted {
			_ = pg.Start()
		}
	}()
	dbPage := waitPage("page DatabaseUnavailable ", dbFault, 30*time.Second+15*time.Second+6*interval)
	for time.Since(dbFault) < 61*time.Second {
		time.Sleep(200 * time.Millisecond) // the outage lasts 61 s: the fault's length, not a wait for an event
	}
	if err := pg.Start(); err != nil {
		t.Fatal(err)
	}
	restarted = true
	back = time.Now()
	dbResolved := waitResolved("page DatabaseUnavailable ")
	quiet = time.Now().Add(time.Minute + 30*time.Second)
	for time.Now().Before(quiet) {
		time.Sleep(time.Second)
	}
	for _, alert := range []string{"PartnerAPIRouteFailing", "PartnerAPIErrorBudgetFastBurn", "PartnerAPILatencyBudgetFastBurn", "GatewayUpstreamCircuitOpen", "UpstreamDown", "WorkerStalled", "RedisUnavailable"} {
		if extra := p.firingAfter(alert, dbFault); len(extra) > 0 {
			t.Errorf("%s paged for the database's outage: %v", alert, extra)
		}
	}
	if n := p.notifications("page DatabaseUnavailable "); n != [2]int{1, 1} {
		t.Errorf("DatabaseUnavailable: %d firing and %d resolved notifications, want one of each", n[0], n[1])
	}
	t.Logf("PostgreSQL out of reach for 61 s: paged after %.0fs, resolved %.0fs after it was back", dbPage.Seconds(), dbResolved.Seconds())
}
