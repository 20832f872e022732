package consent

import (
	"context"
	"encoding/json"
	"errors"
	"time"

	"github.com/redis/go-redis/v9"
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
	b, err := json.Marshal(r)
	if err != nil {
		return err
	}
	return s.rdb.Set(ctx, "consent:session:"+r.ID, b, Retention).Err()
}

// Get reads a session.
func (s *RedisStore) Get(ctx context.Context, id string) (Record, error) {
	var r Record
	b, err := s.rdb.Get(ctx, "consent:session:"+id).Bytes()
	if errors.Is(err, redis.Nil) {
		return r, ErrNotFound
	}
	if err != nil {
		return r, err
	}
	return r, json.Unmarshal(b, &r)
}

// SaveAttempt writes an attempt for ttl.
func (s *RedisStore) SaveAttempt(ctx context.Context, id string, a Attempt, ttl time.Duration) error {
	b, err := json.Marshal(a)
	if err != nil {
		return err
	}
	return s.rdb.Set(ctx, "consent:attempt:"+id, b, ttl).Err()
}

// TakeAttempt reads and deletes an attempt in one step (GETDEL).
func (s *RedisStore) TakeAttempt(ctx context.Context, id string) (Attempt, error) {
	var a Attempt
	b, err := s.rdb.GetDel(ctx, "consent:attempt:"+id).Bytes()
	if errors.Is(err, redis.Nil) {
		return a, ErrNotFound
	}
	if err != nil {
		return a, err
	}
	return a, json.Unmarshal(b, &a)
}
