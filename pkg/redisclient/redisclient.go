// Package redisclient connects a binary to its Redis (one node or a
// Cluster), tuned for what it keeps there, and measures the connection.
package redisclient

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/partnerpay/api/pkg/config"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/extra/redisotel/v9"
	"github.com/redis/go-redis/v9"
	"go.opentelemetry.io/otel/trace"
)

// Config is the Redis part of a binary's configuration (config.Load):
// REDIS_CLUSTER_URL (a Redis Cluster, go-redis' ParseClusterURL form) or
// REDIS_URL (one node; default redis://127.0.0.1:6379/0). Redis holds only
// what may be lost without harm (rate buckets, quote offers); the system of
// record is PostgreSQL.
type Config struct {
	URL        string `env:"REDIS_URL"`
	ClusterURL string `env:"REDIS_CLUSTER_URL"`
}

// Validate refuses both at once.
func (c Config) Validate() error {
	if c.URL != "" && c.ClusterURL != "" {
		return errors.New("set REDIS_URL (one node) or REDIS_CLUSTER_URL (a Redis Cluster), not both")
	}
	return nil
}

// Tuning is how a binary talks to Redis. The zero value suits a service's
// stores: a slow Redis costs a request half a second at most.
type Tuning struct {
	DialTimeout time.Duration // default 1s
	Timeout     time.Duration // read and write; default 500ms
	PoolSize    int           // default go-redis's (10 per CPU)
	// FailFast: no retries, and the caller's context deadline applies (the
	// gateway's limiter, which has its own deadline and a fallback).
	FailFast bool
	// Tracer, when not nil, gets a client span for each command or
	// pipeline (go-redis' own redisotel), without the command's arguments:
	// the quote book's steps in an execution's trace.
	Tracer trace.TracerProvider
}

// Open connects to the deployment's Redis, logs which (without a
// password), routes go-redis' own messages into log, and registers the
// client's metrics on reg.
func (c Config) Open(t Tuning, log *slog.Logger, reg prometheus.Registerer) (redis.UniversalClient, error) {
	rdb, desc, err := c.New(t)
	if err != nil {
		return nil, err
	}
	redis.SetLogger(newRedisLogger(log, time.Now))
	if t.Tracer != nil {
		if err := redisotel.InstrumentTracing(rdb, redisotel.WithTracerProvider(t.Tracer), redisotel.WithDBStatement(false)); err != nil {
			return nil, fmt.Errorf("redis tracing: %w", err)
		}
	}
	log.Info("redis", "target", desc)
	reg.MustRegister(newCollector(rdb, t.DialTimeout))
	return rdb, nil
}

// New builds the client c names; desc says which, without a password.
func (c Config) New(t Tuning) (rdb redis.UniversalClient, desc string, err error) {
	if err := c.Validate(); err != nil {
		return nil, "", err
	}
	if t.DialTimeout == 0 {
		t.DialTimeout = time.Second
	}
	if t.Timeout == 0 {
		t.Timeout = 500 * time.Millisecond
	}
	cluster, single := c.ClusterURL, c.URL
	if cluster != "" {
		o, err := redis.ParseClusterURL(cluster)
		if err != nil {
			return nil, "", fmt.Errorf("REDIS_CLUSTER_URL: %w", err)
		}
		t.apply(&o.DialTimeout, &o.ReadTimeout, &o.WriteTimeout, &o.PoolSize, &o.MaxRetries, &o.ContextTimeoutEnabled)
		// go-redis reads the topology again only on MOVED or every 60 s:
		// after a master's death its slots would keep going to the dead
		// node for up to a minute. A failed call reads it again at once,
		// and a quiet client every 10 s.
		o.ClusterStateReloadInterval = 10 * time.Second
		c := redis.NewClusterClient(o)
		c.AddHook(reloadOnFailure{c})
		return c, "cluster " + config.Redacted(cluster), nil
	}
	if single == "" {
		single = "redis://127.0.0.1:6379/0"
	}
	o, err := redis.ParseURL(single)
	if err != nil {
		return nil, "", fmt.Errorf("REDIS_URL: %w", err)
	}
	t.apply(&o.DialTimeout, &o.ReadTimeout, &o.WriteTimeout, &o.PoolSize, &o.MaxRetries, &o.ContextTimeoutEnabled)
	return redis.NewClient(o), config.Redacted(single), nil
}

// apply sets the tuning on the fields go-redis' Options and ClusterOptions
// share.
func (t Tuning) apply(dial, read, write *time.Duration, pool, retries *int, ctxTimeout *bool) {
	*dial, *read, *write = t.DialTimeout, t.Timeout, t.Timeout
	if t.PoolSize > 0 {
		*pool = t.PoolSize
	}
	if t.FailFast {
		*retries, *ctxTimeout = -1, true
	}
}

// reloadOnFailure has a cluster client read the cluster's topology again
// (lazily: at most one reload at a time, 200 ms apart) whenever a call
// fails for a reason a topology change explains: a node that does not
// answer, or a cluster that says a failover is under way. Calls to a dead
// master's slots then reach its promoted replica moments after the
// promotion.
type reloadOnFailure struct{ c *redis.ClusterClient }

func (h reloadOnFailure) DialHook(next redis.DialHook) redis.DialHook { return next }

func (h reloadOnFailure) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		err := next(ctx, cmd)
		if topologyError(err) {
			h.c.ReloadState(ctx)
		}
		return err
	}
}

func (h reloadOnFailure) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		err := next(ctx, cmds)
		if topologyError(err) {
			h.c.ReloadState(ctx)
		}
		return err
	}
}

// topologyError reports whether err may mean the cluster's topology has
// changed: a node unreachable (refused, reset, timed out, closed), or a
// cluster reporting itself down or mid-failover.
func topologyError(err error) bool {
	if err == nil || errors.Is(err, redis.Nil) {
		return false
	}
	var ne net.Error
	if errors.As(err, &ne) || errors.Is(err, io.EOF) || errors.Is(err, syscall.ECONNREFUSED) || errors.Is(err, syscall.ECONNRESET) ||
		errors.Is(err, context.DeadlineExceeded) {
		return true
	}
	msg := err.Error()
	for _, p := range []string{"CLUSTERDOWN", "TRYAGAIN", "MASTERDOWN", "LOADING"} {
		if strings.HasPrefix(msg, p) {
			return true
		}
	}
	return false
}

// redisLogEvery is how often, at most, one of go-redis' messages is
// logged.
const redisLogEvery = time.Minute

// redisLogger routes go-redis' own messages (pool and cluster events) into
// the binary's JSON log instead of plain lines on stderr, each message at
// most once a minute with how many more came since: while Redis is down,
// go-redis says so for every connection it tries, several times a second.
// go-redis has one logger per process; Open sets it.
type redisLogger struct {
	log  *slog.Logger
	now  func() time.Time
	mu   sync.Mutex
	last map[string]time.Time // by format: one per call site in go-redis
	more map[string]int
}

func newRedisLogger(log *slog.Logger, now func() time.Time) *redisLogger {
	return &redisLogger{log: log, now: now, last: map[string]time.Time{}, more: map[string]int{}}
}

func (l *redisLogger) Printf(ctx context.Context, format string, v ...any) {
	l.mu.Lock()
	now := l.now()
	if at, ok := l.last[format]; ok && now.Sub(at) < redisLogEvery {
		l.more[format]++
		l.mu.Unlock()
		return
	}
	more := l.more[format]
	l.last[format], l.more[format] = now, 0
	l.mu.Unlock()
	l.log.WarnContext(ctx, "redis client: "+fmt.Sprintf(format, v...), "more_since_last_line", more)
}
