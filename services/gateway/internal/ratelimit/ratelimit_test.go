package ratelimit

import (
	"context"
	"errors"
	"log/slog"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-redis/redis_rate/v10"
	"github.com/redis/go-redis/v9"

	"github.com/partnerpay/api/pkg/redistest"
)

type fakeClock struct{ t time.Time }

func (c *fakeClock) now() time.Time          { return c.t }
func (c *fakeClock) advance(d time.Duration) { c.t = c.t.Add(d) }

func TestLocalGCRA(t *testing.T) {
	c := &fakeClock{t: time.Unix(1_700_000_000, 0)}
	l := NewLocal(c.now)
	ctx := context.Background()
	// A burst of rate, then one request per 1/rate seconds.
	for i, wantRemaining := range []int{1, 0} {
		d := l.Allow(ctx, "k", 2)
		if !d.Allowed || d.Remaining != wantRemaining {
			t.Fatalf("request %d: %+v", i, d)
		}
	}
	d := l.Allow(ctx, "k", 2)
	if d.Allowed || d.RetryAfter != 500*time.Millisecond || d.ResetAfter != time.Second {
		t.Fatalf("third request: %+v, want refused, retry in 500ms, full in 1s", d)
	}
	if d.RateLimitHeader() != `"default";r=0;t=1` || d.RetryAfterHeader() != "1" {
		t.Errorf("headers %s / %s", d.RateLimitHeader(), d.RetryAfterHeader())
	}
	if other := l.Allow(ctx, "other", 2); !other.Allowed {
		t.Error("keys share a bucket")
	}
	c.advance(500 * time.Millisecond)
	if d := l.Allow(ctx, "k", 2); !d.Allowed || d.Remaining != 0 {
		t.Fatalf("after 1/rate: %+v", d)
	}
	c.advance(10 * time.Second)
	if d := l.Allow(ctx, "k", 2); !d.Allowed || d.Remaining != 1 {
		t.Fatalf("after a long pause the burst is back: %+v", d)
	}
}

func TestRetryAfterIsAtLeastOneSecond(t *testing.T) {
	d := Decision{RetryAfter: 10 * time.Millisecond}
	if d.RetryAfterHeader() != "1" {
		t.Errorf("Retry-After %s", d.RetryAfterHeader())
	}
	d = Decision{RetryAfter: 2100 * time.Millisecond}
	if d.RetryAfterHeader() != "3" {
		t.Errorf("Retry-After %s, want whole seconds rounded up", d.RetryAfterHeader())
	}
}

type recorder struct {
	local, remote atomic.Int32
	fallback      atomic.Int32
}

func (r *recorder) Decided(d Decision) {
	if d.Local {
		r.local.Add(1)
	} else {
		r.remote.Add(1)
	}
}
func (r *recorder) FallbackChanged(active bool) {
	if active {
		r.fallback.Add(1)
	} else {
		r.fallback.Add(-1)
	}
}

func TestRedisThenFallbackThenRedis(t *testing.T) {
	srv := redistest.Start(t)
	rdb := redis.NewClient(&redis.Options{Addr: srv.Addr, MaxRetries: -1, ContextTimeoutEnabled: true, DialTimeout: 100 * time.Millisecond})
	defer rdb.Close()
	rec := &recorder{}
	l := New(redis_rate.NewLimiter(rdb), Options{Timeout: 50 * time.Millisecond, Recheck: 100 * time.Millisecond}, slog.New(slog.DiscardHandler), rec)
	ctx := context.Background()

	if d := l.Allow(ctx, "k", 1); !d.Allowed || d.Local {
		t.Fatalf("first: %+v", d)
	}
	if d := l.Allow(ctx, "k", 1); d.Allowed || d.Local || d.RetryAfter <= 0 {
		t.Fatalf("second at 1/s: %+v", d)
	}

	srv.Stop()
	if d := l.Allow(ctx, "k", 1); !d.Allowed || !d.Local {
		t.Fatalf("with Redis down: %+v, want allowed in-process", d)
	}
	if d := l.Allow(ctx, "k", 1); d.Allowed || !d.Local {
		t.Fatalf("in-process limiting keeps the rate: %+v", d)
	}
	if rec.fallback.Load() != 1 {
		t.Fatalf("fallback not reported")
	}

	srv.Restart()
	time.Sleep(150 * time.Millisecond)
	if d := l.Allow(ctx, "fresh", 1); d.Local {
		t.Fatalf("after Redis is back and Recheck passed: %+v", d)
	}
	if rec.fallback.Load() != 0 {
		t.Fatalf("recovery not reported")
	}
}

