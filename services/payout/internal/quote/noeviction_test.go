package quote

import (
	"bytes"
	"context"
	"log/slog"
	"strings"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/partnerpay/api/pkg/environment"
	"github.com/partnerpay/api/testkit/redistest"
)

func TestEvictionPolicy(t *testing.T) {
	t.Parallel()
	rs := redistest.Start(t)
	rdb := redis.NewClient(&redis.Options{Addr: rs.Addr})
	defer rdb.Close()
	ctx := context.Background()
	var logs bytes.Buffer
	log := slog.New(slog.NewJSONHandler(&logs, nil))

	if err := CheckNoEviction(ctx, rdb, environment.Production, log); err != nil || logs.Len() != 0 {
		t.Fatalf("a Redis that never evicts: %v %s", err, logs.String())
	}
	if err := rdb.ConfigSet(ctx, "maxmemory-policy", "allkeys-lru").Err(); err != nil {
		t.Fatal(err)
	}
	err := CheckNoEviction(ctx, rdb, environment.Production, log)
	if err == nil || !strings.Contains(err.Error(), "redis may evict quote tombstones ("+rs.Addr+": maxmemory-policy is allkeys-lru)") {
		t.Fatalf("production against an evicting Redis: %v, want a refusal", err)
	}
	if err := CheckNoEviction(ctx, rdb, environment.Sandbox, log); err != nil || !strings.Contains(logs.String(), "redis may evict quote tombstones") {
		t.Errorf("sandbox warns instead: %v %s", err, logs.String())
	}
}
