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
)

// pager is the webhook every Alertmanager receiver of the test posts to: it
// notes when each alert first reached which receiver.
type pager struct {
	mu    sync.Mutex
	first map[string]time.Time // "receiver alertname route|upstream|job" → first arrival
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
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, a := range msg.Alerts {
		if a.Status != "firing" {
			continue
		}
		what := a.Labels["route"] // what the alert is about: a route, a service or a job
		if what == "" {
			what = a.Labels["upstream"]
		}
		if what == "" {
			what = a.Labels["job"]
		}
		k := strings.TrimPrefix(r.URL.Path, "/") + " " + a.Labels["alertname"] + " " + what
		if _, ok := p.first[k]; !ok {
			p.first[k] = time.Now()
		}
	}
}

func (p *pager) arrived(k string) (time.Time, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	at, ok := p.first[k]
	return at, ok
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
		r["webhook_configs"] = []any{map[string]any{"url": hook.URL + "/" + r["name"].(string), "send_resolved": false}}
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
// deployed (the README's time-to-page figures).
func TestPagesArriveWithinMinutes(t *testing.T) {
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
	key := s.issue("acme", "--products", "bank,fiat", "--source-chains", "84532", "--rate", "1000")
	p := &pager{first: map[string]time.Time{}}
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
	if err := s.Services["payout"].Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	fiat := s.Services["fiat"]
	if err := fiat.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	defer fiat.Signal(syscall.SIGCONT)

	// The rules wait a minute; a scrape and an evaluation come on top, and
	// Alertmanager's group_wait (10 s).
	within := 90*time.Second + 6*interval
	killed := waitPage("page UpstreamDown payout", fault, within)
	hung := waitPage("page UpstreamDown fiat", fault, within)
	missing := waitPage("page ScrapeTargetMissing consent", promStart, within)
	circuit := waitPage("page GatewayUpstreamCircuitOpen payout", fault, within)
	// Prometheus sends a firing alert again every minute; its very first
	// send can precede its discovery of Alertmanager.
	waitPage("watchdog Watchdog ", promStart, time.Minute+30*time.Second+2*interval)
	t.Logf("time to page at a %s interval: payout killed %.0fs (its circuit %.0fs), fiat hung %.0fs, consent without a target %.0fs after Prometheus started",
		interval, killed.Seconds(), circuit.Seconds(), hung.Seconds(), missing.Seconds())
}
