package apidocs

import (
	"bytes"
	"encoding/json"
	"html"
	"net/http/httptest"
	"regexp"
	"strings"
	"testing"

	"github.com/partnerpay/api/services/gateway/internal/apidocs/render"
)

// TestTheServedFormsAreTheSources: the embedded JSON and page are what
// render makes of openapi.yaml now.
func TestTheServedFormsAreTheSources(t *testing.T) {
	t.Parallel()
	doc, err := render.JSON(Source)
	if err != nil {
		t.Fatal(err)
	}
	page, err := render.Page(doc)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(doc, generatedJSON) || !bytes.Equal(page, generatedPage) {
		t.Fatal("openapi.json or docs.html is not openapi.yaml's: run make generate")
	}
}

func TestServesEveryForm(t *testing.T) {
	t.Parallel()
	d := New()
	for path, ct := range map[string]string{"/openapi.yaml": "application/yaml", "/openapi.json": "application/json", "/docs": "text/html; charset=utf-8"} {
		w := httptest.NewRecorder()
		if !d.Handle(w, httptest.NewRequest("GET", path, nil)) || w.Code != 200 || w.Header().Get("Content-Type") != ct {
			t.Errorf("%s: %d %q", path, w.Code, w.Header().Get("Content-Type"))
		}
	}
	if d.Handle(httptest.NewRecorder(), httptest.NewRequest("POST", "/docs", nil)) {
		t.Error("POST /docs served")
	}
	if !strings.HasPrefix(string(d.JSON()), `{"openapi":"3.1.0","info":{"title":"Partner Payments API","version":"1.0.0"`) {
		t.Errorf("JSON form does not keep the document's order: %.80s", d.JSON())
	}
}

// TestTheReferencePageReadsAsText: the page shows code as code (no
// Markdown backticks left anywhere), every operation has a curl command
// that a shell runs as is, and a tag with nothing in it says so.
func TestTheReferencePageReadsAsText(t *testing.T) {
	t.Parallel()
	d := New()
	w := httptest.NewRecorder()
	d.Handle(w, httptest.NewRequest("GET", "/docs", nil))
	page := w.Body.String()
	if n := strings.Count(page, "`"); n != 0 {
		i := strings.Index(page, "`")
		t.Errorf("%d backticks on the page, first in …%s…", n, page[max(0, i-80):min(len(page), i+40)])
	}
	sections := strings.Count(page, `<section class="op"`)
	curls := regexp.MustCompile(`(?s)<pre class="curl">(.*?)</pre>`).FindAllStringSubmatch(page, -1)
	if sections < 20 || len(curls) != sections {
		t.Fatalf("%d operations, %d curl commands", sections, len(curls))
	}
	for _, c := range curls {
		cmd := html.UnescapeString(c[1])
		if !strings.HasPrefix(cmd, "curl -sS ") {
			t.Errorf("not a curl command: %s", cmd)
		}
		if body, ok := strings.CutPrefix(cmd[strings.LastIndex(cmd, "\n")+1:], "  -d '"); ok {
			var v map[string]any
			if err := json.Unmarshal([]byte(strings.TrimSuffix(body, "'")), &v); err != nil {
				t.Errorf("the body of %q is not JSON: %v", cmd[:60], err)
			}
		}
	}
	want := `curl -sS -X POST http://127.0.0.1:8080/v1/fiat/accounts \
  -H "Authorization: Bearer $PARTNER_API_KEY" \
  -H "Idempotency-Key: $(uuidgen)" \
  -H 'Content-Type: application/json' \
  -d '{"email":"ada@example.com","fullName":"Ada Lovelace","country":"DE","walletAddress":"0x5aAeb6053F3E94C9b9A09f33669435E7Ef1BeAed","chain":84532,"reference":"user-4411"}'`
	found := false
	for _, c := range curls {
		found = found || html.UnescapeString(c[1]) == want
	}
	if !found {
		t.Errorf("no curl command for onboarding as\n%s", want)
	}
	// Cards holds the hosted card page's link and return; Orders the rest.
	if i, j := strings.Index(page, `<h2 id="tag-Cards">`), strings.Index(page, `id="orderLink"`); i < 0 || j < i || strings.Contains(page[i:j], "Not offered yet") {
		t.Error("the Cards section does not hold the hosted card page's link")
	}
	for _, op := range []string{`id="createOrder"`, `id="orderStatus"`, `id="orderReturn"`, `id="sandboxOrderDeposit"`} {
		if !strings.Contains(page, op) {
			t.Errorf("the page has no %s section", op)
		}
	}
	if !strings.Contains(page, "<code>environment</code>") {
		t.Error("code spans are not rendered as <code>")
	}
}
