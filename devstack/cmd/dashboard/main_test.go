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
	panels := d["panels"].([]panel)
	rows := map[string]bool{}
	ids := map[int]bool{}
	metric := regexp.MustCompile(`partnerapi_[a-z_]+`)
	known := regexp.MustCompile(`^partnerapi_(http_(requests_total|request_duration_seconds_bucket)|gateway_(ratelimit_decisions_total|ratelimit_fallback_active|auth_refusals_total|upstream_request_duration_seconds_bucket|upstream_errors_total|keys_loaded|keys_file_valid))$`)
	for _, p := range panels {
		if ids[p.ID] {
			t.Errorf("duplicate panel id %d", p.ID)
		}
		ids[p.ID] = true
		if p.Type == "row" {
			rows[p.Title] = true
			continue
		}
		if p.Datasource["uid"] != DatasourceUID || len(p.Targets) == 0 {
			t.Errorf("panel %q: datasource %v, %d targets", p.Title, p.Datasource, len(p.Targets))
		}
		for _, tg := range p.Targets {
			for _, m := range metric.FindAllString(tg.Expr, -1) {
				if !known.MatchString(m) {
					t.Errorf("panel %q queries %s, which no service exports", p.Title, m)
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
