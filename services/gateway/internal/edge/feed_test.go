package edge

import (
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/partnerpay/api/pkg/feedwire"
	"github.com/partnerpay/api/services/gateway/internal/apikey"
)

func testFeed() *feed {
	return newFeed(&Gateway{env: "sandbox"}, nil, "internal-token-0123456789")
}

// A cursor reads back as it was made, for its key and filters only.
func TestFeedCursors(t *testing.T) {
	t.Parallel()
	f := testFeed()
	q := feedQuery{typ: "payout.*"}
	c := f.encode([]int64{7, 0, 1 << 40, 3}, "acme", q)
	if got, ok := f.decode(c, "acme", q); !ok || got[0] != 7 || got[2] != 1<<40 || got[3] != 3 {
		t.Fatalf("decoded %v %v", got, ok)
	}
	for name, tt := range map[string]struct {
		cursor, key string
		q           feedQuery
	}{
		"another key":   {c, "globex", q},
		"other filters": {c, "acme", feedQuery{}},
		"an object":     {c, "acme", feedQuery{typ: "payout.*", objectID: "bpo_00000000000000000000000000000000"}},
		"edited":        {c[:3] + string(c[3]^1) + c[4:], "acme", q},
		"cut":           {c[:len(c)-2], "acme", q},
		"not base64":    {"!!!", "acme", q},
	} {
		if _, ok := f.decode(tt.cursor, tt.key, tt.q); ok {
			t.Errorf("%s: a cursor opened", name)
		}
	}
}

// The parameters, and which services a filter leaves.
func TestFeedQuery(t *testing.T) {
	t.Parallel()
	f := testFeed()
	for _, tt := range []struct{ query, only, err string }{
		{"", "", ""},
		{"type=payout.refund.sent", "payout", ""},
		{"type=virtual_account.*", "fiat", ""},
		{"type=consent.returned&objectId=cs_000000000000000000000000", "consent", ""},
		{"type=order.*&objectId=bpo_00000000000000000000000000000000", "-", ""},
		{"objectId=ord_000000000000000000000000", "orders", ""},
		{"type=payout", "", "type must be"},
		{"type=payout.*.*", "", "type must be"},
		{"objectId=ord_0000", "", "objectId must be"},
		{"limit=101", "", "limit must be"},
		{"limit=5&limit=6", "", "more than once"},
	} {
		v, _ := url.ParseQuery(tt.query)
		q, err := f.parse(v, "acme")
		switch {
		case tt.err != "" && (err == nil || !strings.Contains(err.Error(), tt.err)):
			t.Errorf("%s: %v, want %q", tt.query, err, tt.err)
		case tt.err == "" && (err != nil || q.only != tt.only):
			t.Errorf("%s: only %q, %v; want %q", tt.query, q.only, err, tt.only)
		}
	}
}

// The merge takes the oldest head first, each service's events in its
// order, up to the limit; a service whose page was taken whole goes on
// past what its filters skipped, one cut short stays at its last event
// taken, and one that did not answer keeps its place.
func TestFeedMerge(t *testing.T) {
	t.Parallel()
	f := testFeed()
	at := func(s int) time.Time { return time.Date(2026, 11, 27, 12, 0, s, 0, time.UTC) }
	page := func(through int64, more bool, evs ...struct {
		seq int64
		at  time.Time
	}) *sourcePage {
		p := &sourcePage{Through: through, HasMore: more}
		for _, e := range evs {
			p.Events = append(p.Events, feedwire.Event{Seq: e.seq, CreatedAt: e.at.UnixMicro(),
				JSON: fmt.Appendf(nil, `{"id":"evt_%032d","type":"payout.processing","createdAt":%q,"data":{"object":{}}}`, e.seq,
					e.at.Format(time.RFC3339))})
		}
		return p
	}
	type ev = struct {
		seq int64
		at  time.Time
	}
	q := feedQuery{limit: 3, places: []int64{10, 20, 30, 40}}
	pages := []*sourcePage{
		page(13, false, ev{11, at(1)}, ev{12, at(4)}), // payout: its second is newer than fiat's
		page(25, false, ev{21, at(2)}),                // fiat: taken whole, through 25
		nil,                                           // consent: did not answer
		page(43, true, ev{41, at(3)}, ev{42, at(5)}), // orders: cut short
	}
	w := httptest.NewRecorder()
	f.answer(w, q, "acme", pages, true)
	var got struct {
		Data []struct {
			ID string `json:"id"`
		} `json:"data"`
		HasMore    bool   `json:"hasMore"`
		NextCursor string `json:"nextCursor"`
	}
	if err := json.Unmarshal(w.Body.Bytes(), &got); err != nil || !strings.HasPrefix(w.Body.String(), `{"environment":"sandbox","data":[`) {
		t.Fatalf("%s %v", w.Body, err)
	}
	var order []string
	for _, e := range got.Data {
		order = append(order, strings.TrimLeft(strings.TrimPrefix(e.ID, "evt_"), "0"))
	}
	if strings.Join(order, " ") != "11 21 41" || !got.HasMore {
		t.Errorf("merged %v (hasMore %v), want seq 11, 21, 41", order, got.HasMore)
	}
	places, ok := f.decode(got.NextCursor, "acme", q)
	if !ok || places[0] != 11 || places[1] != 25 || places[2] != 30 || places[3] != 41 {
		t.Errorf("places %v, want [11 25 30 41]", places)
	}
}

