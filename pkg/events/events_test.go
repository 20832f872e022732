package events

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/partnerpay/api/pkg/database"
	"github.com/partnerpay/api/pkg/environment"
	"github.com/partnerpay/api/testkit/pgtest"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

var feed = For("test")

type thing struct {
	ID     string `json:"thingId"`
	Status string `json:"status"`
}

func event(t testing.TB, key, typ, id string, previous string) Event {
	t.Helper()
	status := typ[strings.LastIndexByte(typ, '.')+1:]
	e, err := New(environment.Sandbox, key, typ, id, time.Now(), thing{id, status}, previous)
	if err != nil {
		t.Fatal(err)
	}
	return e
}

func write(t testing.TB, db *database.DB, evs ...Event) {
	t.Helper()
	if err := db.Tx(context.Background(), func(tx pgx.Tx) error { return feed.Write(context.Background(), tx, evs...) }); err != nil {
		t.Fatal(err)
	}
}

func sequence(t testing.TB, db *database.DB) int {
	t.Helper()
	n, err := feed.Sequence(context.Background(), db)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

func page(t testing.TB, db *database.DB, key string, q Query) Page {
	t.Helper()
	if q.Limit == 0 {
		q.Limit = 100
	}
	p, err := feed.Read(context.Background(), db, key, q)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func types(p Page) []string {
	var out []string
	for _, e := range p.Events {
		out = append(out, e.Type)
	}
	return out
}

// An event is the object as its status call answers it, environment first,
// then its previous status.
func TestAnEventIsTheObjectAsAnswered(t *testing.T) {
	t.Parallel()
	e := event(t, "acme", "thing.done", "th_1", "waiting")
	if want := `{"object":{"environment":"sandbox","thingId":"th_1","status":"done"},"previousStatus":"waiting"}`; string(e.Data) != want {
		t.Errorf("%s\nwant %s", e.Data, want)
	}
	e = event(t, "acme", "thing.waiting", "th_1", "")
	if want := `{"object":{"environment":"sandbox","thingId":"th_1","status":"waiting"}}`; string(e.Data) != want {
		t.Errorf("%s\nwant %s", e.Data, want)
	}
}

// The guarantee a follower relies on (DESIGN §9): an event written by a
// transaction that began first and commits last is not skipped by a
// follower whose cursor moved past a later event that committed first.
func TestAnEventCommittedLateIsNotSkipped(t *testing.T) {
	t.Parallel()
	db := pgtest.Open(t, feed.Migrations())
	ctx := context.Background()

	early, err := db.Pool().Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer early.Rollback(ctx)
	if err := feed.Write(ctx, early, event(t, "acme", "thing.early", "th_1", "")); err != nil {
		t.Fatal(err)
	}
	write(t, db, event(t, "acme", "thing.late", "th_2", "")) // written after, committed first
	sequence(t, db)
	p := page(t, db, "acme", Query{})
	if got := types(p); len(got) != 1 || got[0] != "thing.late" || p.HasMore {
		t.Fatalf("the first page: %v (hasMore %v)", got, p.HasMore)
	}
	if err := early.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	if n := sequence(t, db); n != 1 {
		t.Fatalf("placed %d", n)
	}
	next := page(t, db, "acme", Query{After: p.Through})
	if got := types(next); len(got) != 1 || got[0] != "thing.early" || next.Events[0].Seq <= p.Through {
		t.Fatalf("after the first page: %v", next.Events)
	}
	if again := page(t, db, "acme", Query{After: next.Through}); len(again.Events) != 0 || again.Through != next.Through || again.HasMore {
		t.Errorf("at the end: %+v", again)
	}
}

// A key sees its own events only; type filters by exact type or prefix,
// objectId by object; the cursor goes past what a filter skipped.
func TestFilters(t *testing.T) {
	t.Parallel()
	db := pgtest.Open(t, feed.Migrations())
	write(t, db, event(t, "acme", "payout.awaiting_deposit", "bpo_1", ""), event(t, "globex", "payout.awaiting_deposit", "bpo_2", ""))
	write(t, db, event(t, "acme", "payout.processing", "bpo_1", "awaiting_deposit"), event(t, "acme", "payout.refund.pending", "bpo_1", ""))
	write(t, db, event(t, "acme", "order.completed", "ord_1", "processing"))
	sequence(t, db)
	for _, tt := range []struct {
		q    Query
		want string
	}{
		{Query{}, "payout.awaiting_deposit payout.processing payout.refund.pending order.completed"},
		{Query{Type: "payout.processing"}, "payout.processing"},
		{Query{Type: "payout.*"}, "payout.awaiting_deposit payout.processing payout.refund.pending"},
		{Query{Type: "payout.refund.*"}, "payout.refund.pending"},
		{Query{ObjectID: "ord_1"}, "order.completed"},
		{Query{ObjectID: "bpo_1", Type: "payout.refund.*"}, "payout.refund.pending"},
		{Query{ObjectID: "bpo_2"}, ""},
		{Query{Limit: 2}, "payout.awaiting_deposit payout.processing"},
	} {
		p := page(t, db, "acme", tt.q)
		if got := strings.Join(types(p), " "); got != tt.want {
			t.Errorf("%+v: %q, want %q", tt.q, got, tt.want)
		}
	}
	p := page(t, db, "acme", Query{Type: "payout.*"})
	if last := page(t, db, "acme", Query{}); p.Through != last.Through {
		t.Errorf("a filtered page ends at %d; the feed at %d: the skipped order event would be read again", p.Through, last.Through)
	}
	if p := page(t, db, "globex", Query{}); len(p.Events) != 1 || p.Events[0].Type != "payout.awaiting_deposit" {
		t.Errorf("globex: %v", types(p))
	}
}

// Two sequencers at once (two replicas) never give a place twice, and
// every event gets one.
func TestSequencersTakeTurns(t *testing.T) {
	t.Parallel()
	db := pgtest.Open(t, feed.Migrations())
	var wg sync.WaitGroup
	for w := range 4 {
		wg.Go(func() {
			for i := range 50 {
				write(t, db, event(t, "acme", "thing.made", fmt.Sprintf("th_%d_%d", w, i), ""))
				if _, err := feed.Sequence(context.Background(), db); err != nil {
					t.Error(err)
				}
			}
		})
	}
	wg.Wait()
	for sequence(t, db) > 0 {
	}
	seen := map[int64]bool{}
	after := int64(0)
	for {
		p := page(t, db, "acme", Query{After: after})
		for _, e := range p.Events {
			if seen[e.Seq] {
				t.Fatalf("place %d given twice", e.Seq)
			}
			seen[e.Seq] = true
		}
		after = p.Through
		if !p.HasMore {
			break
		}
	}
	if len(seen) != 200 {
		t.Errorf("%d events placed, want 200", len(seen))
	}
}

// Retention deletes events past 30 days; a cursor before what it deleted
// of the key's feed is expired, one after it is not, and another key's
// cursor is untouched.
func TestRetention(t *testing.T) {
	t.Parallel()
	db := pgtest.Open(t, feed.Migrations())
	ctx := context.Background()
	old := event(t, "acme", "thing.old", "th_1", "")
	old.At = time.Now().Add(-31 * 24 * time.Hour)
	write(t, db, old, old, event(t, "globex", "thing.new", "th_2", ""))
	write(t, db, event(t, "acme", "thing.new", "th_3", ""))
	sequence(t, db)
	first := page(t, db, "acme", Query{Limit: 1})
	n, err := feed.Retain(ctx, db, time.Now().Add(-Retention))
	if err != nil || n != 2 {
		t.Fatalf("retained: %d %v", n, err)
	}
	if _, err := feed.Read(ctx, db, "acme", Query{After: first.Through, Limit: 10}); err != ErrExpired {
		t.Errorf("a cursor into what was deleted: %v", err)
	}
	if p := page(t, db, "acme", Query{}); strings.Join(types(p), " ") != "thing.new" {
		t.Errorf("from the start: %v", types(p))
	}
	if p := page(t, db, "globex", Query{After: 0}); len(p.Events) != 1 {
		t.Errorf("globex: %v", types(p))
	}
}

// BenchmarkFeed reads pages of 100 from a key's feed of 1,000,000 events
// (EVENTS_BENCH_ROWS to change it), the newest and deep ones, unfiltered,
// by type prefix and by object, and fails if a plan scans the table.
func BenchmarkFeed(b *testing.B) {
	rows := 1_000_000
	if v, err := strconv.Atoi(os.Getenv("EVENTS_BENCH_ROWS")); err == nil && v > 0 {
		rows = v
	}
	db := pgtest.Open(b, feed.Migrations())
	ctx := context.Background()
	if _, err := db.Exec(ctx, `INSERT INTO test_events (id, key_id, type, object_id, created_at, data, seq)
		SELECT 'evt_' || md5(i::text), CASE WHEN i % 10 = 0 THEN 'other' ELSE 'bench' END,
			CASE WHEN i % 3 = 0 THEN 'payout.processing' WHEN i % 3 = 1 THEN 'payout.completed' ELSE 'order.completed' END,
			'bpo_' || (i / 3), now(), '{"object":{"environment":"sandbox","status":"completed"}}', i
		FROM generate_series(1, $1) i`, rows); err != nil {
		b.Fatal(err)
	}
	if _, err := db.Exec(ctx, `UPDATE test_event_sequencer SET seq = $1`, rows); err != nil {
		b.Fatal(err)
	}
	if _, err := db.Exec(ctx, `VACUUM ANALYZE test_events`); err != nil {
		b.Fatal(err)
	}
	mid := int64(rows / 2)
	for _, q := range []struct {
		name string
		q    Query
	}{
		{"start", Query{Limit: 100}},
		{"deep", Query{After: mid, Limit: 100}},
		{"type", Query{After: mid, Limit: 100, Type: "payout.*"}},
		{"object", Query{After: 0, Limit: 100, ObjectID: "bpo_" + strconv.Itoa(rows/6)}},
	} {
		b.Run(q.name, func(b *testing.B) {
			for b.Loop() {
				p, err := feed.Read(ctx, db, "bench", q.q)
				if err != nil || len(p.Events) == 0 {
					b.Fatal(len(p.Events), err)
				}
			}
		})
	}
	plan := explain(b, db, `SELECT seq FROM test_events WHERE key_id = 'bench' AND seq > 500000 ORDER BY seq LIMIT 101`) +
		explain(b, db, `SELECT seq FROM test_events WHERE key_id = 'bench' AND object_id = 'bpo_7' AND seq > 0 ORDER BY seq LIMIT 101`) +
		explain(b, db, strings.ReplaceAll(strings.ReplaceAll(feed.sql(RetainSQL), "$1", "now() - interval '30 days'"), "$2", "1000"))
	if strings.Contains(plan, "Seq Scan") {
		b.Fatalf("a page, or retention, scans the table:\n%s", plan)
	}
	// Retention's statement at this size, with nothing to delete (every
	// event is new): a batch read by index, not a table's worth.
	b.Run("retention", func(b *testing.B) {
		for b.Loop() {
			if n, err := feed.Retain(ctx, db, time.Now().Add(-Retention)); err != nil || n != 0 {
				b.Fatal(n, err)
			}
		}
	})
}

func explain(b *testing.B, db *database.DB, query string) string {
	rows, err := db.Query(context.Background(), "EXPLAIN "+query)
	if err != nil {
		b.Fatal(err)
	}
	lines, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		b.Fatal(err)
	}
	return strings.Join(lines, "\n") + "\n"
}

// BenchmarkPlacementDuringRetention writes events one at a time while
// retention deletes a backlog of EVENTS_BACKLOG events past 30 days
// (100,000 by default) in its own loop, and reports how long each new
// event waits for its place: retention never delays placement.
func BenchmarkPlacementDuringRetention(b *testing.B) {
	backlog := 100_000
	if v, err := strconv.Atoi(os.Getenv("EVENTS_BACKLOG")); err == nil && v > 0 {
		backlog = v
	}
	db := pgtest.Open(b, feed.Migrations())
	ctx := context.Background()
	if _, err := db.Exec(ctx, `INSERT INTO test_events (id, key_id, type, object_id, created_at, data, seq)
		SELECT 'evt_' || md5(i::text), 'old', 'payout.completed', 'bpo_' || i, now() - interval '40 days', '{"object":{}}', i
		FROM generate_series(1, $1) i`, backlog); err != nil {
		b.Fatal(err)
	}
	if _, err := db.Exec(ctx, `UPDATE test_event_sequencer SET seq = $1`, backlog); err != nil {
		b.Fatal(err)
	}
	loops := feed.Loop(db, slog.New(slog.DiscardHandler), prometheus.NewRegistry())
	lctx, stop := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() { loops.Run(lctx); close(done) }()
	var waits []time.Duration
	for b.Loop() {
		e := event(b, "acme", "thing.new", "th_1", "")
		start := time.Now()
		write(b, db, e)
		for {
			var placed bool
			if err := db.QueryRow(ctx, `SELECT bool_and(seq IS NOT NULL) FROM test_events WHERE key_id = 'acme'`).Scan(&placed); err != nil {
				b.Fatal(err)
			}
			if placed {
				break
			}
			time.Sleep(time.Millisecond)
		}
		waits = append(waits, time.Since(start))
	}
	var left int
	if err := db.QueryRow(ctx, `SELECT count(*) FROM test_events WHERE key_id = 'old'`).Scan(&left); err != nil {
		b.Fatal(err)
	}
	stop()
	<-done
	slices.Sort(waits)
	b.ReportMetric(float64(waits[len(waits)/2].Microseconds())/1000, "p50-ms")
	b.ReportMetric(float64(waits[len(waits)-1].Microseconds())/1000, "max-ms")
	b.Logf("%d events placed while retention deleted %d of a %d-event backlog: p50 %s, max %s",
		len(waits), backlog-left, backlog, waits[len(waits)/2], waits[len(waits)-1])
}
