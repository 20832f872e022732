// Command dashboard writes the Grafana dashboard of the partner API
// (deploy/grafana/dashboards/partner-api.json): an overview (targets up,
// alerts, deployed builds), the SLOs (burn rates from the recording rules,
// errors and p99 by route), one row per service with request rate, error
// ratio and latency quantiles, and rows for the gateway's rate limits, keys
// and upstreams, the processes, PostgreSQL and Redis, the services'
// operations and the bank provider. Every panel reads the Prometheus the
// datasource variable names. The JSON is generated so that
// it stays reviewable here, as code: `make dashboards` rewrites it, and a
// test fails when the file and this program disagree.
package main

import (
	"encoding/json"
	"fmt"
	"os"
	"slices"
	"strings"

	"github.com/partnerpay/api/devstack"
)

// DatasourceUID is the Prometheus datasource's uid in the provisioning file:
// the default of the dashboard's datasource variable, which every panel
// uses (an SRE with another Prometheus picks it at the top).
const DatasourceUID = "partnerapi-prometheus"

// Services are the scrape jobs, in the order of the rows: the binaries from
// the edge inwards (devstack.Binaries in reverse start order).
var Services = func() []string {
	names := devstack.Names()
	slices.Reverse(names)
	return names
}()

type target struct {
	Expr    string `json:"expr"`
	Legend  string `json:"legendFormat"`
	RefID   string `json:"refId"`
	Instant bool   `json:"instant,omitempty"`
	Format  string `json:"format,omitempty"`
}

type gridPos struct {
	H int `json:"h"`
	W int `json:"w"`
	X int `json:"x"`
	Y int `json:"y"`
}

type panel struct {
	ID          int            `json:"id"`
	Type        string         `json:"type"`
	Title       string         `json:"title"`
	Description string         `json:"description,omitempty"`
	GridPos     gridPos        `json:"gridPos"`
	Datasource  map[string]any `json:"datasource,omitempty"`
	Targets     []target       `json:"targets,omitempty"`
	FieldConfig map[string]any `json:"fieldConfig,omitempty"`
	Options     map[string]any `json:"options,omitempty"`
	Collapsed   *bool          `json:"collapsed,omitempty"`
	Panels      []panel        `json:"panels,omitempty"`
}

type builder struct {
	panels []panel
	id, y  int
}

func (b *builder) row(title string) {
	b.id++
	collapsed := false
	b.panels = append(b.panels, panel{ID: b.id, Type: "row", Title: title, GridPos: gridPos{H: 1, W: 24, Y: b.y}, Collapsed: &collapsed, Panels: []panel{}})
	b.y++
}

// series adds a time series panel; width w of 24, placed at x on the current line.
func (b *builder) series(x, w int, title, desc, unit string, exprs ...[2]string) {
	b.add(x, w, 8, "timeseries", title, desc,
		map[string]any{"defaults": map[string]any{"unit": unit, "min": 0}, "overrides": []any{}},
		map[string]any{"legend": map[string]any{"displayMode": "list", "placement": "bottom", "showLegend": true}, "tooltip": map[string]any{"mode": "multi", "sort": "desc"}},
		false, exprs...)
}

func sel(job string, extra string) string {
	s := `job="` + job + `",route!="GET /health"`
	if extra != "" {
		s += "," + extra
	}
	return "{" + s + "}"
}

// Operated are the services that report operations
// (partnerapi_<service>_operations_total).
var Operated = []string{"payout", "fiat", "consent", "orders"}

// stat adds a single-value panel; table adds a table of an instant query.
func (b *builder) stat(x, w, h int, title, desc string, thresholds []any, exprs ...[2]string) {
	b.add(x, w, h, "stat", title, desc, map[string]any{
		"defaults":  map[string]any{"thresholds": map[string]any{"mode": "absolute", "steps": thresholds}, "mappings": []any{}},
		"overrides": []any{},
	}, map[string]any{"reduceOptions": map[string]any{"calcs": []string{"lastNotNull"}, "fields": "", "values": false},
		"colorMode": "background", "graphMode": "none", "textMode": "value_and_name", "orientation": "horizontal"}, false, exprs...)
}