// What the services answer decides the page: a service's 410 is the
// page's cursor_expired; a service that does not answer keeps its place
// while the others flow; none answering is a 500.
func TestFeedWhenServicesFail(t *testing.T) {
	t.Parallel()
	serve := func(status int, body string) *httptest.Server {
		s := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.URL.Path != "/v1/events" || r.Header.Get("X-Partner-Key-Id") != "acme" || r.URL.Query().Get("limit") != "20" {
				t.Errorf("asked %s %v", r.URL, r.Header)
			}
			w.WriteHeader(status)
			_, _ = w.Write([]byte(body))
		}))
		t.Cleanup(s.Close)
		return s
	}
	stalled := func(string) *httptest.Server {
		s := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("X-Internal-Error-Code", "idempotency_in_progress")
			w.Header().Set("Retry-After", "2")
			w.WriteHeader(409)
			_, _ = w.Write([]byte(`{"error":{"code":"idempotency_in_progress","message":"not yet confirmed"}}`))
		}))
		t.Cleanup(s.Close)
		return s
	}
	page := `{"events":[{"seq":5,"id":"evt_00000000000000000000000000000005","type":"order.completed","createdAt":"2026-11-27T12:00:00Z","data":{"object":{}}}],"through":5,"hasMore":false}`
	// The same page rendered, as services answer the gateway's Accept; and
	// one whose lengths do not add up, which is a service that did not
	// answer, never a page read in part.
	event := `{"id":"evt_00000000000000000000000000000005","type":"order.completed","createdAt":"2026-11-27T12:00:00Z","data":{"object":{}}}`
	rendered := fmt.Sprintf("5 0 1\n5 1795996800000000 %d\n%s\n", len(event), event)
	serveRendered := func(body string) *httptest.Server {
		s := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.Header.Get("Accept") != feedwire.ContentType {
				t.Errorf("asked with Accept %q, want %q", r.Header.Get("Accept"), feedwire.ContentType)
			}
			w.Header().Set("Content-Type", feedwire.ContentType)
			_, _ = w.Write([]byte(body))
		}))
		t.Cleanup(s.Close)
		return s
	}
	down := httptest.NewServer(http.NotFoundHandler())
	down.Close() // refuses connections
	get := func(answers ...string) *httptest.ResponseRecorder {
		var sources []feedSource
		for i, name := range feedSources {
			target := down.URL
			switch answers[i] {
			case "page":
				target = serve(200, page).URL
			case "rendered":
				target = serveRendered(rendered).URL
			case "garbled":
				target = serveRendered(strings.Replace(rendered, fmt.Sprintf(" %d\n", len(event)), fmt.Sprintf(" %d\n", len(event)+1), 1)).URL
			case "empty":
				target = serve(200, `{"events":[],"through":0,"hasMore":false}`).URL
			case "gone":
				target = serve(410, `{"error":{"code":"cursor_expired"}}`).URL
			case "stalled":
				target = stalled(answers[i]).URL
			}
			u, _ := url.Parse(target)
			sources = append(sources, feedSource{name: name, target: u, rt: http.DefaultTransport})
		}
		g := &Gateway{env: "sandbox", log: slog.New(slog.DiscardHandler), token: []string{"internal-token-0123456789"}}
		f := newFeed(g, sources, "internal-token-0123456789")
		w := httptest.NewRecorder()
		c := &call{entry: &apikey.Entry{ID: "acme", IDValue: []string{"acme"}}, requestID: [1]string{"r1"}}
		f.serve(w, httptest.NewRequest(http.MethodGet, "/v1/events", nil), c)
		return w
	}

	w := get("empty", "down", "empty", "page")
	var p struct {
		Data       []json.RawMessage `json:"data"`
		HasMore    bool              `json:"hasMore"`
		NextCursor string            `json:"nextCursor"`
	}
	if err := json.Unmarshal(w.Body.Bytes(), &p); w.Code != 200 || err != nil || len(p.Data) != 1 || !p.HasMore {
		t.Fatalf("fiat down: %d %s; want the others' page, and hasMore: fiat's events come later", w.Code, w.Body)
	}
	if places, ok := testFeed().decode(p.NextCursor, "acme", feedQuery{}); !ok || places[1] != 0 || places[3] != 5 {
		t.Errorf("fiat down: places %v %v, want fiat's kept at 0 and orders' at 5", places, ok)
	}
	// A rendered page is the same page: the partner reads the same bytes.
	json := get("empty", "empty", "empty", "page")
	if w := get("empty", "empty", "empty", "rendered"); w.Code != 200 || w.Body.String() != json.Body.String() {
		t.Errorf("rendered: %d %s\nwant the JSON page's %s", w.Code, w.Body, json.Body)
	}
	if w := get("empty", "empty", "empty", "garbled"); w.Code != 200 || !strings.Contains(w.Body.String(), `"data":[],"hasMore":true`) {
		t.Errorf("a rendered page out of shape: %d %s, want it taken as a service that did not answer", w.Code, w.Body)
	}
	if w := get("empty", "gone", "empty", "page"); w.Code != 410 || !strings.Contains(w.Body.String(), `"code":"cursor_expired"`) {
		t.Errorf("a service past its retention: %d %s", w.Code, w.Body)
	}
	if w := get("down", "down", "down", "down"); w.Code != 500 || !strings.Contains(w.Body.String(), `"code":"internal"`) {
		t.Errorf("every service down: %d %s", w.Code, w.Body)
	}
	// The standbys stall: each service says when to retry, and so does
	// the page (never a 500 for a wait).
	w = get("stalled", "stalled", "stalled", "stalled")
	if w.Code != 409 || w.Header().Get("Retry-After") != "2" || !strings.Contains(w.Body.String(), `"code":"idempotency_in_progress"`) {
		t.Errorf("every service waiting for its standby: %d %v %s, want 409 idempotency_in_progress with Retry-After 2", w.Code, w.Header(), w.Body)
	}
	if w := get("stalled", "empty", "empty", "page"); w.Code != 200 || !strings.Contains(w.Body.String(), `"hasMore":true`) {
		t.Errorf("one service waiting for its standby: %d %s, want the others' page with hasMore", w.Code, w.Body)
	}
}

