package apidocs

import (
	"net/http/httptest"
	"strings"
	"testing"
)

func TestServesEveryForm(t *testing.T) {
	d, err := New()
	if err != nil {
		t.Fatal(err)
	}
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
