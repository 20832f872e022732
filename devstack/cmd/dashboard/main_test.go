package main

import (
	"bytes"
	"encoding/json"
	"os"
	"regexp"
	"strings"
	"testing"
)

const file = "../../../deploy/grafana/dashboards/partner-api.json"

func TestCommittedDashboardIsTheGeneratedOne(t *testing.T) {
	want, err := Render()
	if err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Fatal("deploy/grafana/dashboards/partner-api.json is stale: run make dashboards")
	}
	var d map[string]any
	if err := json.Unmarshal(got, &d); err != nil {
		t.Fatalf("not JSON: %v", err)
	}
}

func TestDashboardShape(t *testing.T) {
	provisioning, err := os.ReadFile("../../../deploy/grafana/provisioning/datasources/datasources.yml")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(provisioning), "uid: "+DatasourceUID) {
		t.Fatalf("the provisioned datasource is not %s", DatasourceUID)
	}
	d := Dashboard()
	// Every panel reads the Prometheus the datasource variable names; its
	// default is the provisioned one.
	vars := d["templating"].(map[string]any)["list"].([]any)
	if len(vars) != 1 || vars[0].(map[string]any)["name"] != "datasource" || vars[0].(map[string]any)["current"].(map[string]any)["value"] != DatasourceUID {
		t.Errorf("templating %v: want the datasource variable, defaulting to %s", vars, DatasourceUID)
	}
	panels := d["panels"].([]panel)
	rows := map[string]bool{}
	ids := map[int]bool{}
	// Every query runs against a real Prometheus scraping the stack in the
	// e2e suite (TestARealPrometheusEvaluatesEveryRuleAndPanel); here, the
	// shape: the Grafana variable every rate uses, and no legend naming a
	// quantile other than its own.
	legend := regexp.MustCompile(`^histogram_quantile\((0\.\d+),`)
	for _, p := range panels {
		if ids[p.ID] {
			t.Errorf("duplicate panel id %d", p.ID)
		}
		ids[p.ID] = true
		if p.Type == "row" {
			rows[p.Title] = true
			continue
		}
		if p.Datasource["uid"] != "${datasource}" || len(p.Targets) == 0 {
			t.Errorf("panel %q: datasource %v, %d targets", p.Title, p.Datasource, len(p.Targets))
		}
		for _, tg := range p.Targets {
			if strings.Contains(tg.Expr, "rate(") && !strings.Contains(tg.Expr, "[$__rate_interval]") {
				t.Errorf("panel %q: a rate without $__rate_interval: %s", p.Title, tg.Expr)
			}
			if m := legend.FindStringSubmatch(tg.Expr); m != nil && p.Title == "Latency quantiles" {
				if want := map[string]string{"0.5": "p50", "0.95": "p95", "0.99": "p99"}[m[1]]; tg.Legend != want {
					t.Errorf("panel %q: quantile %s is labelled %q, want %q", p.Title, m[1], tg.Legend, want)
				}
			}
		}
	}
	for _, svc := range Services {
		if !rows[svc] {
			t.Errorf("no row for %s", svc)
		}
	}
}