// An idle gateway leaves its fallback when Redis answers again, without
// waiting for a request: the gauge and its alert follow Redis' health.
func TestTheFallbackFollowsRedisNotTheNextRequest(t *testing.T) {
	srv := redistest.Start(t)
	rdb := redis.NewClient(&redis.Options{Addr: srv.Addr, MaxRetries: -1, ContextTimeoutEnabled: true, DialTimeout: 100 * time.Millisecond})
	defer rdb.Close()
	rec := &recorder{}
	l := New(redis_rate.NewLimiter(rdb), Options{Timeout: 50 * time.Millisecond, Recheck: 50 * time.Millisecond,
		Probe: func(ctx context.Context) error { return rdb.Ping(ctx).Err() }}, slog.New(slog.DiscardHandler), rec)
	srv.Stop()
	l.Allow(context.Background(), "k", 10)
	if rec.fallback.Load() != 1 {
		t.Fatal("no fallback with Redis down")
	}
	srv.Restart()
	deadline := time.Now().Add(3 * time.Second)
	for rec.fallback.Load() != 0 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if rec.fallback.Load() != 0 {
		t.Fatal("with no request at all, the fallback did not end when Redis came back")
	}
}

// With N replicas, each limits a key at rate/N while Redis is down.
func TestTheFallbackSharesTheRateAcrossReplicas(t *testing.T) {
	c := &fakeClock{t: time.Unix(1_700_000_000, 0)}
	l := New(failingBackend{}, Options{Replicas: 2, Recheck: time.Hour, Now: c.now}, slog.New(slog.DiscardHandler), nil)
	allowed := 0
	for range 20 {
		if d := l.Allow(context.Background(), "k", 10); d.Allowed {
			allowed++
		}
	}
	if allowed != 5 {
		t.Errorf("a 10/s key on one of 2 replicas passed %d of 20 at once, want its share of 5", allowed)
	}
}

type slowBackend struct{ calls atomic.Int32 }

func (b *slowBackend) Allow(ctx context.Context, _ string, _ redis_rate.Limit) (*redis_rate.Result, error) {
	b.calls.Add(1)
	<-ctx.Done()
	return nil, ctx.Err()
}

func TestAHungRedisCostsOneDeadlineNotOnePerRequest(t *testing.T) {
	b := &slowBackend{}
	l := New(b, Options{Timeout: 20 * time.Millisecond, Recheck: time.Hour}, slog.New(slog.DiscardHandler), nil)
	start := time.Now()
	for range 20 {
		if d := l.Allow(context.Background(), "k", 1000); !d.Allowed || !d.Local {
			t.Fatalf("%+v", d)
		}
	}
	if b.calls.Load() != 1 {
		t.Errorf("Redis asked %d times during one outage window, want 1", b.calls.Load())
	}
	if el := time.Since(start); el > 500*time.Millisecond {
		t.Errorf("20 decisions took %s", el)
	}
}

type failingBackend struct{}

func (failingBackend) Allow(ctx context.Context, _ string, _ redis_rate.Limit) (*redis_rate.Result, error) {
	return nil, errors.New("boom")
}

func TestAClientThatLeftDoesNotTripTheFallback(t *testing.T) {
	rec := &recorder{}
	l := New(failingBackend{}, Options{}, slog.New(slog.DiscardHandler), rec)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	l.Allow(ctx, "k", 1)
	if rec.fallback.Load() != 0 {
		t.Error("a cancelled request switched the limiter to its fallback")
	}
	l.Allow(context.Background(), "k", 1)
	if rec.fallback.Load() != 1 {
		t.Error("a real failure did not switch to the fallback")
	}
}

// BenchmarkRedisAllow is one limiter decision against a real redis-server on
// loopback: the price of the shared bucket.
func BenchmarkRedisAllow(b *testing.B) {
	srv := redistest.Start(b)
	rdb := redis.NewClient(&redis.Options{Addr: srv.Addr})
	defer rdb.Close()
	l := New(redis_rate.NewLimiter(rdb), Options{}, slog.New(slog.DiscardHandler), nil)
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		l.Allow(ctx, "bench", 1<<20)
	}
}

// BenchmarkLocalAllow is one in-process decision, the fallback's price.
func BenchmarkLocalAllow(b *testing.B) {
	l := NewLocal(time.Now)
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		l.Allow(ctx, "bench", 1<<20)
	}
}
