package consent

import (
	"context"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/partnerpay/api/pkg/records"
)

// Retention is how long a session is kept.
const Retention = 30 * 24 * time.Hour

// RedisStore keeps sessions and attempts in Redis.
type RedisStore struct{ rdb redis.UniversalClient }

var _ Store = (*RedisStore)(nil)

// NewRedisStore returns a store on rdb.
func NewRedisStore(rdb redis.UniversalClient) *RedisStore { return &RedisStore{rdb: rdb} }

// Save writes a session.
func (s *RedisStore) Save(ctx context.Context, r Record) error {
	return records.Put(ctx, s.rdb, "consent:session:"+r.ID, r, Retention)
}

// Get reads a session.
func (s *RedisStore) Get(ctx context.Context, id string) (Record, error) {
	var r Record
	return r, records.Get(ctx, s.rdb, "consent:session:"+id, &r)
}

// SaveAttempt writes an attempt for ttl.
func (s *RedisStore) SaveAttempt(ctx context.Context, id string, a Attempt, ttl time.Duration) error {
	return records.Put(ctx, s.rdb, "consent:attempt:"+id, a, ttl)
}

// GetAttempt reads an attempt.
func (s *RedisStore) GetAttempt(ctx context.Context, id string) (Attempt, error) {
	var a Attempt
	return a, records.Get(ctx, s.rdb, "consent:attempt:"+id, &a)
}

// DeleteAttempt forgets an attempt: its return address no longer works.
func (s *RedisStore) DeleteAttempt(ctx context.Context, id string) error {
	return s.rdb.Del(ctx, "consent:attempt:"+id).Err()
}

// TakeAttempt reads and deletes an attempt in one step.
func (s *RedisStore) TakeAttempt(ctx context.Context, id string) (Attempt, error) {
	var a Attempt
	return a, records.Take(ctx, s.rdb, "consent:attempt:"+id, &a)
}
