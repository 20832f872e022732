package hostedlink

import (
	"errors"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/partnerpay/api/pkg/environment"
)

func TestReturnURLRule(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		env  environment.Name
		raw  string
		want bool
	}{
		{environment.Production, "https://partner.example/back?x=1", true},
		{environment.Production, "http://127.0.0.1:3000/back", false},
		{environment.Sandbox, "http://127.0.0.1:3000/back", true},
		{environment.Sandbox, "http://localhost/back", true},
		{environment.Sandbox, "http://app.localhost/back", true},
		{environment.Sandbox, "http://[::1]/back", true},
		{environment.Sandbox, "http://partner.example/back", false},
		{environment.Sandbox, "https://user:pw@partner.example/", false},
		{environment.Sandbox, "javascript:alert(1)", false},
		{environment.Sandbox, "ftp://partner.example/", false},
		{environment.Sandbox, "/relative", false},
		{environment.Sandbox, "https://partner.example/" + strings.Repeat("a", MaxReturnURL), false},
	} {
		if got := ValidReturnURL(c.env, c.raw); got != c.want {
			t.Errorf("%s %.60s: %v, want %v", c.env, c.raw, got, c.want)
		}
	}
}

func TestStateCannotBeForgedOrOutlived(t *testing.T) {
	t.Parallel()
	now := time.Unix(1_800_000_000, 0)
	s := Signer{Secret: []byte("0123456789abcdef0123456789abcdef"), Now: func() time.Time { return now }}
	state := s.Sign("att_1")
	if got, err := s.Verify(state); got != "att_1" || err != nil {
		t.Fatalf("own state: %q %v", got, err)
	}
	other := Signer{Secret: []byte("another secret of thirty-two b.."), Now: s.Now}
	for _, bad := range []string{"", "x", state + "A", other.Sign("att_1"), strings.Replace(state, ".", ".AAAA", 1), strings.Repeat("A", 1<<10)} {
		if _, err := s.Verify(bad); !errors.Is(err, ErrBadState) {
			t.Errorf("state %.40q: %v", bad, err)
		}
	}
	now = now.Add(ReturnLife + time.Second)
	if _, err := s.Verify(state); !errors.Is(err, ErrLateState) {
		t.Errorf("a late state: %v", err)
	}
}

func TestWithQueryKeepsThePartnersParameters(t *testing.T) {
	t.Parallel()
	got := WithQuery("https://partner.example/back?session=9&result=forged", "orderId", "ord_1", "result", "completed")
	if got != "https://partner.example/back?orderId=ord_1&result=completed&session=9" {
		t.Errorf("got %s", got)
	}
}

func TestPageIsInertAndUncached(t *testing.T) {
	t.Parallel()
	w := httptest.NewRecorder()
	_ = WritePage(w, 410, "Gone <b>", "a <script>")
	if w.Code != 410 || w.Header().Get("Cache-Control") != "no-store" || !strings.Contains(w.Header().Get("Content-Security-Policy"), "default-src 'none'") ||
		!strings.Contains(w.Body.String(), "Gone &lt;b&gt;") || strings.Contains(w.Body.String(), "<script>") {
		t.Errorf("%d %v\n%s", w.Code, w.Header(), w.Body)
	}
}
