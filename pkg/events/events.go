// Package events is the events feed's part in each service that owns
// records (DESIGN §9): every status change writes its event in the same
// transaction as the change (Write), a sequencer gives each committed event
// its place in the feed (Sequence), the feed is read a page at a time by
// place (Read), and retention deletes events older than 30 days (Retain).
//
// Why places are given after the commit: a place taken when an event is
// written (a sequence, a timestamp) can be handed out by a reader before an
// earlier-numbered event's transaction commits, and a reader past it would
// skip that event for good. The sequencer places only what has committed,
// one round at a time under a lock, in the order the events were written;
// an event whose transaction commits late gets a later place, never one
// behind a cursor already handed out. An object's events keep their order:
// its changes are written one after another (each under the object's row
// lock), so they are written, committed and placed in that order.
//
// Each service has a feed of its own (For), in tables of its own. The
// gateway merges the four services' feeds into GET /v1/events (its cursor
// carries each service's place).
package events

import (
	"bytes"
	"context"
	"crypto/rand"
	"embed"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"strings"
	"testing/fstest"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/partnerpay/api/pkg/database"
	"github.com/partnerpay/api/pkg/environment"
	"github.com/partnerpay/api/pkg/worker"
)

//go:embed migrations/*.sql
var schema embed.FS

// Feed is one service's feed: its tables are <service>_events,
// <service>_event_sequencer and <service>_event_horizons.
type Feed struct{ name string }

// For is the feed of service (payout, fiat, consent, orders).
func For(service string) Feed {
	if service == "" || strings.Trim(service, "abcdefghijklmnopqrstuvwxyz") != "" {
		panic("events: a feed's name is lower-case letters: " + service)
	}
	return Feed{name: service}
}

// Migrations is the feed's schema, applied by its service with its own
// (as the set <service>_events).
func (f Feed) Migrations() database.Migrations {
	// The schema is written once, for any service: {{feed}} is its name.
	// fstest.MapFS is only a map that is an fs.FS.
	files, _ := fs.ReadDir(schema, "migrations")
	out := fstest.MapFS{}
	for _, file := range files {
		text, _ := fs.ReadFile(schema, "migrations/"+file.Name())
		out[file.Name()] = &fstest.MapFile{Data: []byte(strings.ReplaceAll(string(text), "{{feed}}", f.name))}
	}
	return database.Migrations{Name: f.name + "_events", FS: out}
}

// sql is query with the feed's table names for events, event_sequencer
// and event_horizons.
func (f Feed) sql(query string) string {
	return strings.NewReplacer("events", f.name+"_events", "event_sequencer", f.name+"_event_sequencer",
		"event_horizons", f.name+"_event_horizons").Replace(query)
}

// Table is the name of the feed's events table, for a statement that
// writes an event itself.
func (f Feed) Table() string { return f.name + "_events" }

// Retention is how long an event is kept.
const Retention = 30 * 24 * time.Hour

// Event is one change of one record, to be written.
type Event struct {
	KeyID    string
	Type     string // <resource>.<status>: payout.processing, payout.refund.sent
	ObjectID string
	At       time.Time
	// Data is the event's data as the feed answers it.
	Data []byte
}

// New is the event typ of object id, at at: object is the record as its
// status call answers it in env (environment first, as the gateway stamps
// it), and previous its status before ("" for a record just made).
func New(env environment.Name, keyID, typ, id string, at time.Time, object any, previous string) (Event, error) {
	body, err := json.Marshal(object)
	if err != nil || len(body) < 2 || body[0] != '{' {
		return Event{}, fmt.Errorf("event %s of %s: the object is not a JSON object: %v", typ, id, err)
	}
	var b bytes.Buffer
	b.Grow(len(body) + 64)
	b.WriteString(`{"object":{"environment":"`)
	b.WriteString(string(env))
	b.WriteByte('"')
	if len(body) > 2 {
		b.WriteByte(',')
	}
	b.Write(body[1:])
	if previous != "" {
		b.WriteString(`,"previousStatus":`)
		p, _ := json.Marshal(previous)
		b.Write(p)
	}
	b.WriteByte('}')
	return Event{KeyID: keyID, Type: typ, ObjectID: id, At: at.UTC(), Data: b.Bytes()}, nil
}

// With is e with one more member of its data: name, a string value (a
// refund event's refundId: which of the object's refunds it is about).
func (e Event) With(name, value string) Event {
	if len(e.Data) < 2 || e.Data[len(e.Data)-1] != '}' {
		return e
	}
	n, _ := json.Marshal(name)
	v, _ := json.Marshal(value)
	data := make([]byte, 0, len(e.Data)+len(n)+len(v)+2)
	data = append(data, e.Data[:len(e.Data)-1]...)
	data = append(append(append(append(data, ','), n...), ':'), v...)
	e.Data = append(data, '}')
	return e
}

