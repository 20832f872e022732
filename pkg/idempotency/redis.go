package idempotency

import (
	"context"
	"encoding/json"
	"errors"
	"time"

	"github.com/redis/go-redis/v9"
)

// RedisStore keeps records in Redis.
type RedisStore struct{ rdb redis.UniversalClient }

var _ Store = (*RedisStore)(nil)

// NewRedisStore returns a store on rdb.
func NewRedisStore(rdb redis.UniversalClient) *RedisStore { return &RedisStore{rdb: rdb} }

// Claim sets the in-flight record with SET NX, or reads the one there.
func (s *RedisStore) Claim(ctx context.Context, key, fingerprint string, lock time.Duration) (*Record, bool, error) {
	inFlight, err := json.Marshal(Record{Fingerprint: fingerprint})
	if err != nil {
		return nil, false, err
	}
	for range 3 { // the record can lapse between SET NX and GET; then claim again
		ok, err := s.rdb.SetNX(ctx, key, inFlight, lock).Result()
		if err != nil {
			return nil, false, err
		}
		if ok {
			return nil, true, nil
		}
		b, err := s.rdb.Get(ctx, key).Bytes()
		if errors.Is(err, redis.Nil) {
			continue
		}
		if err != nil {
			return nil, false, err
		}
		var rec Record
		if err := json.Unmarshal(b, &rec); err != nil {
			return nil, false, err
		}
		return &rec, false, nil
	}
	return nil, false, errors.New("idempotency: record kept lapsing while claimed")
}

// Complete stores the answer for Retention.
func (s *RedisStore) Complete(ctx context.Context, key string, rec Record) error {
	b, err := json.Marshal(rec)
	if err != nil {
		return err
	}
	return s.rdb.Set(ctx, key, b, Retention).Err()
}

// Release deletes the record.
func (s *RedisStore) Release(ctx context.Context, key string) error {
	return s.rdb.Del(ctx, key).Err()
}
