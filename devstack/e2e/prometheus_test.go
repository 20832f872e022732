package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// prometheusAPI is a Prometheus server's HTTP API.
type prometheusAPI struct {
	t    *testing.T
	base string
}

// promOptions: how the test's Prometheus runs.
type promOptions struct {
	interval     time.Duration   // scrape and evaluation interval; 1 s when zero
	alertmanager string          // the Alertmanager it sends alerts to, if any
	without      map[string]bool // jobs it has no target for
}

// startPrometheus runs a real Prometheus that scrapes every service of s
// each second under its job name (as deploy/prometheus/prometheus.yml
// does) and evaluates the repository's rules each second.
func startPrometheus(t *testing.T, s *stack) *prometheusAPI {
	t.Helper()
	return startPrometheusWith(t, s, promOptions{})
}

func startPrometheusWith(t *testing.T, s *stack, o promOptions) *prometheusAPI {
	t.Helper()
	if o.interval == 0 {
		o.interval = time.Second
	}
	bin, err := exec.LookPath("prometheus")
	if err != nil {
		t.Fatal("prometheus is not installed (Debian's prometheus package; .ci/run installs it)")
	}
	rules, err := filepath.Abs("../../deploy/prometheus/rules/partner-api.yml")
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	var cfg strings.Builder
	fmt.Fprintf(&cfg, "global: {scrape_interval: %s, evaluation_interval: %[1]s}\nrule_files: [%q]\n", o.interval, rules)
	if o.alertmanager != "" {
		fmt.Fprintf(&cfg, "alerting: {alertmanagers: [{static_configs: [{targets: [%q]}]}]}\n", o.alertmanager)
	}
	cfg.WriteString("scrape_configs:\n")
	for _, svc := range services {
		if o.without[svc] {
			continue
		}
		fmt.Fprintf(&cfg, "  - job_name: %s\n    static_configs: [{targets: [%q]}]\n", svc, s.Services[svc].AdminAddr)
	}
	if err := os.WriteFile(filepath.Join(dir, "prometheus.yml"), []byte(cfg.String()), 0o600); err != nil {
		t.Fatal(err)
	}
	addr := runReady(t, "prometheus", bin, "--config.file="+filepath.Join(dir, "prometheus.yml"),
		"--storage.tsdb.path="+filepath.Join(dir, "data"), "--log.level=warn")
	return &prometheusAPI{t: t, base: "http://" + addr}
}

