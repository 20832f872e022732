package fiat

import (
	"context"
	"errors"
	"time"

	"github.com/partnerpay/api/pkg/records"
	"github.com/redis/go-redis/v9"
)

// Retention is how long records are kept.
const Retention = 365 * 24 * time.Hour

// RedisStore keeps records in Redis.
type RedisStore struct{ rdb redis.UniversalClient }

var _ Store = (*RedisStore)(nil)

// NewRedisStore returns a store on rdb.
func NewRedisStore(rdb redis.UniversalClient) *RedisStore { return &RedisStore{rdb: rdb} }

func (s *RedisStore) put(ctx context.Context, key string, v any) error {
	return records.Put(ctx, s.rdb, key, v, Retention)
}

func (s *RedisStore) get(ctx context.Context, key string, dst any) error {
	return records.Get(ctx, s.rdb, key, dst)
}

// SaveAccount writes an account.
func (s *RedisStore) SaveAccount(ctx context.Context, r AccountRecord) error {
	return s.put(ctx, "fiat:account:"+r.ID, r)
}

// Account reads an account.
func (s *RedisStore) Account(ctx context.Context, id string) (AccountRecord, error) {
	var r AccountRecord
	return r, s.get(ctx, "fiat:account:"+id, &r)
}

// VirtualAccount reads a virtual account.
func (s *RedisStore) VirtualAccount(ctx context.Context, id string) (VirtualAccountRecord, error) {
	var r VirtualAccountRecord
	return r, s.get(ctx, "fiat:va:"+id, &r)
}

// VirtualAccountFor gives a provider account one id of ours for good. The
// record is written before the claim, so whoever loses a race reads a
// record that exists.
func (s *RedisStore) VirtualAccountFor(ctx context.Context, r VirtualAccountRecord) (VirtualAccountRecord, error) {
	byProvider := "fiat:va-by-provider:" + r.ProviderAccountID
	if id, err := s.rdb.Get(ctx, byProvider).Result(); err == nil {
		return s.VirtualAccount(ctx, id)
	} else if !errors.Is(err, redis.Nil) {
		return r, err
	}
	if err := s.put(ctx, "fiat:va:"+r.ID, r); err != nil {
		return r, err
	}
	won, err := s.rdb.SetNX(ctx, byProvider, r.ID, Retention).Result()
	if err != nil || won {
		return r, err
	}
	_ = s.rdb.Del(ctx, "fiat:va:"+r.ID).Err()
	id, err := s.rdb.Get(ctx, byProvider).Result()
	if err != nil {
		return r, err
	}
	return s.VirtualAccount(ctx, id)
}

// SaveDeposit writes a one-off deposit.
func (s *RedisStore) SaveDeposit(ctx context.Context, r DepositRecord) error {
	return s.put(ctx, "fiat:deposit:"+r.ID, r)
}

// Deposit reads a one-off deposit.
func (s *RedisStore) Deposit(ctx context.Context, id string) (DepositRecord, error) {
	var r DepositRecord
	return r, s.get(ctx, "fiat:deposit:"+id, &r)
}
