package events

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/partnerpay/api/pkg/database"
	"github.com/partnerpay/api/testkit/pgtest"
)

// walSince is the WAL written since lsn, in bytes.
func walSince(t testing.TB, db *database.DB, lsn string) int64 {
	t.Helper()
	var n int64
	if err := db.QueryRow(context.Background(), `SELECT pg_current_wal_lsn() - $1::pg_lsn`, lsn).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

func walNow(t testing.TB, db *database.DB) (lsn, redo string) {
	t.Helper()
	if err := db.QueryRow(context.Background(), `SELECT pg_current_wal_lsn()::text, (pg_control_checkpoint()).redo_lsn::text`).Scan(&lsn, &redo); err != nil {
		t.Fatal(err)
	}
	return lsn, redo
}

// Placing an event (its place in the feed, given after its commit) writes
// less than half the WAL that writing it did: the place is a few bytes of
// a row whose data is a kilobyte, updated within its page (the events
// table's fillfactor). Before, the update moved the row to another page
// and wrote it whole again: 1,517 B placed against 1,465 B written.
func TestPlacingAnEventWritesLessWALThanWritingIt(t *testing.T) {
	// Not parallel: the WAL position is the cluster's, which a test beside
	// this one writes to as well (once, under make test: 5,719 B "placed").
	db := pgtest.Open(t, feed.Migrations())
	// Nor does autovacuum write to it here.
	if _, err := db.Exec(context.Background(), `ALTER TABLE test_events SET (autovacuum_enabled = false)`); err != nil {
		t.Fatal(err)
	}
	const events = 200
	object := thing{ID: "th_1", Status: strings.Repeat("x", 1000)}
	for try := 1; ; try++ {
		start, redo := walNow(t, db)
		for range events {
			e, err := New("sandbox", "acme", "thing.new", "th_1", time.Now(), object, "")
			if err != nil {
				t.Fatal(err)
			}
			write(t, db, e)
		}
		written := walSince(t, db, start)
		mid, _ := walNow(t, db)
		if n := sequence(t, db); n != events {
			t.Fatalf("placed %d, want %d", n, events)
		}
		placed := walSince(t, db, mid)
		_, after := walNow(t, db)
		if after != redo && try < 3 {
			continue // a checkpoint between: pages written again whole
		}
		t.Logf("WAL per event: %d B written, %d B placed", written/events, placed/events)
		if 2*placed >= written {
			t.Errorf("placing an event wrote %d B of WAL, writing it %d B: want under half", placed/events, written/events)
		}
		return
	}
}