// Feed pages served at once each answer their own events: the buffers a
// page is read and written into are used again by later pages (pooled),
// never while a page still points into them. Each service renders, into
// every event, the request id it was asked with; half the pages are
// rendered with a length, half streamed without one, and a page of large
// events (past the pooled size) comes between.
func TestFeedPagesAtOnceEachAnswerTheirOwnEvents(t *testing.T) {
	t.Parallel()
	var sources []feedSource
	for i, name := range feedSources {
		s := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			id := r.Header.Get("X-Request-Id")
			n, pad := 20, 800
			if strings.HasSuffix(id, "-large") {
				pad = 20_000 // 20 events of 20 KB: a page of 400 KB
			}
			body := feedwire.AppendHeader(nil, int64(n), false, n)
			for k := range n {
				event := fmt.Sprintf(`{"id":"evt_%032d","type":"payout.processing","createdAt":"2026-11-27T12:00:00Z","data":{"object":{"requestId":%q,"pad":%q}}}`,
					k+1, id, strings.Repeat(string(rune('a'+i)), pad))
				body = feedwire.AppendEvent(body, int64(k+1), int64(k*len(feedSources)+i), []byte(event))
			}
			w.Header().Set("Content-Type", feedwire.ContentType)
			if strings.HasPrefix(id, "stream") {
				// No Content-Length: written in two parts, flushed between.
				_, _ = w.Write(body[:len(body)/2])
				w.(http.Flusher).Flush()
				_, _ = w.Write(body[len(body)/2:])
				return
			}
			_, _ = w.Write(body)
		}))
		t.Cleanup(s.Close)
		u, _ := url.Parse(s.URL)
		sources = append(sources, feedSource{name: name, target: u, rt: http.DefaultTransport})
	}
	g := &Gateway{env: "sandbox", log: slog.New(slog.DiscardHandler), token: []string{"internal-token-0123456789"}}
	f := newFeed(g, sources, "internal-token-0123456789")
	var wg sync.WaitGroup
	for worker := range 8 {
		wg.Go(func() {
			for n := range 25 {
				id := fmt.Sprintf("%s-%d-%d", []string{"length", "stream"}[n%2], worker, n)
				if n == 12 {
					id += "-large"
				}
				c := &call{entry: &apikey.Entry{ID: "acme", IDValue: []string{"acme"}}, requestID: [1]string{id}}
				w := httptest.NewRecorder()
				f.serve(w, httptest.NewRequest(http.MethodGet, "/v1/events?limit=100", nil), c)
				var page struct {
					Data []struct {
						Data struct {
							Object struct {
								RequestID string `json:"requestId"`
								Pad       string `json:"pad"`
							} `json:"object"`
						} `json:"data"`
					} `json:"data"`
				}
				if err := json.Unmarshal(w.Body.Bytes(), &page); w.Code != 200 || err != nil || len(page.Data) != 80 {
					t.Errorf("%s: %d, %d events, %v: %.200s", id, w.Code, len(page.Data), err, w.Body)
					return
				}
				if got := w.Header().Get("Content-Length"); got != strconv.Itoa(w.Body.Len()) {
					t.Errorf("%s: Content-Length %s for %d bytes", id, got, w.Body.Len())
				}
				for k, e := range page.Data {
					// The merge takes the services in turn: event k is
					// service k%4's.
					if o := e.Data.Object; o.RequestID != id || strings.Trim(o.Pad, string(rune('a'+k%len(feedSources)))) != "" {
						t.Errorf("%s: event %d holds %q, %.20q…", id, k, o.RequestID, o.Pad)
						return
					}
				}
			}
		})
	}
	wg.Wait()
}
