package database

import (
	"context"
	"sync/atomic"
	"time"
)

// The system of record's clock is the one clock of the records: a quote's
// expiry, a claim's lease and a record's creation are read on it, so a
// replica whose own clock runs minutes ahead or behind neither executes an
// expired quote nor refuses a valid one (DESIGN §3). Asking PostgreSQL for
// the time on every request would cost a round trip each; the offset
// between its clock and ours is measured instead, at Open and then every
// clockResync, and Now is our clock plus that offset (to within half a
// round trip: tens of microseconds on a local network). The last word on
// a payout's expiry is PostgreSQL's own now(), in its schema. The offset
// is also the operators' gauge (partnerapi_db_clock_offset_seconds), whose
// alerts say which clock is wrong.

// DefaultClockEvery is how often the offset is measured again.
const DefaultClockEvery = 10 * time.Second

type clock struct {
	local  func() time.Time
	every  time.Duration
	offset atomic.Int64 // nanoseconds: the database's clock minus ours
}

// ClockOffset is the database's clock minus this process's, as last
// measured: what the operators' gauge shows (a wrong clock on either side
// moves every expiry and creation time a partner reads).
func (db *DB) ClockOffset() time.Duration { return time.Duration(db.clock.offset.Load()) }

// Now is the database's clock: PostgreSQL's, as last measured.
func (db *DB) Now() time.Time {
	return db.clock.local().Add(time.Duration(db.clock.offset.Load()))
}

// syncClock measures the offset: of a few tries, the one with the
// shortest round trip, its server time taken as read at the midpoint.
func (db *DB) syncClock(ctx context.Context) error {
	best := time.Duration(-1)
	var offset time.Duration
	var err error
	for range 3 {
		var server time.Time
		sent := db.clock.local()
		if err = db.pool.QueryRow(ctx, "SELECT clock_timestamp()").Scan(&server); err != nil {
			continue
		}
		got := db.clock.local()
		rtt := got.Sub(sent)
		if best < 0 || rtt < best {
			best = rtt
			offset = server.Sub(sent.Add(rtt / 2))
		}
	}
	if best < 0 {
		return err
	}
	db.clock.offset.Store(int64(offset))
	return nil
}

// keepClock resyncs until stop is closed.
func (db *DB) keepClock(stop <-chan struct{}) {
	t := time.NewTicker(db.clock.every)
	defer t.Stop()
	for {
		select {
		case <-stop:
			return
		case <-t.C:
		}
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		_ = db.syncClock(ctx) // a failed sync keeps the last offset
		cancel()
	}
}
