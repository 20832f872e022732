package kithttp

import (
	"context"
	"net/http/httptest"
	"testing"
)

// TestAnswersDoNotEscapeForHTML: a partner reads "Antigua & Barbuda", not
// "Antigua \u0026 Barbuda" (answers are JSON, never HTML).
func TestAnswersDoNotEscapeForHTML(t *testing.T) {
	t.Parallel()
	w := httptest.NewRecorder()
	if err := EncodeJSON(context.Background(), w, map[string]string{"name": "Antigua & Barbuda <AG>"}); err != nil {
		t.Fatal(err)
	}
	if got := w.Body.String(); got != `{"name":"Antigua & Barbuda <AG>"}` {
		t.Errorf("body %s", got)
	}
	if w.Header().Get("Content-Length") != "33" {
		t.Errorf("Content-Length %q", w.Header().Get("Content-Length"))
	}
}
