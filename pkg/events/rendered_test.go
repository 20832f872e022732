package events

import (
	"encoding/json"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/partnerpay/api/pkg/feedwire"
	"github.com/partnerpay/api/pkg/kithttp"
	"github.com/partnerpay/api/pkg/obs"
	"github.com/partnerpay/api/pkg/partner"
	"github.com/partnerpay/api/testkit/pgtest"
)

// renderedPage is a page of two events whose data PostgreSQL wrote as
// jsonb does (spaces after colons and commas), with text a partner chose.
func renderedPage() Page {
	at := time.Date(2026, 11, 29, 12, 0, 3, 123456000, time.UTC)
	return Page{Through: 42, HasMore: true, Events: []Stored{
		{Seq: 40, ID: "evt_00000000000000000000000000000040", Type: "payout.processing", CreatedAt: at,
			Data: json.RawMessage(`{"object": {"reference": "inv \"42\"\nline two", "name": "Zoë"}, "previousStatus": "awaiting_deposit"}`)},
		{Seq: 42, ID: "evt_00000000000000000000000000000042", Type: "payout.completed", CreatedAt: at.Add(time.Second),
			Data: json.RawMessage(`{"object": {}}`)},
	}}
}

// A rendered page holds each event as the partner reads it (compact,
// createdAt in seconds), behind its place and time; read back, it is the
// page it was.
func TestARenderedPageReadsBack(t *testing.T) {
	t.Parallel()
	p := renderedPage()
	b, err := p.Render()
	if err != nil {
		t.Fatal(err)
	}
	got, err := feedwire.Parse(b, 100)
	if err != nil {
		t.Fatalf("%v\n%s", err, b)
	}
	want := []string{
		`{"id":"evt_00000000000000000000000000000040","type":"payout.processing","createdAt":"2026-11-29T12:00:03Z","data":{"object":{"reference":"inv \"42\"\nline two","name":"Zoë"},"previousStatus":"awaiting_deposit"}}`,
		`{"id":"evt_00000000000000000000000000000042","type":"payout.completed","createdAt":"2026-11-29T12:00:04Z","data":{"object":{}}}`,
	}
	if got.Through != 42 || !got.HasMore || len(got.Events) != 2 {
		t.Fatalf("read back %+v", got)
	}
	for i, e := range got.Events {
		if string(e.JSON) != want[i] || e.Seq != p.Events[i].Seq || e.CreatedAt != p.Events[i].CreatedAt.UnixMicro() || !json.Valid(e.JSON) {
			t.Errorf("event %d: %d %d %s\nwant %d %d %s", i, e.Seq, e.CreatedAt, e.JSON, p.Events[i].Seq, p.Events[i].CreatedAt.UnixMicro(), want[i])
		}
	}
	if _, err := (Page{Events: []Stored{{ID: "evt_1", Data: json.RawMessage(`{"object":`)}}}).Render(); err == nil {
		t.Error("an event whose data is not JSON was rendered")
	}
}

// The route answers a rendered page to a request that accepts one (the
// gateway), JSON to any other: gateways and services of different
// releases understand each other.
func TestTheRouteRendersWhenAsked(t *testing.T) {
	t.Parallel()
	db := pgtest.Open(t, feed.Migrations())
	write(t, db, event(t, "acme", "thing.done", "th_1", "waiting"))
	sequence(t, db)
	log := slog.New(slog.DiscardHandler)
	mux := http.NewServeMux()
	feed.Route(mux, db, kithttp.NewObserver(log, obs.NewOperations(prometheus.NewRegistry(), "test")), log)
	get := func(accept string) *httptest.ResponseRecorder {
		r := httptest.NewRequest(http.MethodGet, "/v1/events?after=0&limit=10", nil)
		r.Header.Set(partner.HeaderKeyID, "acme")
		r.Header.Set(partner.HeaderGrants, `{"products":["bank"]}`)
		if accept != "" {
			r.Header.Set("Accept", accept)
		}
		w := httptest.NewRecorder()
		mux.ServeHTTP(w, r)
		return w
	}
	w := get(feedwire.ContentType)
	p, err := feedwire.Parse(w.Body.Bytes(), 10)
	if w.Code != 200 || w.Header().Get("Content-Type") != feedwire.ContentType || err != nil || len(p.Events) != 1 ||
		!strings.Contains(string(p.Events[0].JSON), `"type":"thing.done","createdAt":"`) {
		t.Errorf("asked rendered: %d %v %s (%v)", w.Code, w.Header(), w.Body, err)
	}
	w = get("application/json")
	var j Page
	if w.Code != 200 || w.Header().Get("Content-Type") != "application/json" || json.Unmarshal(w.Body.Bytes(), &j) != nil || len(j.Events) != 1 {
		t.Errorf("asked JSON: %d %v %s", w.Code, w.Header(), w.Body)
	}
	if w := get(""); w.Header().Get("Content-Type") != "application/json" {
		t.Errorf("asked nothing: %v, want JSON", w.Header())
	}
}

// BenchmarkRenderPage is a service's share of a feed page of 100 events of
// about 1 KiB: rendered for the gateway, against the JSON it wrote before
// (what a request without the gateway's Accept still gets).
//
//	cd pkg && go test -run '^$' -bench RenderPage -benchmem ./events/
func BenchmarkRenderPage(b *testing.B) {
	object := `{"object": {"environment": "sandbox", "payoutId": "bpo_00000000000000000000000000000001", "status": "processing", ` +
		`"beneficiary": {"name": "Ada Lovelace", "account": "DE89 •••• 3000"}, "history": [` +
		strings.Repeat(`{"status": "awaiting_deposit", "at": "2026-11-29T12:00:00Z"}, `, 10) + `{"status": "processing", "at": "2026-11-29T12:00:03Z"}]}}`
	p := Page{Through: 100, HasMore: true}
	at := time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)
	for i := range 100 {
		p.Events = append(p.Events, Stored{Seq: int64(i + 1), ID: "evt_00000000000000000000000000000001", Type: "payout.processing",
			CreatedAt: at, Data: json.RawMessage(object)})
	}
	b.Run("rendered", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := p.Render(); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("json", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := json.Marshal(p); err != nil {
				b.Fatal(err)
			}
		}
	})
}
