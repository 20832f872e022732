// Package records keeps JSON records in Redis, each under one key with a
// retention: the storage primitive the services' stores are built on. Every
// operation is on one key, so it works the same on a Redis Cluster.
package records

import (
	"context"
	"encoding/json"
	"errors"
	"time"

	"github.com/redis/go-redis/v9"
)

// ErrNotFound is a record that does not exist (or no longer does).
var ErrNotFound = errors.New("not found")

// Put stores v as JSON under key for ttl.
func Put(ctx context.Context, rdb redis.UniversalClient, key string, v any, ttl time.Duration) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	return rdb.Set(ctx, key, b, ttl).Err()
}

// Get reads the record under key into dst; ErrNotFound when there is none.
func Get(ctx context.Context, rdb redis.UniversalClient, key string, dst any) error {
	return decode(rdb.Get(ctx, key), dst)
}

// Take reads and deletes the record under key in one step (GETDEL): of two
// concurrent takers, one gets it and the other ErrNotFound.
func Take(ctx context.Context, rdb redis.UniversalClient, key string, dst any) error {
	return decode(rdb.GetDel(ctx, key), dst)
}

func decode(cmd *redis.StringCmd, dst any) error {
	b, err := cmd.Bytes()
	if errors.Is(err, redis.Nil) {
		return ErrNotFound
	}
	if err != nil {
		return err
	}
	return json.Unmarshal(b, dst)
}