// Write inserts evs in tx: the transaction of the change they describe.
func (f Feed) Write(ctx context.Context, tx pgx.Tx, evs ...Event) error {
	if len(evs) == 0 {
		return nil
	}
	ids, keys, types, objects, ats, data := make([]string, len(evs)), make([]string, len(evs)), make([]string, len(evs)),
		make([]string, len(evs)), make([]time.Time, len(evs)), make([]string, len(evs))
	for i, e := range evs {
		ids[i], keys[i], types[i], objects[i], ats[i], data[i] = NewID(), e.KeyID, e.Type, e.ObjectID, e.At, string(e.Data)
	}
	_, err := tx.Exec(ctx, f.sql(`INSERT INTO events (id, key_id, type, object_id, created_at, data)
		SELECT id, key_id, type, object_id, created_at, data
		FROM unnest($1::text[], $2::text[], $3::text[], $4::text[], $5::timestamptz[], $6::json[])
			WITH ORDINALITY AS e (id, key_id, type, object_id, created_at, data, i)
		ORDER BY i`), ids, keys, types, objects, ats, data)
	if err != nil {
		return fmt.Errorf("write %d events: %w", len(evs), err)
	}
	return nil
}

// NewID is a new event id: evt_ and 32 hex digits.
func NewID() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	return "evt_" + hex.EncodeToString(b[:])
}

// batch is how many events a round of the sequencer or of retention
// handles at most.
const batch = 1000

// Sequence places the events committed and not yet placed, in the order
// they were written, after the last place given; it returns how many. A
// round another replica's sequencer holds is skipped (0).
func (f Feed) Sequence(ctx context.Context, db *database.DB) (int, error) {
	n := 0
	err := db.Tx(ctx, func(tx pgx.Tx) error {
		var last int64
		switch err := tx.QueryRow(ctx, f.sql(`SELECT seq FROM event_sequencer FOR UPDATE SKIP LOCKED`)).Scan(&last); {
		case errors.Is(err, database.ErrNoRows):
			return nil // another replica is placing
		case err != nil:
			return err
		}
		tag, err := tx.Exec(ctx, f.sql(`WITH next AS (
				SELECT n, $1::bigint + row_number() OVER (ORDER BY n) AS seq
				FROM (SELECT n FROM events WHERE seq IS NULL ORDER BY n LIMIT $2) unplaced)
			UPDATE events e SET seq = next.seq FROM next WHERE e.n = next.n`), last, batch)
		if err != nil {
			return fmt.Errorf("place events: %w", err)
		}
		if n = int(tag.RowsAffected()); n == 0 {
			return nil
		}
		_, err = tx.Exec(ctx, f.sql(`UPDATE event_sequencer SET seq = seq + $1`), n)
		return err
	})
	return n, err
}

// Retain deletes up to a batch of the oldest placed events written before
// before, and notes how far each key's feed is deleted; it returns how
// many it deleted. It reads the first rows by n (the primary key's order,
// an index range of one batch) and filters those: the planner sees the
// bound, so it never scans the table (a bound by subquery was invisible
// to it: 4.5 s and 1.6 GB of reads at 1.2 M events).
func (f Feed) Retain(ctx context.Context, db *database.DB, before time.Time) (int, error) {
	var n int
	err := db.QueryRow(ctx, f.sql(RetainSQL), before, batch).Scan(&n)
	return n, err
}

// RetainSQL is retention's statement (BenchmarkFeed holds its plan).
const RetainSQL = `WITH first AS (SELECT n, created_at, seq FROM events ORDER BY n LIMIT $2),
		gone AS (DELETE FROM events e USING first WHERE e.n = first.n AND first.created_at < $1 AND first.seq IS NOT NULL
			RETURNING e.key_id, e.seq),
		horizons AS (INSERT INTO event_horizons (key_id, deleted_through) SELECT key_id, max(seq) FROM gone GROUP BY key_id
			ON CONFLICT (key_id) DO UPDATE SET deleted_through = GREATEST(event_horizons.deleted_through, EXCLUDED.deleted_through))
		SELECT count(*) FROM gone`

// Loops are a feed's two loops in every replica: placement (one places
// at a time), and retention, which deletes old events in a loop of its
// own, so a retention backlog never delays an event's place.
type Loops struct{ place, retain *worker.Loop }

