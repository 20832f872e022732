package listing

import (
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/partnerpay/api/pkg/envelope"
)

var payouts = Lister{Name: "payouts", Statuses: []string{"awaiting_deposit", "completed"}, Secret: []byte("secret-0123456789")}

// Every parameter, and its 400 naming it.
func TestParameters(t *testing.T) {
	t.Parallel()
	good := payouts.Encode(Cursor{CreatedAt: time.Date(2026, 11, 26, 12, 0, 0, 123456000, time.UTC), ID: "bpo_1"}, "acme", Params{})
	for _, tt := range []struct {
		query, want string
	}{
		{"", ""},
		{"limit=1&status=completed&reference=inv-7&createdFrom=2026-11-01T00:00:00Z&createdTo=2026-12-01T00:00:00%2B01:00", ""},
		{"startingAfter=" + good, ""},
		{"limit=0", "limit must be a whole number from 1 to 100."},
		{"limit=101", "limit must be a whole number from 1 to 100."},
		{"limit=%2B5", "limit must be a whole number from 1 to 100."},
		{"limit=ten", "limit must be a whole number from 1 to 100."},
		{"limit=5&limit=6", "Query parameter limit is given more than once."},
		{"status=pending", "status must be one of awaiting_deposit, completed."},
		{"reference=", "reference must be 1 to 64 printable ASCII characters."},
		{"reference=" + strings.Repeat("r", 65), "reference must be 1 to 64 printable ASCII characters."},
		{"reference=a%0Ab", "reference must be 1 to 64 printable ASCII characters."},
		{"createdFrom=yesterday", "createdFrom must be an RFC 3339 time, such as 2026-11-26T12:00:00Z."},
		{"createdTo=2026-11-26", "createdTo must be an RFC 3339 time, such as 2026-11-26T12:00:00Z."},
		{"createdFrom=2026-11-02T00:00:00Z&createdTo=2026-11-01T00:00:00Z", "createdFrom must be before createdTo."},
		{"offset=20", `Unknown query parameter "offset"; a list takes limit, startingAfter, status, reference, createdFrom and createdTo.`},
		{"startingAfter=x", notOurs},
		{"startingAfter=" + good + "&status=completed", notOurs},
	} {
		q, err := url.ParseQuery(tt.query)
		if err != nil {
			t.Fatal(err)
		}
		_, err = payouts.Parse(q, "acme")
		got := ""
		if e, ok := envelope.From(err); err != nil && ok && e.Code == envelope.CodeInvalidRequest {
			got = e.Message
		} else if err != nil {
			got = err.Error()
		}
		if got != tt.want {
			t.Errorf("%s: %q, want %q", tt.query, got, tt.want)
		}
	}
}

const notOurs = "startingAfter is not a cursor of this list, for this key and these filters: pass nextCursor from the page before, as it was, with the same status, reference, createdFrom and createdTo."

// A cursor reads back as it was made, for its own key, list and filters
// only; an edited one is refused.
func TestCursors(t *testing.T) {
	t.Parallel()
	c := Cursor{CreatedAt: time.Date(2026, 11, 26, 12, 0, 0, 123456000, time.UTC), ID: "bpo_0f4c"}
	from, to := time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC), time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)
	p := Params{Status: "completed", Reference: "inv-7", CreatedFrom: &from, CreatedTo: &to}
	s := payouts.Encode(c, "acme", p)
	if got, ok := payouts.decode(s, "acme", p); !ok || got != c {
		t.Fatalf("decoded %+v %v", got, ok)
	}
	p.Limit = 7 // the page size may change from page to page
	if _, ok := payouts.decode(s, "acme", p); !ok {
		t.Error("a cursor refused under another limit")
	}
	if _, ok := payouts.decode(s, "globex", p); ok {
		t.Error("another key's cursor opened")
	}
	orders := payouts
	orders.Name = "orders"
	if _, ok := orders.decode(s, "acme", p); ok {
		t.Error("another list's cursor opened")
	}
	for name, other := range map[string]Params{
		"no filters":               {},
		"another status":           {Status: "awaiting_deposit", Reference: "inv-7", CreatedFrom: &from, CreatedTo: &to},
		"another reference":        {Status: "completed", Reference: "inv-8", CreatedFrom: &from, CreatedTo: &to},
		"no createdFrom":           {Status: "completed", Reference: "inv-7", CreatedTo: &to},
		"createdFrom as createdTo": {Status: "completed", Reference: "inv-7", CreatedFrom: &to},
	} {
		if _, ok := payouts.decode(s, "acme", other); ok {
			t.Errorf("a cursor opened under %s", name)
		}
	}
	b := []byte(s)
	b[3] ^= 1
	if _, ok := payouts.decode(string(b), "acme", p); ok {
		t.Error("an edited cursor opened")
	}
}

func TestWhere(t *testing.T) {
	t.Parallel()
	from := time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC)
	p := Params{Limit: 5, Status: "completed", Reference: "inv", CreatedFrom: &from, After: &Cursor{CreatedAt: from, ID: "x"}}
	where, args := p.Where("acme")
	if where != "key_id = $1 AND status = $2 AND reference = $3 AND created_at >= $4 AND (created_at, id) < ($5, $6)" || len(args) != 6 {
		t.Errorf("%s %v", where, args)
	}
}