func (b *builder) table(x, w, h int, title, desc string, exprs ...[2]string) {
	b.add(x, w, h, "table", title, desc, map[string]any{"defaults": map[string]any{}, "overrides": []any{}},
		map[string]any{"showHeader": true}, true, exprs...)
}

func (b *builder) add(x, w, h int, typ, title, desc string, field, opts map[string]any, instant bool, exprs ...[2]string) {
	b.id++
	p := panel{
		ID: b.id, Type: typ, Title: title, Description: desc,
		GridPos:     gridPos{H: h, W: w, X: x, Y: b.y},
		Datasource:  map[string]any{"type": "prometheus", "uid": "${datasource}"},
		FieldConfig: field, Options: opts,
	}
	for i, e := range exprs {
		t := target{Expr: e[0], Legend: e[1], RefID: string(rune('A' + i))}
		if instant {
			t.Instant, t.Format = true, "table"
		}
		p.Targets = append(p.Targets, t)
	}
	b.panels = append(b.panels, p)
	if x+w >= 24 {
		b.y += h
	}
}

// jobs matches every service's scrape job.
func jobs() string { return `job=~"` + strings.Join(Services, "|") + `"` }

var (
	redGreen = []any{map[string]any{"color": "red", "value": nil}, map[string]any{"color": "green", "value": 1}}
	greenRed = []any{map[string]any{"color": "green", "value": nil}, map[string]any{"color": "red", "value": 1}}
)

