package ratelimit

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-redis/redis_rate/v10"
	"github.com/redis/go-redis/v9"

	"github.com/partnerpay/api/testkit/redistest"
)

type fakeClock struct{ t time.Time }

func (c *fakeClock) now() time.Time          { return c.t }
func (c *fakeClock) advance(d time.Duration) { c.t = c.t.Add(d) }

func TestLocalGCRA(t *testing.T) {
	t.Parallel()
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
	t.Parallel()
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
	entries       atomic.Int32 // times it fell back
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
		r.entries.Add(1)
	} else {
		r.fallback.Add(-1)
	}
}

func TestRedisThenFallbackThenRedis(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	rdb := redis.NewClient(&redis.Options{Addr: srv.Addr, MaxRetries: -1, ContextTimeoutEnabled: true, DialTimeout: 100 * time.Millisecond})
	defer rdb.Close()
	rec := &recorder{}
	l := New(redis_rate.NewLimiter(rdb), Options{Timeout: 50 * time.Millisecond, Recheck: 100 * time.Millisecond}, slog.New(slog.DiscardHandler), rec)
	ctx := context.Background()
	// A busy machine may take longer than the limiter's 50 ms to dial and
	// load its script the first time: the test starts from a warm
	// connection, as a running gateway does (its verdict is not the
	// machine's speed).
	for warm := time.Now().Add(10 * time.Second); l.Allow(ctx, "warm", 1000).Local; time.Sleep(150 * time.Millisecond) {
		if time.Now().After(warm) {
			t.Fatal("the limiter never reached Redis")
		}
	}

	if d := l.Allow(ctx, "k", 1); !d.Allowed || d.Local {
		t.Fatalf("first: %+v", d)
	}
	if d := l.Allow(ctx, "k", 1); d.Allowed || d.Local || d.RetryAfter <= 0 {
		t.Fatalf("second at 1/s: %+v", d)
	}

	srv.Stop()
	// The in-process bucket goes on from where Redis left "k": spent.
	if d := l.Allow(ctx, "k", 1); d.Allowed || !d.Local || d.RetryAfter <= 0 {
		t.Fatalf("with Redis down, a key that spent its bucket in Redis: %+v, want refused in-process", d)
	}
	if d := l.Allow(ctx, "fresh-in-fallback", 1); !d.Allowed || !d.Local {
		t.Fatalf("with Redis down: %+v, want allowed in-process", d)
	}
	if d := l.Allow(ctx, "fresh-in-fallback", 1); d.Allowed || !d.Local {
		t.Fatalf("in-process limiting keeps the rate: %+v", d)
	}
	if rec.fallback.Load() != 1 {
		t.Fatalf("fallback not reported")
	}

	srv.Restart()
	// Back on Redis once a recheck finds it answering.
	deadline := time.Now().Add(5 * time.Second)
	for i := 0; l.Allow(ctx, fmt.Sprintf("fresh-%d", i), 1).Local; i++ {
		if time.Now().After(deadline) {
			t.Fatal("still limiting in-process 5 s after Redis came back")
		}
		time.Sleep(10 * time.Millisecond)
	}
	if rec.fallback.Load() != 0 {
		t.Fatalf("recovery not reported")
	}
}