// Loop places events and deletes old ones, in every replica; its rounds
// are counted as the workers "events" and "events_retention".
func (f Feed) Loop(db *database.DB, log *slog.Logger, reg prometheus.Registerer) Loops {
	var caughtUp time.Time
	return Loops{
		place: worker.New("events", func(ctx context.Context) (int, error) { return f.Sequence(ctx, db) }, log, reg),
		retain: worker.New("events_retention", func(ctx context.Context) (int, error) {
			if time.Since(caughtUp) < time.Minute {
				return 0, nil
			}
			gone, err := f.Retain(ctx, db, db.Now().Add(-Retention))
			if err == nil && gone < batch {
				caughtUp = time.Now() // caught up: again in a minute
			}
			return gone, err
		}, log, reg).IdleEvery(time.Second),
	}
}

// Run runs both loops until ctx ends.
func (l Loops) Run(ctx context.Context) {
	done := make(chan struct{})
	go func() { l.retain.Run(ctx); close(done) }()
	l.place.Run(ctx)
	<-done
}

// Query is a page asked of a service's feed.
type Query struct {
	After    int64  // the place of the last event the follower has
	Limit    int    // at most this many events
	Type     string // exact, or a prefix ending in ".*"; "" for every type
	ObjectID string // "" for every object
}

// Stored is an event as the feed answers it, with its place.
type Stored struct {
	Seq       int64           `json:"seq"`
	ID        string          `json:"id"`
	Type      string          `json:"type"`
	CreatedAt time.Time       `json:"createdAt"`
	Data      json.RawMessage `json:"data"`
}

// Page is a page of a service's feed: its events, the place a follower
// that has them all can go on from (Through: past events the filters
// skipped), and whether more may follow.
type Page struct {
	Events  []Stored `json:"events"`
	Through int64    `json:"through"`
	HasMore bool     `json:"hasMore"`
}

// ErrExpired is a place before what retention deleted of the key's feed:
// the follower has lost events.
var ErrExpired = errors.New("events: the cursor is older than the feed's retention")

// scanned is how many events a filtered page looks at most: a filter that
// matches little never makes a page cost more than this.
const scanned = 1000

// Read reads a page of keyID's feed after q.After, in place order. What it
// returns is confirmed on a synchronous standby (DB.Confirm).
func (f Feed) Read(ctx context.Context, db *database.DB, keyID string, q Query) (Page, error) {
	p, err := f.read(ctx, db, keyID, q)
	if err != nil {
		return Page{}, err
	}
	return p, db.Confirm(ctx)
}

func (f Feed) read(ctx context.Context, db *database.DB, keyID string, q Query) (Page, error) {
	if q.After > 0 {
		var through int64
		switch err := db.QueryRow(ctx, f.sql(`SELECT deleted_through FROM event_horizons WHERE key_id = $1`), keyID).Scan(&through); {
		case err == nil && q.After < through:
			return Page{}, ErrExpired
		case err != nil && !errors.Is(err, database.ErrNoRows):
			return Page{}, err
		}
	}
	match, args := "true", []any{keyID, q.After}
	switch {
	case strings.HasSuffix(q.Type, ".*"):
		args = append(args, strings.TrimSuffix(q.Type, "*"))
		match = fmt.Sprintf("starts_with(type, $%d)", len(args))
	case q.Type != "":
		args = append(args, q.Type)
		match = fmt.Sprintf("type = $%d", len(args))
	}
	where, look := "key_id = $1 AND seq > $2", q.Limit+1
	if q.ObjectID != "" {
		args = append(args, q.ObjectID)
		where += fmt.Sprintf(" AND object_id = $%d", len(args))
	}
	if match != "true" && q.ObjectID == "" {
		look = scanned
	}
	rows, err := db.Query(ctx, `SELECT seq, `+match+`, CASE WHEN `+match+` THEN id END, type, created_at, CASE WHEN `+match+` THEN data END
		FROM `+f.Table()+` WHERE `+where+` ORDER BY seq LIMIT `+fmt.Sprint(look), args...)
	if err != nil {
		return Page{}, err
	}
	defer rows.Close()
	p := Page{Events: []Stored{}, Through: q.After}
	seen := 0
	for rows.Next() {
		var (
			e     Stored
			ok    bool
			id    *string
			data  []byte
			place int64
		)
		if err := rows.Scan(&place, &ok, &id, &e.Type, &e.CreatedAt, &data); err != nil {
			return Page{}, err
		}
		seen++
		if !ok {
			p.Through = place
			continue
		}
		if len(p.Events) == q.Limit {
			p.HasMore = true
			break
		}
		e.Seq, e.ID, e.Data = place, *id, data
		p.Events = append(p.Events, e)
		p.Through = place
	}
	if err := rows.Err(); err != nil {
		return Page{}, err
	}
	if seen == look && !p.HasMore {
		p.HasMore = true // the scan stopped at its bound, not at the end
	}
	return p, nil
}