// Dashboard builds the dashboard: first what an on-call SRE looks at
// (targets up, alerts, what is deployed), then a row per service, then the
// gateway's limits and upstreams, the services' operations and the bank
// provider.
func Dashboard() map[string]any {
	b := &builder{}
	b.row("overview")
	b.stat(0, 8, 6, "Targets up", "Each service's scrape: green when Prometheus reaches its admin port.", redGreen,
		[2]string{`min by (job) (up{` + jobs() + `})`, "{{job}}"})
	b.stat(8, 4, 6, "Alerts firing", "Alerts of the partner API rules now firing; the table lists them.", greenRed,
		[2]string{`count(ALERTS{alertstate="firing"}) or on() vector(0)`, "firing"})
	b.table(12, 12, 6, "Alerts", "Firing and pending alerts, by severity. Each alert's runbook_url leads to its section of docs/runbook.md.",
		[2]string{`sum by (alertname, severity, alertstate) (ALERTS) or on() label_replace(vector(0), "alertname", "none", "", "")`, ""})
	b.table(0, 24, 5, "Deployed builds", "The version and revision each running process was built from (partnerapi_build_info).",
		[2]string{`count by (service, version, revision) (partnerapi_build_info{` + jobs() + `})`, ""})
	b.row("SLOs: availability 99.9% without a 5xx, latency 99% within 250 ms (measured at the gateway)")
	b.series(0, 8, "Error budget burn rate", "How fast the gateway spends its error budget (5xx ratio / 0.1%), from the SLO recording rules: 1 spends a 30-day budget in 30 days; the pages fire above 14.4 (1 h with 5 min) and 6 (6 h with 30 min).", "none",
		[2]string{`gateway:http_errors:ratio_rate5m / 0.001`, "5 min"},
		[2]string{`gateway:http_errors:ratio_rate1h / 0.001`, "1 h"},
		[2]string{`gateway:http_errors:ratio_rate6h / 0.001`, "6 h"})
	b.series(8, 8, "Latency budget burn rate", "How fast the gateway spends its latency budget (share over 250 ms / 1%), from the SLO recording rules.", "none",
		[2]string{`gateway:http_slow:ratio_rate5m / 0.01`, "5 min"},
		[2]string{`gateway:http_slow:ratio_rate1h / 0.01`, "1 h"},
		[2]string{`gateway:http_slow:ratio_rate6h / 0.01`, "6 h"})
	b.series(16, 8, "5xx ratio by route", "Each route's share of 5xx over 5 minutes (route:http_errors:ratio_rate5m), the ratio PartnerAPIRouteFailing watches.", "percentunit",
		[2]string{`route:http_errors:ratio_rate5m`, "{{route}}"})
	b.series(0, 12, "p99 latency by route", "Time for the gateway to answer, 99th percentile, by route.", "s",
		[2]string{`histogram_quantile(0.99, sum by (le, route) (rate(partnerapi_http_request_duration_seconds_bucket` + sel("gateway", "") + `[$__rate_interval])))`, "{{route}}"})
	b.series(12, 12, "5xx per second by route", "Server errors the gateway answered, by route and code.", "reqps",
		[2]string{`sum by (route, code) (rate(partnerapi_http_requests_total` + sel("gateway", `code=~"5.."`) + `[$__rate_interval])) or on() vector(0)`, "{{route}} {{code}}"})
	for _, svc := range Services {
		b.row(svc)
		b.series(0, 8, "Requests per second by route", "Answered requests, by route template.", "reqps",
			[2]string{`sum by (route) (rate(partnerapi_http_requests_total` + sel(svc, "") + `[$__rate_interval]))`, "{{route}}"})
		b.series(8, 8, "Error ratio (5xx and 499)", "Share of the answers the service was responsible for (all but 4xx) that were server errors or never reached their caller (499: the caller, the gateway at its route timeout, went away first), so it agrees with the gateway's. The availability SLO (99.9%) is measured at the gateway.", "percentunit",
			[2]string{`(sum(rate(partnerapi_http_requests_total` + sel(svc, `code=~"5..|499"`) + `[$__rate_interval])) or on() vector(0)) / sum(rate(partnerapi_http_requests_total` + sel(svc, `code!~"4([0-8].|9[0-8])"`) + `[$__rate_interval]))`, "error ratio"})
		var quantiles [][2]string
		for _, q := range []struct{ q, legend string }{{"0.5", "p50"}, {"0.95", "p95"}, {"0.99", "p99"}} {
			quantiles = append(quantiles, [2]string{`histogram_quantile(` + q.q + `, sum by (le) (rate(partnerapi_http_request_duration_seconds_bucket` + sel(svc, "") + `[$__rate_interval])))`, q.legend})
		}
		b.series(16, 8, "Latency quantiles", "Time to answer. The latency SLO: 99% within 250 ms at the gateway.", "s", quantiles...)
	}
	b.row("gateway: rate limits, keys and upstreams")
	b.series(0, 8, "Rate limit decisions", "Allowed and limited requests, decided in Redis or, while Redis fails, in-process.", "reqps",
		[2]string{`sum by (decision, store) (rate(partnerapi_gateway_ratelimit_decisions_total{job="gateway"}[$__rate_interval]))`, "{{decision}} ({{store}})"})
	b.series(8, 8, "Most limited keys", "The ten keys answered most 429s, by key id (ids come from the keys file).", "reqps",
		[2]string{`topk(10, sum by (key_id) (rate(partnerapi_gateway_ratelimit_limited_total{job="gateway"}[$__rate_interval])))`, "{{key_id}}"})
	b.series(16, 8, "In-process fallback", "Active: 1 while Redis is unavailable and the gateway limits in-process. Entries: how often a slow or failed Redis answer tipped the gateways into it, per minute (a ticket when it keeps happening: GatewayRateLimitFallbackFlapping).", "none",
		[2]string{`max(partnerapi_gateway_ratelimit_fallback_active{job="gateway"})`, "fallback active"},
		[2]string{`sum(rate(partnerapi_gateway_ratelimit_fallback_activations_total{job="gateway"}[$__rate_interval])) * 60`, "entries per minute"})
	b.series(0, 8, "Key refusals by reason", "401s by cause (never told to the partner), and 403 permission_denied.", "reqps",
		[2]string{`sum by (reason) (rate(partnerapi_gateway_auth_refusals_total{job="gateway"}[$__rate_interval]))`, "{{reason}}"})
	b.series(8, 8, "Upstream latency p95", "Time for each service to answer the gateway.", "s",
		[2]string{`histogram_quantile(0.95, sum by (le, upstream) (rate(partnerapi_gateway_upstream_request_duration_seconds_bucket{job="gateway"}[$__rate_interval])))`, "{{upstream}}"})
	b.series(16, 8, "Upstream errors", "Calls to a service that failed: unreachable, timed out, or refused by the gateway.", "reqps",
		[2]string{`sum by (upstream) (rate(partnerapi_gateway_upstream_errors_total{job="gateway"}[$__rate_interval]))`, "{{upstream}}"})
	b.series(0, 8, "Upstream circuits", "Each upstream's circuit: 0 closed, 2 open (calls fail at once while the gateway probes the service's health every second).", "none",
		[2]string{`max by (upstream) (partnerapi_gateway_upstream_circuit_state{job="gateway"})`, "{{upstream}}"})
	b.series(8, 8, "Keys", "Keys in the live set, and whether the keys file on disk parses.", "none",
		[2]string{`max(partnerapi_gateway_keys_loaded{job="gateway"})`, "keys loaded"},
		[2]string{`min(partnerapi_gateway_keys_file_valid{job="gateway"})`, "keys file valid"})
	b.series(16, 8, "Requests in flight", "Requests each service is answering now.", "none",
		[2]string{`sum by (job) (partnerapi_http_requests_in_flight{` + jobs() + `})`, "{{job}}"})
	b.series(0, 8, "Log lines dropped", "Lines a binary dropped because its log buffer was full: whatever reads its output is stuck or too slow. Requests never wait for the log.", "none",
		[2]string{`sum by (job) (increase(partnerapi_log_lines_dropped_total{` + jobs() + `}[$__rate_interval]))`, "{{job}}"})
	b.series(8, 8, "Upstream connections opened", "New connections from the gateway to each service. Pooled connections carry request after request; a rate near the request rate means they are not being reused.", "cps",
		[2]string{`sum by (upstream) (rate(partnerapi_gateway_upstream_connections_opened_total{job="gateway"}[$__rate_interval]))`, "{{upstream}}"})
	b.y += 8
	b.row("processes")
	b.series(0, 8, "CPU", "CPU each process uses, in cores.", "none",
		[2]string{`sum by (job, instance) (rate(process_cpu_seconds_total{` + jobs() + `}[$__rate_interval]))`, "{{job}} {{instance}}"})
	b.series(8, 8, "Resident memory", "Memory each process holds (RSS). GOMEMLIMIT is 90% of the container's limit.", "bytes",
		[2]string{`max by (job, instance) (process_resident_memory_bytes{` + jobs() + `})`, "{{job}} {{instance}}"})
	b.series(16, 8, "Goroutines", "Goroutines of each process: a steady climb is a leak, a jump a stuck dependency.", "none",
		[2]string{`max by (job, instance) (go_goroutines{` + jobs() + `})`, "{{job}} {{instance}}"})
	b.row("PostgreSQL (the system of record) and Redis (rate buckets, quote offers)")
	b.series(0, 8, "PostgreSQL writable", "1 when a service's pool reaches a primary that takes writes; 0 during a failover, when the service answers 500 and is not ready.", "none",
		[2]string{`min by (job) (partnerapi_db_writable{` + jobs() + `})`, "{{job}}"})
	b.series(8, 8, "PostgreSQL connections", "Each service's pool, by state; waits mean the pool is too small or queries too slow.", "none",
		[2]string{`sum by (job, state) (partnerapi_db_connections{` + jobs() + `})`, "{{job}} {{state}}"},
		[2]string{`sum by (job) (rate(partnerapi_db_acquire_waits_total{` + jobs() + `}[$__rate_interval]))`, "{{job}} waits/s"})
	b.series(16, 8, "Redis answers", "1 when Redis (every master of a Cluster) answers the service's PING at scrape time.", "none",
		[2]string{`min by (job) (partnerapi_redis_up{` + jobs() + `})`, "{{job}}"})
	b.series(0, 12, "Redis connections", "Each client's pool, by state, and commands that found no free connection in time.", "none",
		[2]string{`sum by (job, state) (partnerapi_redis_connections{` + jobs() + `})`, "{{job}} {{state}}"},
		[2]string{`sum by (job) (rate(partnerapi_redis_pool_timeouts_total{` + jobs() + `}[$__rate_interval]))`, "{{job}} pool timeouts/s"})
	b.series(12, 12, "Traces dropped", "Spans a process gave up exporting (the collector unreachable or refusing): traces with holes.", "none",
		[2]string{`sum by (job) (increase(partnerapi_trace_spans_dropped_total{` + jobs() + `}[$__rate_interval])) or on() vector(0)`, "{{job}}"})
	b.row("operations")
	for i, svc := range Operated {
		b.series(i*8, 8, svc+": operations by outcome", "Each operation of the "+svc+" service, by outcome: ok or the wire error code.", "reqps",
			[2]string{`sum by (operation, outcome) (rate(partnerapi_` + svc + `_operations_total{job="` + svc + `"}[$__rate_interval]))`, "{{operation}} {{outcome}}"})
	}
	b.row("bank provider")
	b.series(0, 8, "Provider calls by outcome", "Each attempt at the bank provider, by operation and outcome (ok, refused, error, timeout).", "reqps",
		[2]string{`sum by (operation, outcome) (rate(partnerapi_bankprovider_requests_total[$__rate_interval]))`, "{{operation}} {{outcome}}"})
	b.series(8, 8, "Provider latency p95", "Time one attempt at the provider took, by operation.", "s",
		[2]string{`histogram_quantile(0.95, sum by (le, operation) (rate(partnerapi_bankprovider_request_duration_seconds_bucket[$__rate_interval])))`, "{{operation}}"})
	b.series(16, 8, "Provider failures and retries", "Failed attempts (error or timeout; the BankProviderFailing alert) and the retries they caused.", "reqps",
		[2]string{`sum by (job) (rate(partnerapi_bankprovider_requests_total{outcome=~"error|timeout"}[$__rate_interval]))`, "{{job}} failed"},
		[2]string{`sum by (job) (rate(partnerapi_bankprovider_retries_total[$__rate_interval]))`, "{{job}} retries"})
	b.row("payouts (the database's word)")
	b.series(0, 6, "Payouts in flight", "Payouts awaiting their deposit and processing, by status (partnerapi_payout_in_flight).", "none",
		[2]string{`max by (status) (sum by (instance, status) (partnerapi_payout_in_flight{job="payout"}))`, "{{status}}"})
	b.series(6, 6, "Moves per minute", "Payouts moved to each status, as the moves commit.", "none",
		[2]string{`sum by (status) (rate(partnerapi_payout_moves_total{job="payout"}[$__rate_interval])) * 60`, "{{status}}"})
	b.series(12, 6, "Oldest processing", "How long the oldest processing payout of each rail has been so (PayoutProcessingOverdue opens a ticket far past the rail's estimate).", "s",
		[2]string{`max by (rail) (partnerapi_payout_oldest_seconds{job="payout",status="processing"})`, "{{rail}}"})
	b.series(18, 6, "Refunds owed", "Refunds not yet sent: awaiting the payout's refund address, or pending (being sent).", "none",
		[2]string{`max by (status) (partnerapi_payout_refunds_owed{job="payout"})`, "{{status}}"})
	b.row("workers (what moves payouts, funding and orders on the provider's word)")
	b.series(0, 8, "Worker rounds by outcome", "Rounds of each replica's workers and queues: worked (it claimed records), idle (none was due), failed (the database failed it; WorkerStalled pages when a replica finishes none for 4 minutes).", "ops",
		[2]string{`sum by (job, worker, outcome) (rate(partnerapi_worker_rounds_total[$__rate_interval]))`, "{{job}} {{worker}} {{outcome}}"})
	b.series(8, 8, "Records that failed alone", "Records a worker could not move, by queue and reason (refused: the database refused the write); each is backed off alone while the rest of its round moves.", "ops",
		[2]string{`sum by (worker, queue, reason) (rate(partnerapi_worker_row_failures_total[$__rate_interval]))`, "{{worker}} {{queue}} {{reason}}"})
	b.series(16, 8, "Payouts missing at the provider", "Payouts processing that the provider confirmed and no longer knows, now (PayoutMissingAtProvider pages): never re-sent, never moved on that word.", "none",
		[2]string{`max by (job) (partnerapi_payout_provider_missing) or on() vector(0)`, "{{job}}"})
	b.row("chains (deposits seen, refunds sent from the treasury)")
	b.series(0, 6, "Watcher lag", "Confirmed blocks each chain's watcher has not read yet (ChainWatcherBehind pages when it stays behind), and confirmed deposits the database refused, held and tried again alone while the watcher moves on (the runbook's ChainWatcherBehind section says how to find them).", "none",
		[2]string{`max by (chain) (partnerapi_chain_lag_blocks{job="payout"})`, "{{chain}}"},
		[2]string{`max by (chain) (partnerapi_chain_deposits_held{job="payout"})`, "{{chain}} deposits held"})
	b.series(6, 6, "Treasury balance", "What the treasury holds on each chain, by token (gas: the native coin that pays the fees); TreasuryLow opens a ticket at a day of refunds left, pages at an hour.", "none",
		[2]string{`max by (chain, token) (partnerapi_treasury_balance{job="payout"})`, "{{chain}} {{token}}"})
	b.series(12, 6, "Refunds in flight", "The treasury's transactions not yet confirmed, refunds waiting because the treasury is short (TreasuryLow pages when they wait five minutes), and refunds in a token the catalogue does not list, which wait for an operator (the runbook's TreasuryLow section).", "none",
		[2]string{`max by (chain) (partnerapi_treasury_sends_unconfirmed{job="payout"})`, "{{chain}} unconfirmed"},
		[2]string{`max by (chain) (partnerapi_treasury_refunds_waiting_funds{job="payout"})`, "{{chain}} waiting for funds"},
		[2]string{`max by (chain) (partnerapi_treasury_refunds_unlisted_token{job="payout"})`, "{{chain}} unlisted token"})
	b.series(18, 6, "Oldest unconfirmed refund", "How long the treasury's oldest broadcast transaction has waited to be mined with its confirmations (RefundStuck pages past ten minutes).", "s",
		[2]string{`max by (chain) (partnerapi_treasury_oldest_unconfirmed_seconds{job="payout"})`, "{{chain}}"})
	return map[string]any{
		"uid":           "partner-api",
		"title":         "Partner API",
		"description":   "Targets, alerts and builds; request rate, errors and latency per service; the gateway's rate limits, keys and upstreams; operations; the bank provider; the payouts; the workers; the chains and the treasury.",
		"tags":          []string{"partner-api"},
		"timezone":      "utc",
		"editable":      false,
		"schemaVersion": 39,
		"version":       1,
		"refresh":       "30s",
		"time":          map[string]any{"from": "now-1h", "to": "now"},
		"templating": map[string]any{"list": []any{map[string]any{
			"name": "datasource", "label": "Prometheus", "type": "datasource", "query": "prometheus",
			"current": map[string]any{"text": "Prometheus", "value": DatasourceUID}, "hide": 0, "refresh": 1,
		}}},
		"annotations": map[string]any{"list": []any{}},
		"panels":      b.panels,
	}
}

// Render is the file's exact content.
func Render() ([]byte, error) {
	b, err := json.MarshalIndent(Dashboard(), "", "  ")
	if err != nil {
		return nil, err
	}
	return append(b, '\n'), nil
}

func main() {
	b, err := Render()
	if err != nil {
		fmt.Fprintln(os.Stderr, "dashboard:", err)
		os.Exit(1)
	}
	os.Stdout.Write(b)
}