// runReady runs a server of the Prometheus family (Prometheus,
// Alertmanager) on a free address with args, ends it with the test (its
// log shown if the test failed), and waits for its /-/ready.
func runReady(t *testing.T, name, bin string, args ...string) (addr string) {
	t.Helper()
	addr = freeAddrs(t, 1)[0]
	ctx, cancel := context.WithCancel(context.Background())
	cmd := exec.CommandContext(ctx, bin, append(args, "--web.listen-address="+addr)...)
	var logs syncBuffer
	cmd.Stdout, cmd.Stderr = &logs, &logs
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cancel()
		_ = cmd.Wait()
		if t.Failed() {
			t.Logf("%s logs:\n%s", name, logs.String())
		}
	})
	deadline := time.Now().Add(20 * time.Second)
	for {
		if resp, err := client.Get("http://" + addr + "/-/ready"); err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return addr
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s not ready within 20s:\n%s", name, logs.String())
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// get calls an API path and decodes its data; a failed call is an error.
func (p *prometheusAPI) get(path string, q url.Values, data any) error {
	resp, err := client.Get(p.base + path + "?" + q.Encode())
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	var out struct {
		Status    string          `json:"status"`
		Error     string          `json:"error"`
		ErrorType string          `json:"errorType"`
		Data      json.RawMessage `json:"data"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&out); err != nil {
		return err
	}
	if out.Status != "success" {
		return fmt.Errorf("%s: %s", out.ErrorType, out.Error)
	}
	return json.Unmarshal(out.Data, data)
}

// query evaluates expr now and returns how many series it answered.
func (p *prometheusAPI) query(expr string) (int, error) {
	var data struct {
		Result []json.RawMessage `json:"result"`
	}
	err := p.get("/api/v1/query", url.Values{"query": {expr}}, &data)
	return len(data.Result), err
}

// TestARealPrometheusEvaluatesEveryRuleAndPanel: what an SRE loads (the
// alert rules, the Grafana dashboard) works against what the services
// export: every rule evaluates without error, every dashboard query runs
// and answers data.
func TestARealPrometheusEvaluatesEveryRuleAndPanel(t *testing.T) {
	if onCluster() {
		t.Skip("the series do not depend on the store; the single-node run covers this")
	}
	s := startStack(t)
	prom := startPrometheus(t, s)
	key := s.issue("acme", "--products", "bank,fiat,deposit,card", "--source-chains", "84532", "--destination-chains", "84532",
		"--tokens", "84532:"+baseSepoliaUSDC, "--rate", "1000")
	slow := s.issue("slow", "--products", "bank", "--source-chains", "84532", "--rate", "1")

	// Traffic of every kind, over several scrapes so that rates have two
	// samples: quotes, a 429, a 404, onboarding (consent, the bank provider).
	quote := `{"cryptoCurrency":"USDC","chain":84532,"fiatCurrency":"EUR","country":"DE","cryptoAmount":"10"}`
	for i := range 4 {
		s.post("/v1/bank/payout/quote", key, quote)
		s.get("/v1/limits", slow)
		s.get("/v1/limits", slow)
		s.get("/v1/no-such-thing", key)
		decodeOK(t, s.post("/v1/fiat/accounts", key, onboardBody(fmt.Sprintf("ada%d@example.com", i))))
		decodeOK(t, s.post("/v1/orders", key, `{"direction":"buy","cryptoCurrency":"USDC","chain":84532,"fiatCurrency":"EUR","country":"DE","fiatAmount":"100","walletAddress":"`+orderWallet+`"}`))
		time.Sleep(1200 * time.Millisecond)
	}

	// Every target up and scraped at least three times.
	deadline := time.Now().Add(15 * time.Second)
	for {
		n, err := prom.query(`count_over_time(up{job=~"` + strings.Join(services, "|") + `"}[1m]) >= 3 and up == 1`)
		if err == nil && n == len(services) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("targets up and scraped 3 times: %d of %d (%v)", n, len(services), err)
		}
		time.Sleep(250 * time.Millisecond)
	}

	t.Run("every rule evaluates without error", func(t *testing.T) {
		type rule struct {
			Name           string `json:"name"`
			Health         string `json:"health"`
			LastError      string `json:"lastError"`
			LastEvaluation string `json:"lastEvaluation"`
		}
		var data struct {
			Groups []struct {
				Name  string `json:"name"`
				Rules []rule `json:"rules"`
			} `json:"groups"`
		}
		var n int
		deadline := time.Now().Add(10 * time.Second)
		for {
			if err := prom.get("/api/v1/rules", nil, &data); err != nil {
				t.Fatal(err)
			}
			n = 0
			unevaluated := 0
			for _, g := range data.Groups {
				for _, r := range g.Rules {
					n++
					if strings.HasPrefix(r.LastEvaluation, "0001-") {
						unevaluated++
					}
				}
			}
			if unevaluated == 0 || time.Now().After(deadline) {
				break
			}
			time.Sleep(250 * time.Millisecond)
		}
		if n < 20 {
			t.Fatalf("Prometheus loaded %d rules, want the file's 22", n)
		}
		for _, g := range data.Groups {
			for _, r := range g.Rules {
				if r.Health != "ok" || r.LastError != "" {
					t.Errorf("%s/%s: health %q, error %q", g.Name, r.Name, r.Health, r.LastError)
				}
			}
		}
	})

	t.Run("every dashboard query answers data", func(t *testing.T) {
		b, err := os.ReadFile("../../deploy/grafana/dashboards/partner-api.json")
		if err != nil {
			t.Fatal(err)
		}
		var dash struct {
			Panels []struct {
				Title   string `json:"title"`
				Targets []struct {
					Expr string `json:"expr"`
				} `json:"targets"`
			} `json:"panels"`
		}
		if err := json.Unmarshal(b, &dash); err != nil {
			t.Fatal(err)
		}
		queries := 0
		for _, p := range dash.Panels {
			for _, tg := range p.Targets {
				queries++
				// Grafana's $__rate_interval is at least four scrapes.
				expr := strings.ReplaceAll(tg.Expr, "$__rate_interval", "1m")
				n, err := prom.query(expr)
				switch {
				case err != nil:
					t.Errorf("panel %q: %v\n  %s", p.Title, err, expr)
				case n == 0:
					t.Errorf("panel %q: no data\n  %s", p.Title, expr)
				}
			}
		}
		if queries < 20 {
			t.Errorf("the dashboard has %d queries; it was not read", queries)
		}
	})
}
