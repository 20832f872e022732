package deploycheck

import (
	"bufio"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"

	"github.com/partnerpay/api/pkg/envelope"
	"github.com/partnerpay/api/pkg/lifecycle"
)

// What a sample answer of the guide names: an event type, a status, an
// error code; and a status and code written in a comment ("409
// refund_address_locked") or a row of the error table.
var (
	sampleType   = regexp.MustCompile(`"type":"([^"]+)"`)
	sampleStatus = regexp.MustCompile(`"status":"([^"]+)"`)
	sampleCode   = regexp.MustCompile(`"code":"([^"]+)"`)
	commentCode  = regexp.MustCompile(`\b([45]\d\d) ([a-z][a-z_]+[a-z])\b`)
	tableRow     = regexp.MustCompile("^\\| ([45]\\d\\d) \\| `([a-z_]+)` \\|")
)

// TestTheGuidesAnswersNameWhatExists: the answers the partner guide shows
// (its `# →` lines, and the comment lines under them) and its error table
// name only event types and statuses GET /v1/statuses lists (or, for a
// status, one the OpenAPI document enumerates: a sandbox pay-in's), and
// error codes the API answers, each with its status (or a validation
// problem's code, which the document enumerates). The guide's commands run
// in devstack/e2e (TestTheDocsPasteEndToEnd); this holds the printed
// answers, which a reader copies into a switch, to what exists.
func TestTheGuidesAnswersNameWhatExists(t *testing.T) {
	t.Parallel()
	types := lifecycle.EventTypes()
	var statuses []string
	for _, r := range lifecycle.All() {
		for _, s := range r.Statuses {
			statuses = append(statuses, s.Value)
		}
	}
	codes := map[string]int{}
	for _, c := range envelope.Codes() {
		codes[string(c)] = c.Status()
	}
	codes[string(envelope.CodeInvalidRequest)+"/413"] = envelope.TooLarge().Status
	documented := documentEnums(t)
	statuses = append(statuses, documented["status"]...)
	for _, c := range documented["code"] {
		if _, ok := codes[c]; !ok {
			codes[c] = 0 // a field's problem (validate's errors): no status of its own
		}
	}

	for _, page := range []string{"../../docs/partner-guide.md", "../../README.md"} {
		problems := guideProblems(t, page, types, statuses, codes)
		for _, p := range problems {
			t.Error(p)
		}
	}
}

func guideProblems(t *testing.T, page string, types, statuses []string, codes map[string]int) []string {
	t.Helper()
	f, err := os.Open(page)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var problems []string
	inCode, inAnswer := false, false
	sc := bufio.NewScanner(f)
	for n := 1; sc.Scan(); n++ {
		line := sc.Text()
		where := page + ":" + strconv.Itoa(n)
		if strings.HasPrefix(line, "```") {
			inCode, inAnswer = !inCode, false
			continue
		}
		if !inCode {
			if m := tableRow.FindStringSubmatch(line); m != nil {
				status, _ := strconv.Atoi(m[1])
				want, ok := codes[m[2]]
				if status == 413 {
					want, ok = codes[m[2]+"/413"]
				}
				if !ok || want != status {
					// (a field problem's code has no status: 0 matches none)
					problems = append(problems, where+": the error table's "+m[1]+" "+m[2]+" is not a code the API answers with that status")
				}
			}
			continue
		}
		switch {
		case strings.HasPrefix(line, "# →"):
			inAnswer = true
		case inAnswer && strings.HasPrefix(line, "#  "):
		default:
			inAnswer = false
		}
		if strings.HasPrefix(strings.TrimSpace(line), "#") {
			for _, m := range commentCode.FindAllStringSubmatch(line, -1) {
				status, _ := strconv.Atoi(m[1])
				if want, ok := codes[m[2]]; ok && want != 0 && want != status {
					problems = append(problems, where+": "+m[1]+" "+m[2]+", which the API answers with "+strconv.Itoa(want))
				} else if !ok && strings.Contains(m[2], "_") {
					problems = append(problems, where+": "+m[1]+" "+m[2]+" is not a code the API answers")
				}
			}
		}
		if !inAnswer {
			continue
		}
		for _, m := range sampleType.FindAllStringSubmatch(line, -1) {
			if !slices.Contains(types, m[1]) {
				problems = append(problems, where+": event type "+m[1]+" is not one GET /v1/statuses lists")
			}
		}
		for _, m := range sampleStatus.FindAllStringSubmatch(line, -1) {
			if !slices.Contains(statuses, m[1]) {
				problems = append(problems, where+": status "+m[1]+" is not one GET /v1/statuses lists")
			}
		}
		for _, m := range sampleCode.FindAllStringSubmatch(line, -1) {
			if _, ok := codes[m[1]]; !ok {
				problems = append(problems, where+": error code "+m[1]+" is not one the API answers")
			}
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return problems
}

// documentEnums are the values the OpenAPI document enumerates for each
// property name ("status", "code"), wherever it appears.
func documentEnums(t *testing.T) map[string][]string {
	t.Helper()
	b, err := os.ReadFile("../../services/gateway/internal/apidocs/openapi.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var doc any
	if err := yaml.Unmarshal(b, &doc); err != nil {
		t.Fatal(err)
	}
	out := map[string][]string{}
	var walk func(v any)
	walk = func(v any) {
		switch v := v.(type) {
		case map[string]any:
			if props, ok := v["properties"].(map[string]any); ok {
				for name, p := range props {
					if p, ok := p.(map[string]any); ok {
						if enum, ok := p["enum"].([]any); ok {
							for _, e := range enum {
								if s, ok := e.(string); ok {
									out[name] = append(out[name], s)
								}
							}
						}
					}
				}
			}
			for _, c := range v {
				walk(c)
			}
		case []any:
			for _, c := range v {
				walk(c)
			}
		}
	}
	walk(doc)
	return out
}