// An idle gateway leaves its fallback when Redis answers again, without
// waiting for a request: the gauge and its alert follow Redis' health.
func TestTheFallbackFollowsRedisNotTheNextRequest(t *testing.T) {
	t.Parallel()
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
	t.Parallel()
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

func (b *slowBackend) AllowN(ctx context.Context, _ string, _ redis_rate.Limit, _ int) (*redis_rate.Result, error) {
	b.calls.Add(1)
	<-ctx.Done()
	return nil, ctx.Err()
}

func TestAHungRedisCostsOneDeadlineNotOnePerRequest(t *testing.T) {
	t.Parallel()
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

func (failingBackend) AllowN(ctx context.Context, _ string, _ redis_rate.Limit, _ int) (*redis_rate.Result, error) {
	return nil, errors.New("boom")
}

func TestAClientThatLeftDoesNotTripTheFallback(t *testing.T) {
	t.Parallel()
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

// countingBackend counts the calls that reach Redis.
type countingBackend struct {
	Backend
	calls atomic.Int32
}

func (b *countingBackend) AllowN(ctx context.Context, key string, limit redis_rate.Limit, n int) (*redis_rate.Result, error) {
	b.calls.Add(1)
	return b.Backend.AllowN(ctx, key, limit, n)
}

// startRedis is a client of a redis-server of the test's own.
func startRedis(t *testing.T) *redis.Client {
	rdb := redis.NewClient(&redis.Options{Addr: redistest.Start(t).Addr})
	t.Cleanup(func() { rdb.Close() })
	return rdb
}

func newRedisLimiter(t *testing.T, rdb *redis.Client, now func() time.Time) (*Limiter, *countingBackend) {
	b := &countingBackend{Backend: redis_rate.NewLimiter(rdb)}
	return New(b, Options{Timeout: time.Second, Now: now}, slog.New(slog.DiscardHandler), nil), b
}

// TestAHighRateKeyLeasesItsTokens: a 1000/s key asks Redis once per 20
// requests; a 2/s and a 99/s key ask for every one, exactly.
func TestAHighRateKeyLeasesItsTokens(t *testing.T) {
	t.Parallel()
	rdb := startRedis(t)
	ctx := context.Background()
	for _, c := range []struct {
		rate, requests, calls int
	}{{1000, 200, 10}, {99, 50, 50}, {2, 2, 2}} {
		l, b := newRedisLimiter(t, rdb, nil)
		key := "k" + strconv.Itoa(c.rate)
		for i := range c.requests {
			if d := l.Allow(ctx, key, c.rate); !d.Allowed || d.Local {
				t.Fatalf("%d/s, request %d: %+v", c.rate, i, d)
			}
		}
		// The next lease is fetched in the background once half of one is
		// left: one call may still be in flight, and is counted.
		waitForRefills(l, key)
		if got := int(b.calls.Load()); got < c.calls || got > c.calls+1 {
			t.Errorf("%d/s: %d requests asked Redis %d times, want %d (+1 prefetched)", c.rate, c.requests, got, c.calls)
		}
	}
	// A 2/s key stays exact: the third request in the same second is refused.
	l, _ := newRedisLimiter(t, rdb, nil)
	if d := l.Allow(ctx, "k2", 2); d.Allowed || d.RetryAfter <= 0 {
		t.Errorf("a 2/s key's third request: %+v", d)
	}
}

// TestUnspentLeasedTokensAreGivenUp: tokens held longer than LeaseTTL are
// not spent; the next request asks Redis again.
func TestUnspentLeasedTokensAreGivenUp(t *testing.T) {
	t.Parallel()
	c := &fakeClock{t: time.Now()}
	l, b := newRedisLimiter(t, startRedis(t), c.now)
	ctx := context.Background()
	d := l.Allow(ctx, "k", 1000) // takes 20, spends 1
	if !d.Allowed || b.calls.Load() != 1 || d.Remaining != 999 {
		t.Fatalf("first: %+v after %d calls; want allowed, 999 left (980 in Redis + 19 held)", d, b.calls.Load())
	}
	l.Allow(ctx, "k", 1000)
	c.advance(LeaseTTL)
	l.Allow(ctx, "k", 1000)
	if b.calls.Load() != 2 {
		t.Errorf("after LeaseTTL the held tokens were spent: %d calls, want 2", b.calls.Load())
	}
}

// TestLeasingOverAdmitsNoMoreThanItsBound: two replicas hammering one
// 500/s key (leases of 10) admit what the shared bucket allows (a burst of
// 500, then 500 a second), give or take MaxHeld (14) per replica.
func TestLeasingOverAdmitsNoMoreThanItsBound(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	rdb := redis.NewClient(&redis.Options{Addr: srv.Addr, PoolSize: 32})
	defer rdb.Close()
	const rate, replicas = 500, 2
	var admitted atomic.Int64
	start := time.Now()
	stop := start.Add(1200 * time.Millisecond)
	var wg sync.WaitGroup
	for range replicas {
		l, _ := newRedisLimiter(t, rdb, nil)
		for range 8 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for time.Now().Before(stop) {
					if l.Allow(context.Background(), "shared", rate).Allowed {
						admitted.Add(1)
					}
				}
			}()
		}
	}
	wg.Wait()
	elapsed := time.Since(start).Seconds()
	exact := rate + rate*elapsed // the burst, then the rate
	bound := float64(replicas * MaxHeld(rate))
	got := float64(admitted.Load())
	if got > exact+bound+rate*0.02 || got < 0.9*exact-bound {
		t.Errorf("admitted %v in %.2fs; the bucket allows %.0f, the bound is ±%v", got, elapsed, exact, bound)
	}
}

// waitForRefills waits until no refill of key is in flight.
func waitForRefills(l *Limiter, key string) {
	v, ok := l.leases.Load(key)
	if !ok {
		return
	}
	le := v.(*lease)
	for {
		le.mu.Lock()
		landed := le.refilling
		le.mu.Unlock()
		if landed == nil {
			return
		}
		<-landed
	}
}

// TestARequestDoesNotWaitForTheNextLease: with half a lease left the next
// one is fetched in the background; a Redis that is slow to answer it
// (paused here) does not hold up the requests that still have tokens.
func TestARequestDoesNotWaitForTheNextLease(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	rdb := redis.NewClient(&redis.Options{Addr: srv.Addr, MaxRetries: -1, ContextTimeoutEnabled: true})
	defer rdb.Close()
	l, b := newRedisLimiter(t, rdb, nil)
	ctx := context.Background()
	const rate = 1000 // leases of 20; the refill starts with 9 left
	for range 10 {
		if d := l.Allow(ctx, "k", rate); !d.Allowed {
			t.Fatalf("%+v", d)
		}
	}
	srv.Pause()
	defer srv.Resume()
	for i := range 10 { // the first starts the refill, stuck in Redis
		if d := l.Allow(ctx, "k", rate); !d.Allowed || d.Local {
			t.Fatalf("request %d with tokens held: %+v", i, d)
		}
	}
	v, _ := l.leases.Load("k")
	le := v.(*lease)
	le.mu.Lock()
	inFlight := le.refilling != nil
	le.mu.Unlock()
	if !inFlight || b.calls.Load() > 2 {
		t.Errorf("refill in flight %v after %d calls to Redis; want the first lease, then one refill in flight", inFlight, b.calls.Load())
	}
	if d := l.Allow(ctx, "k", rate); !d.Local {
		t.Errorf("with nothing held and Redis not answering, the request is decided in-process: %+v", d)
	}
}

// TestAnEmptyBucketIsNotAskedAgainBeforeItsRetryAfter: once Redis has
// refused a leasing key, requests until the bucket's next token are refused
// in-process, with the right Retry-After (until the next lease exists).
func TestAnEmptyBucketIsNotAskedAgainBeforeItsRetryAfter(t *testing.T) {
	t.Parallel()
	c := &fakeClock{t: time.Now()}
	l, b := newRedisLimiter(t, startRedis(t), c.now)
	ctx := context.Background()
	const rate = 100 // leases of 2
	admitted := 0
	for l.Allow(ctx, "k", rate).Allowed && admitted < 1000 {
		admitted++
		waitForRefills(l, "k")
	}
	if admitted < rate || admitted > 2*rate {
		t.Errorf("admitted %d of a fresh 100/s bucket before a refusal, want about 100", admitted)
	}
	calls := b.calls.Load()
	d := l.Allow(ctx, "k", rate)
	// A lease is all or none: the next one exists once 2 tokens have
	// accrued, 20 ms at 100/s.
	if d.Allowed || d.RetryAfter <= 0 || d.RetryAfter > 20*time.Millisecond || b.calls.Load() != calls {
		t.Errorf("a refused key: %+v after %d more calls; want refused in-process, RetryAfter ≤ 20ms", d, b.calls.Load()-calls)
	}
}

// flakyBackend answers from a real bucket until it is told to fail: a
// Redis that stops answering within its deadline.
type flakyBackend struct {
	Backend
	failing atomic.Bool
}

func (b *flakyBackend) AllowN(ctx context.Context, key string, limit redis_rate.Limit, n int) (*redis_rate.Result, error) {
	if b.failing.Load() {
		return nil, context.DeadlineExceeded
	}
	return b.Backend.AllowN(ctx, key, limit, n)
}

// TestAFallbackGivesNoFreshBurst: a key that spent its bucket in Redis,
// exact (50/s) or leased (300/s), gets no new burst when Redis stops
// answering: the in-process bucket goes on from the shared one's state, at
// this replica's share of the rate.
func TestAFallbackGivesNoFreshBurst(t *testing.T) {
	t.Parallel()
	for _, rate := range []int{50, 300} {
		c := &fakeClock{t: time.Now()}
		b := &flakyBackend{Backend: redis_rate.NewLimiter(startRedis(t))}
		l := New(b, Options{Timeout: time.Second, Recheck: time.Hour, Replicas: 2, Now: c.now}, slog.New(slog.DiscardHandler), nil)
		key := fmt.Sprintf("k%d", rate)
		for i := 0; ; i++ { // spend the shared bucket
			if d := l.Allow(context.Background(), key, rate); !d.Allowed && d.RetryAfter > 0 {
				break
			}
			if i > 2*rate {
				t.Fatalf("%d/s: the bucket never emptied", rate)
			}
			waitForRefills(l, key)
		}
		b.failing.Store(true)
		allowed := 0
		for range rate {
			if d := l.Allow(context.Background(), key, rate); d.Allowed {
				allowed++
			}
		}
		if allowed > 1 {
			t.Errorf("%d/s: %d requests passed at once as Redis failed, with the bucket spent; want none (a fresh burst was %d)", rate, allowed, rate/2)
		}
		c.advance(time.Second) // a second later, this replica's share of a second's tokens
		allowed = 0
		for range rate {
			if d := l.Allow(context.Background(), key, rate); d.Allowed {
				allowed++
			}
		}
		if allowed != rate/2 {
			t.Errorf("%d/s on one of 2 replicas: %d passed a second into the fallback, want %d", rate, allowed, rate/2)
		}
	}
}

// toggleBackend fails while down is set, and allows otherwise.
type toggleBackend struct{ down atomic.Bool }

func (b *toggleBackend) AllowN(_ context.Context, _ string, limit redis_rate.Limit, n int) (*redis_rate.Result, error) {
	if b.down.Load() {
		return nil, errors.New("i/o timeout")
	}
	return &redis_rate.Result{Limit: limit, Allowed: n, Remaining: limit.Burst - n}, nil
}

// A Redis that keeps tipping the limiter into its fallback is a WARN line
// a minute (never an ERROR) saying how many more came, and a count of
// every one for the dashboard and the ticket alert.
func TestFallbacksAreAWarnLineAMinuteAndEachCounts(t *testing.T) {
	t.Parallel()
	var logs bytes.Buffer
	clock := &fakeClock{t: time.Date(2026, 11, 26, 9, 0, 0, 0, time.UTC)}
	rec := &recorder{}
	backend := &toggleBackend{}
	l := New(backend, Options{Now: clock.now}, slog.New(slog.NewJSONHandler(&logs, nil)), rec)
	blip := func() {
		backend.down.Store(true)
		l.Allow(context.Background(), "k", 10)
		clock.advance(time.Second)
		backend.down.Store(false)
		l.Allow(context.Background(), "k", 10)
	}
	for range 10 {
		blip()
	}
	clock.advance(time.Minute)
	blip()
	var lines []map[string]any
	for _, line := range bytes.Split(bytes.TrimSpace(logs.Bytes()), []byte("\n")) {
		var m map[string]any
		if err := json.Unmarshal(line, &m); err != nil {
			t.Fatalf("%v: %s", err, line)
		}
		if m["level"] == "ERROR" {
			t.Errorf("a fallback logged as an error: %s", line)
		}
		if m["msg"] == "rate limit store slow or unavailable; limiting in-process" {
			lines = append(lines, m)
		}
	}
	if len(lines) != 2 || lines[0]["level"] != "WARN" || lines[0]["more_since_last_line"] != 0.0 || lines[1]["more_since_last_line"] != 9.0 {
		t.Errorf("fallback lines %v, want two WARN lines, the second saying 9 more came", lines)
	}
	if n := rec.entries.Load(); n != 11 {
		t.Errorf("the observer heard of %d fallbacks, want 11", n)
	}
}
