package idempotency

import (
	"context"
	"crypto/rand"
	"embed"
	"encoding/hex"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/partnerpay/api/pkg/database"
)

//go:embed migrations
var migrations embed.FS

// Migrations is the schema of the idempotency records; every binary that
// serves creating routes applies it with its own.
var Migrations = database.MigrationsIn("idempotency", migrations)

// Store keeps the records in the system of record.
type Store struct {
	db  *database.DB
	now func() time.Time
}

// NewStore returns a store on db.
func NewStore(db *database.DB, now func() time.Time) *Store { return &Store{db: db, now: now} }

// sameRequest reports whether the record answers the request whose
// fingerprint is fp (by its meaning), or raw (by its bytes, as records made
// before fingerprints were by meaning hold).
func (r *Record) sameRequest(fp, raw string) bool { return r.Fingerprint == fp || r.Fingerprint == raw }

// Record is what the store knows of a key that was used before.
type Record struct {
	Fingerprint string
	Finished    bool
	Status      int
	Body        []byte
	lockedUntil time.Time
	released    bool // its request answered without making anything
	seed        string
}

// Claim is a request's hold on its key while it runs. Its owner (a token
// of this attempt) is what the later writes match on, so a claim taken
// over after its lease ran out can no longer renew, finish or release the
// record.
type Claim struct {
	store          *Store
	keyID, keyHash string
	seed           string
	owner          string
	lease          time.Duration
	// answering is set once the request's record is being committed with
	// its answer (Answer): the transaction holds the row, so renewing it
	// would only wait for that transaction.
	answering atomic.Bool
	// answered is the body written in the transaction of the request's
	// record (Answer), once that transaction has called it.
	answered []byte
}

var errClaimLost = errors.New("idempotency: the claim lapsed and was taken over")

// claim takes the key for a request, or returns the record already there.
// A record older than Retention is gone; a claim whose lease ran out (its
// request's process died) is taken over, keeping its seed, so the retry
// makes the same ids the first attempt may have used.
func (s *Store) claim(ctx context.Context, keyID, keyHash, fingerprint, raw string, lease time.Duration) (*Claim, *Record, error) {
	for range 5 {
		now := s.now().UTC().Truncate(time.Microsecond)
		until := now.Add(lease)
		seed, owner := newSeed(), newSeed()
		claimed := func(seed string) *Claim {
			return &Claim{store: s, keyID: keyID, keyHash: keyHash, seed: seed, owner: owner, lease: lease}
		}
		tag, err := s.db.Exec(ctx, `INSERT INTO idempotency_keys (key_id, key_hash, fingerprint, seed, created_at, locked_until, owner)
			VALUES ($1, $2, $3, $4, $5, $6, $7) ON CONFLICT (key_id, key_hash) DO NOTHING`,
			keyID, keyHash, fingerprint, seed, now, until, owner)
		if err != nil {
			return nil, nil, fmt.Errorf("idempotency claim: %w", err)
		}
		if tag.RowsAffected() == 1 {
			return claimed(seed), nil, nil
		}
		rec, created, err := s.read(ctx, keyID, keyHash)
		if errors.Is(err, database.ErrNoRows) {
			continue // released a moment ago
		}
		if err != nil {
			return nil, nil, err
		}
		switch {
		case !created.Add(Retention).After(now):
			// Kept past its day: gone, as far as anyone can tell.
			if _, err := s.db.Exec(ctx, `DELETE FROM idempotency_keys WHERE key_id = $1 AND key_hash = $2 AND created_at = $3`,
				keyID, keyHash, created); err != nil {
				return nil, nil, fmt.Errorf("idempotency expire: %w", err)
			}
			continue
		case rec.released && !rec.Finished && !rec.sameRequest(fingerprint, raw):
			// A released key sent with another request (a typo fixed, say):
			// that request starts afresh, with a seed of its own.
			tag, err = s.db.Exec(ctx, `UPDATE idempotency_keys SET fingerprint = $4, seed = $5, created_at = $6, released_at = NULL, locked_until = $7, owner = $8
				WHERE key_id = $1 AND key_hash = $2 AND finished_at IS NULL AND locked_until = $3`,
				keyID, keyHash, rec.lockedUntil, fingerprint, seed, now, until, owner)
			if err != nil {
				return nil, nil, fmt.Errorf("idempotency reclaim: %w", err)
			}
			if tag.RowsAffected() == 1 {
				return claimed(seed), nil, nil
			}
			continue
		case rec.Finished || !rec.sameRequest(fingerprint, raw) || rec.lockedUntil.After(now):
			return nil, rec, nil
		}
		// A lapsed or released claim of the same request: take it over.
		tag, err = s.db.Exec(ctx, `UPDATE idempotency_keys SET locked_until = $4, released_at = NULL, owner = $5
			WHERE key_id = $1 AND key_hash = $2 AND finished_at IS NULL AND locked_until = $3`,
			keyID, keyHash, rec.lockedUntil, until, owner)
		if err != nil {
			return nil, nil, fmt.Errorf("idempotency take over: %w", err)
		}
		if tag.RowsAffected() == 1 {
			return claimed(rec.seed), nil, nil
		}
	}
	return nil, nil, errors.New("idempotency claim: the record kept changing")
}

