// Command dashboard writes the Grafana dashboard of the partner API
// (deploy/grafana/dashboards/partner-api.json): one row per service with
// request rate, error ratio and latency quantiles, and a row for the
// gateway's rate limits, keys and upstreams. The JSON is generated so that
// it stays reviewable here, as code: `make dashboards` rewrites it, and a
// test fails when the file and this program disagree.
package main

import (
	"encoding/json"
	"fmt"
	"os"
	"slices"

	"github.com/partnerpay/api/pkg/serve"
)

// DatasourceUID is the Prometheus datasource's uid in the provisioning file.
const DatasourceUID = "partnerapi-prometheus"

// Services are the scrape jobs, in the order of the rows: the binaries from
// the edge inwards (serve.Binaries in reverse start order).
var Services = func() []string {
	names := serve.Names()
	slices.Reverse(names)
	return names
}()

type target struct {
	Expr   string `json:"expr"`
	Legend string `json:"legendFormat"`
	RefID  string `json:"refId"`
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
	b.id++
	p := panel{
		ID: b.id, Type: "timeseries", Title: title, Description: desc,
		GridPos:     gridPos{H: 8, W: w, X: x, Y: b.y},
		Datasource:  map[string]any{"type": "prometheus", "uid": DatasourceUID},
		FieldConfig: map[string]any{"defaults": map[string]any{"unit": unit, "min": 0}, "overrides": []any{}},
		Options:     map[string]any{"legend": map[string]any{"displayMode": "list", "placement": "bottom", "showLegend": true}, "tooltip": map[string]any{"mode": "multi", "sort": "desc"}},
	}
	for i, e := range exprs {
		p.Targets = append(p.Targets, target{Expr: e[0], Legend: e[1], RefID: string(rune('A' + i))})
	}
	b.panels = append(b.panels, p)
	if x+w >= 24 {
		b.y += 8
	}
}

func sel(job string, extra string) string {
	s := `job="` + job + `",route!="GET /health"`
	if extra != "" {
		s += "," + extra
	}
	return "{" + s + "}"
}

// Dashboard builds the dashboard.
func Dashboard() map[string]any {
	b := &builder{}
	for _, svc := range Services {
		b.row(svc)
		b.series(0, 8, "Requests per second by route", "Answered requests, by route template.", "reqps",
			[2]string{`sum by (route) (rate(partnerapi_http_requests_total` + sel(svc, "") + `[$__rate_interval]))`, "{{route}}"})
		b.series(8, 8, "Error ratio (5xx)", "Share of answers that were server errors. The availability SLO (99.9%) is measured at the gateway.", "percentunit",
			[2]string{`sum(rate(partnerapi_http_requests_total` + sel(svc, `code=~"5.."`) + `[$__rate_interval])) / sum(rate(partnerapi_http_requests_total` + sel(svc, "") + `[$__rate_interval]))`, "5xx ratio"})
		var quantiles [][2]string
		for _, q := range []string{"0.5", "0.95", "0.99"} {
			quantiles = append(quantiles, [2]string{`histogram_quantile(` + q + `, sum by (le) (rate(partnerapi_http_request_duration_seconds_bucket` + sel(svc, "") + `[$__rate_interval])))`, "p" + q[2:]})
		}
		b.series(16, 8, "Latency quantiles", "Time to answer. The latency SLO: 99% within 250 ms at the gateway.", "s", quantiles...)
	}
	b.row("gateway: rate limits, keys and upstreams")
	b.series(0, 8, "Rate limit decisions", "Allowed and limited requests, decided in Redis or, while Redis fails, in-process.", "reqps",
		[2]string{`sum by (decision, store) (rate(partnerapi_gateway_ratelimit_decisions_total{job="gateway"}[$__rate_interval]))`, "{{decision}} ({{store}})"})
	b.series(8, 8, "In-process fallback active", "1 while Redis is unavailable and the gateway limits in-process.", "none",
		[2]string{`max(partnerapi_gateway_ratelimit_fallback_active{job="gateway"})`, "fallback active"})
	b.series(16, 8, "Key refusals by reason", "401s by cause (never told to the partner), and 403 permission_denied.", "reqps",
		[2]string{`sum by (reason) (rate(partnerapi_gateway_auth_refusals_total{job="gateway"}[$__rate_interval]))`, "{{reason}}"})
	b.series(0, 8, "Upstream latency p95", "Time for each service to answer the gateway.", "s",
		[2]string{`histogram_quantile(0.95, sum by (le, upstream) (rate(partnerapi_gateway_upstream_request_duration_seconds_bucket{job="gateway"}[$__rate_interval])))`, "{{upstream}}"})
	b.series(8, 8, "Upstream errors", "Calls to a service that failed: unreachable, timed out, or refused by the gateway.", "reqps",
		[2]string{`sum by (upstream) (rate(partnerapi_gateway_upstream_errors_total{job="gateway"}[$__rate_interval]))`, "{{upstream}}"})
	b.series(16, 8, "Keys", "Keys in the live set, and whether the keys file on disk parses.", "none",
		[2]string{`max(partnerapi_gateway_keys_loaded{job="gateway"})`, "keys loaded"},
		[2]string{`min(partnerapi_gateway_keys_file_valid{job="gateway"})`, "keys file valid"})
	return map[string]any{
		"uid":           "partner-api",
		"title":         "Partner API",
		"description":   "Request rate, errors and latency per service; the gateway's rate limits, keys and upstreams.",
		"tags":          []string{"partner-api"},
		"timezone":      "utc",
		"editable":      false,
		"schemaVersion": 39,
		"version":       1,
		"refresh":       "30s",
		"time":          map[string]any{"from": "now-1h", "to": "now"},
		"templating":    map[string]any{"list": []any{}},
		"annotations":   map[string]any{"list": []any{}},
		"panels":        b.panels,
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
