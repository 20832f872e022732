package deploycheck

import (
	"os"
	"regexp"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"
)

const runbookBase = "https://github.com/partnerpay/api/blob/main/docs/runbook.md#"

// TestEveryAlertLinksItsRunbookSection: an SRE paged at night follows the
// alert's runbook_url to the section that says what to do; the link lands
// on a heading that exists (GitHub's anchor of it), and every section of
// the runbook belongs to an alert.
func TestEveryAlertLinksItsRunbookSection(t *testing.T) {
	t.Parallel()
	b, err := os.ReadFile("../../deploy/prometheus/rules/partner-api.yml")
	if err != nil {
		t.Fatal(err)
	}
	var rules struct {
		Groups []struct {
			Name  string `json:"name"`
			Rules []struct {
				Record      string            `json:"record"`
				Expr        string            `json:"expr"`
				For         string            `json:"for"`
				Alert       string            `json:"alert"`
				Labels      map[string]string `json:"labels"`
				Annotations map[string]string `json:"annotations"`
			} `json:"rules"`
		} `json:"groups"`
	}
	if err := yaml.UnmarshalStrict(b, &rules); err != nil {
		t.Fatal(err)
	}
	runbook, err := os.ReadFile("../../docs/runbook.md")
	if err != nil {
		t.Fatal(err)
	}
	anchors := map[string]bool{}
	for _, m := range regexp.MustCompile(`(?m)^## (.+)$`).FindAllStringSubmatch(string(runbook), -1) {
		anchors[githubAnchor(m[1])] = false
	}
	alerts := 0
	for _, g := range rules.Groups {
		for _, r := range g.Rules {
			if r.Alert == "" {
				continue
			}
			alerts++
			switch r.Labels["severity"] {
			case "page", "ticket", "none":
			default:
				t.Errorf("%s: severity %q; Alertmanager routes page, ticket and none", r.Alert, r.Labels["severity"])
			}
			url := r.Annotations["runbook_url"]
			anchor, ok := strings.CutPrefix(url, runbookBase)
			if _, exists := anchors[anchor]; !ok || !exists {
				t.Errorf("%s: runbook_url %q is not a section of docs/runbook.md", r.Alert, url)
				continue
			}
			anchors[anchor] = true
			if !strings.Contains(anchor, strings.ToLower(r.Alert)) {
				t.Errorf("%s: runbook_url %q is another alert's section", r.Alert, url)
			}
		}
	}
	for anchor, used := range anchors {
		if !used {
			t.Errorf("docs/runbook.md section #%s belongs to no alert", anchor)
		}
	}
	if alerts < 15 {
		t.Fatalf("read %d alerts; the rules file was not read", alerts)
	}
}

// githubAnchor is the id GitHub gives a heading: lower case, punctuation
// other than hyphens dropped, spaces turned into hyphens.
func githubAnchor(heading string) string {
	var b strings.Builder
	for _, r := range strings.ToLower(heading) {
		switch {
		case r >= 'a' && r <= 'z', r >= '0' && r <= '9', r == '-', r == '_':
			b.WriteRune(r)
		case r == ' ':
			b.WriteByte('-')
		}
	}
	return b.String()
}