func (s *Store) read(ctx context.Context, keyID, keyHash string) (*Record, time.Time, error) {
	var rec Record
	var created time.Time
	var locked, finished, released *time.Time
	var status *int
	err := s.db.QueryRow(ctx, `SELECT fingerprint, seed, created_at, locked_until, finished_at, status, body, released_at
		FROM idempotency_keys WHERE key_id = $1 AND key_hash = $2`, keyID, keyHash).
		Scan(&rec.Fingerprint, &rec.seed, &created, &locked, &finished, &status, &rec.Body, &released)
	if err != nil {
		return nil, time.Time{}, err
	}
	if finished != nil && status != nil {
		rec.Finished, rec.Status = true, *status
	}
	if locked != nil {
		rec.lockedUntil = *locked
	}
	rec.released = released != nil
	return &rec, created, nil
}

const finishSQL = `UPDATE idempotency_keys SET locked_until = NULL, finished_at = $4, status = $5, body = $6
	WHERE key_id = $1 AND key_hash = $2 AND owner = $3 AND finished_at IS NULL`

// finish stores the answer of a claimed request, through q: the store
// itself, or the transaction of the record the answer is for.
func (s *Store) finish(ctx context.Context, q database.Querier, c *Claim, status int, body []byte) error {
	if body == nil {
		body = []byte{}
	}
	tag, err := q.Exec(ctx, finishSQL, c.keyID, c.keyHash, c.owner, s.now().UTC(), status, body)
	if err != nil {
		return fmt.Errorf("idempotency finish: %w", err)
	}
	if tag.RowsAffected() != 1 {
		return errClaimLost
	}
	return nil
}

// release lets go of a claimed key whose request answered without making
// anything it knows of, so a retry runs again: unlocked now, its seed kept.
// A server error may come after an effect the request could not record (a
// provider call made, then the commit failed): the same request retried
// makes the same ids, and the provider call keyed by them finds what it
// made. Another request with the key starts afresh (claim).
func (s *Store) release(ctx context.Context, c *Claim) error {
	now := s.now().UTC().Truncate(time.Microsecond)
	_, err := s.db.Exec(ctx, `UPDATE idempotency_keys SET locked_until = $4, released_at = $4
		WHERE key_id = $1 AND key_hash = $2 AND owner = $3 AND finished_at IS NULL`, c.keyID, c.keyHash, c.owner, now)
	return err
}

// renew extends a claim's lease while its request works; errClaimLost
// when it was taken over (its lease ran out first).
func (s *Store) renew(ctx context.Context, c *Claim) error {
	until := s.now().UTC().Truncate(time.Microsecond).Add(c.lease)
	tag, err := s.db.Exec(ctx, `UPDATE idempotency_keys SET locked_until = $4
		WHERE key_id = $1 AND key_hash = $2 AND owner = $3 AND finished_at IS NULL`, c.keyID, c.keyHash, c.owner, until)
	if err != nil {
		return err
	}
	if tag.RowsAffected() != 1 {
		return errClaimLost
	}
	return nil
}

// Confirm waits until the records read so far are on a synchronous
// standby (database.DB.Confirm): before a replay is answered.
func (s *Store) Confirm(ctx context.Context) error { return s.db.Confirm(ctx) }

// Sweep deletes up to a batch of records older than Retention and reports
// how many; Janitor calls it until none are left.
func (s *Store) Sweep(ctx context.Context) (int64, error) {
	tag, err := s.db.Exec(ctx, `DELETE FROM idempotency_keys WHERE (key_id, key_hash) IN
		(SELECT key_id, key_hash FROM idempotency_keys WHERE created_at < $1 LIMIT 1000)`,
		s.now().UTC().Add(-Retention))
	return tag.RowsAffected(), err
}

// Janitor sweeps expired records every interval until ctx ends. Every
// replica may run one: a sweep deletes what is expired, whoever does it.
func (s *Store) Janitor(ctx context.Context, every time.Duration, onErr func(error)) {
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		for {
			n, err := s.Sweep(ctx)
			if err != nil && ctx.Err() == nil {
				onErr(err)
			}
			if err != nil || n < 1000 {
				break
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

func newSeed() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}
