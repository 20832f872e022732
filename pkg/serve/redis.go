package serve

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/partnerpay/api/pkg/environment"
)

// RedisTuning is how a binary talks to Redis. The zero value suits a
// service's stores: a slow Redis costs a request half a second at most.
type RedisTuning struct {
	DialTimeout time.Duration // default 1s
	Timeout     time.Duration // read and write; default 500ms
	PoolSize    int           // default go-redis's (10 per CPU)
	// FailFast: no retries, and the caller's context deadline applies (the
	// gateway's limiter, which has its own deadline and a fallback).
	FailFast bool
}

// Redis connects to the deployment's Redis: REDIS_CLUSTER_URL (a Redis
// Cluster, go-redis' ParseClusterURL form) or REDIS_URL (one node; default
// redis://127.0.0.1:6379/0). A binary that keeps records checks that Redis
// is durable first (DESIGN §6): in production it refuses one that reports
// AOF off.
func (s *Setup) Redis(ctx context.Context, t RedisTuning) (redis.UniversalClient, error) {
	rdb, desc, err := NewRedis(s.Getenv, t)
	if err != nil {
		return nil, err
	}
	s.Log.Info("redis", "target", desc)
	if s.binary.Records {
		if err := CheckDurable(ctx, rdb, s.Env, s.Log); err != nil {
			rdb.Close()
			return nil, err
		}
	}
	return rdb, nil
}

// NewRedis builds the client REDIS_CLUSTER_URL or REDIS_URL names; desc
// says which, without a password.
func NewRedis(getenv func(string) string, t RedisTuning) (rdb redis.UniversalClient, desc string, err error) {
	if t.DialTimeout == 0 {
		t.DialTimeout = time.Second
	}
	if t.Timeout == 0 {
		t.Timeout = 500 * time.Millisecond
	}
	cluster, single := getenv("REDIS_CLUSTER_URL"), getenv("REDIS_URL")
	if cluster != "" && single != "" {
		return nil, "", errors.New("set REDIS_URL (one node) or REDIS_CLUSTER_URL (a Redis Cluster), not both")
	}
	if cluster != "" {
		o, err := redis.ParseClusterURL(cluster)
		if err != nil {
			return nil, "", fmt.Errorf("REDIS_CLUSTER_URL: %w", err)
		}
		t.apply(&o.DialTimeout, &o.ReadTimeout, &o.WriteTimeout, &o.PoolSize, &o.MaxRetries, &o.ContextTimeoutEnabled)
		return redis.NewClusterClient(o), "cluster " + Redacted(cluster), nil
	}
	if single == "" {
		single = "redis://127.0.0.1:6379/0"
	}
	o, err := redis.ParseURL(single)
	if err != nil {
		return nil, "", fmt.Errorf("REDIS_URL: %w", err)
	}
	t.apply(&o.DialTimeout, &o.ReadTimeout, &o.WriteTimeout, &o.PoolSize, &o.MaxRetries, &o.ContextTimeoutEnabled)
	return redis.NewClient(o), Redacted(single), nil
}

// apply sets the tuning on the fields go-redis' Options and ClusterOptions
// share.
func (t RedisTuning) apply(dial, read, write *time.Duration, pool, retries *int, ctxTimeout *bool) {
	*dial, *read, *write = t.DialTimeout, t.Timeout, t.Timeout
	if t.PoolSize > 0 {
		*pool = t.PoolSize
	}
	if t.FailFast {
		*retries, *ctxTimeout = -1, true
	}
}

// CheckDurable asks every Redis node behind rdb for its persistence
// settings. AOF off is refused in production and a warning in sandbox;
// where a managed Redis forbids CONFIG, it says durability could not be
// verified. It waits up to 10 s for Redis to answer at all.
func CheckDurable(ctx context.Context, rdb redis.UniversalClient, env environment.Name, log *slog.Logger) error {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	var problems []string
	var mu sync.Mutex
	check := func(ctx context.Context, c *redis.Client) error {
		var err error
		for {
			if err = c.Ping(ctx).Err(); err == nil || ctx.Err() != nil {
				break
			}
			time.Sleep(100 * time.Millisecond)
		}
		if err != nil {
			return fmt.Errorf("redis %s does not answer: %w", c.Options().Addr, err)
		}
		cfg, err := c.ConfigGet(ctx, "appendonly").Result()
		if err != nil {
			log.Warn("redis durability could not be verified: CONFIG GET is not allowed", "addr", c.Options().Addr, "err", err)
			return nil
		}
		more, _ := c.ConfigGet(ctx, "appendfsync").Result()
		policy, _ := c.ConfigGet(ctx, "maxmemory-policy").Result()
		mu.Lock()
		defer mu.Unlock()
		if cfg["appendonly"] != "yes" {
			problems = append(problems, c.Options().Addr+": appendonly is "+cfg["appendonly"])
		}
		if f := more["appendfsync"]; cfg["appendonly"] == "yes" && f != "" && f != "always" {
			log.Warn("redis fsyncs its append-only file "+f+", not always: an acknowledged write can be lost in a crash", "addr", c.Options().Addr)
		}
		if p := policy["maxmemory-policy"]; p != "" && p != "noeviction" {
			log.Warn("redis may evict records under memory pressure (maxmemory-policy "+p+"); set noeviction", "addr", c.Options().Addr)
		}
		return nil
	}
	var err error
	switch c := rdb.(type) {
	case *redis.ClusterClient:
		err = c.ForEachMaster(ctx, check)
	case *redis.Client:
		err = check(ctx, c)
	}
	if err != nil {
		if env == environment.Production {
			return err
		}
		log.Warn("redis is not reachable yet; records will fail until it is", "err", err)
		return nil
	}
	if len(problems) == 0 {
		return nil
	}
	msg := "redis is not durable (" + strings.Join(problems, "; ") + "): records partners rely on would not survive a restart; run it with --appendonly yes --appendfsync always"
	if env == environment.Production {
		return errors.New(msg)
	}
	log.Warn(msg)
	return nil
}

// redisLogger routes go-redis' own messages (pool and cluster events) into
// the binary's JSON log instead of plain lines on stderr. go-redis has one
// logger per process; Start sets it.
type redisLogger struct{ log *slog.Logger }

func (l redisLogger) Printf(ctx context.Context, format string, v ...any) {
	l.log.WarnContext(ctx, "redis client: "+fmt.Sprintf(format, v...))
}
