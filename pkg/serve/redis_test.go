package serve

import (
	"bytes"
	"context"
	"log/slog"
	"strings"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/partnerpay/api/pkg/environment"
	"github.com/partnerpay/api/pkg/redistest"
)

func TestEvictionPolicy(t *testing.T) {
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

func TestNewRedisTakesOneOfTheTwoURLs(t *testing.T) {
	env := map[string]string{"REDIS_URL": "redis://127.0.0.1:1/0", "REDIS_CLUSTER_URL": "redis://127.0.0.1:2?addr=127.0.0.1:3"}
	if _, _, err := NewRedis(func(k string) string { return env[k] }, RedisTuning{}); err == nil {
		t.Error("both REDIS_URL and REDIS_CLUSTER_URL were accepted")
	}
	delete(env, "REDIS_URL")
	rdb, desc, err := NewRedis(func(k string) string { return env[k] }, RedisTuning{})
	if err != nil || desc != "cluster redis://127.0.0.1:2?addr=127.0.0.1:3" {
		t.Fatalf("%s %v", desc, err)
	}
	if _, ok := rdb.(*redis.ClusterClient); !ok {
		t.Errorf("REDIS_CLUSTER_URL made a %T", rdb)
	}
	rdb.Close()
	env = map[string]string{"REDIS_URL": "redis://:secret@127.0.0.1:1/0"}
	rdb, desc, err = NewRedis(func(k string) string { return env[k] }, RedisTuning{})
	if err != nil || strings.Contains(desc, "secret") {
		t.Fatalf("%s %v: the password must not be shown", desc, err)
	}
	rdb.Close()
}
