// Package ratelimit applies each key's requests-per-second limit. The bucket
// lives in Redis (redis_rate's GCRA), shared by every gateway replica. When
// Redis does not answer within its deadline, requests are not failed: the
// gateway limits in-process with the same algorithm, at the key's rate
// divided by the number of gateway replicas (so the fleet stays near the
// key's rate), until Redis answers again. Whether Redis answers again is
// probed in the background, so the fallback state follows Redis' health,
// not the next request.
//
// A key of LeaseMinRate requests per second or more does not ask Redis for
// every request: it takes its tokens from the shared bucket a few at a
// time (leaseSize: rate/50, at most LeaseMax) and spends them in-process
// for at most LeaseTTL; the next lease is fetched in the background once
// half of one is left, so a request does not wait for Redis. Every token
// still comes out of the one bucket before it is spent, so over time the
// fleet admits no more than the bucket allows. The bound: a replica never
// holds more than MaxHeld(rate) = 1.5 × leaseSize − 1 tokens, so in any
// one-second window it can spend at most that many tokens taken before the
// window: a key gets at most 3 % of its rate per replica above its exact
// limit in any second (a 1000/s key: 29). Tokens not spent within LeaseTTL
// are given up, never carried: at worst a quiet key loses MaxHeld tokens of
// its burst per replica. Below LeaseMinRate (a 2/s or a 10/s key) every
// request is decided by Redis, exactly.
package ratelimit

import (
	"context"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-redis/redis_rate/v10"
)

// Decision is the outcome for one request.
type Decision struct {
	Allowed    bool
	Limit      int
	Remaining  int
	ResetAfter time.Duration // until the bucket is full again
	RetryAfter time.Duration // until the next request may pass; 0 when allowed
	Local      bool          // decided in-process because Redis was unavailable
}

// Backend is the shared bucket store: redis_rate's Limiter in production.
// AllowN takes n tokens from key's bucket, all or none, and says what is
// left and when to retry. (Not redis_rate's AllowAtMost: when the bucket
// holds a fraction more than a whole token it advances the bucket by the
// fraction but grants the whole part, so a contended key that leases loses
// up to a token per lease: 13 % of a 300/s key's rate through two gateways.)
type Backend interface {
	AllowN(ctx context.Context, key string, limit redis_rate.Limit, n int) (*redis_rate.Result, error)
}

// Leasing: see the package comment.
const (
	LeaseMinRate = 100                    // keys at or above this rate lease tokens
	leaseDivisor = 50                     // a lease is rate/50 tokens: ~50 Redis calls a second at full rate
	LeaseMax     = 1000                   // and at most this many (a lease lasts ~20 ms at full rate, whatever the rate)
	LeaseTTL     = 100 * time.Millisecond // unspent leased tokens are given up after this
)

// leaseSize is how many tokens a request of a key at rate takes from Redis.
func leaseSize(rate int) int {
	if rate < LeaseMinRate {
		return 1
	}
	return min(rate/leaseDivisor, LeaseMax)
}

// MaxHeld is the most tokens of a key at rate one replica holds: the bound
// on its over-admission in any one-second window.
func MaxHeld(rate int) int {
	n := leaseSize(rate)
	if n == 1 {
		return 0
	}
	return n + n/2 - 1
}

// lease is the tokens a replica holds for one key.
type lease struct {
	mu           sync.Mutex
	tokens       int
	expires      time.Time     // held tokens are given up at this time
	remaining    int           // in the shared bucket at the last refill
	reset        time.Time     // when the shared bucket is full again
	refusedUntil time.Time     // Redis refused: no token before this time
	refilling    chan struct{} // non-nil while a refill is in flight
	failed       bool          // the last refill found Redis unavailable
}

// Observer receives every decision, for metrics.
type Observer interface {
	Decided(d Decision)
	FallbackChanged(active bool)
}

// Limiter decides with Redis, or locally while Redis is unavailable.
type Limiter struct {
	backend  Backend
	timeout  time.Duration
	recheck  time.Duration
	probe    func(context.Context) error
	replicas int
	local    *Local
	log      *slog.Logger
	obs      Observer
	now      func() time.Time
	downTill atomic.Int64 // unix nanos before which Redis is not asked
	fallback atomic.Bool
	lastWarn atomic.Int64 // unix nanos of the last fallback line
	unwarned atomic.Int64 // fallbacks since, not logged
	leases   sync.Map     // key → *lease, for keys of LeaseMinRate and more
}

// Options tune a Limiter.
type Options struct {
	// Timeout is Redis's deadline per decision (tens of milliseconds).
	Timeout time.Duration
	// Recheck is how long the limiter stays local after a Redis failure before
	// it asks Redis again, so an outage does not add Timeout to every request.
	Recheck time.Duration
	// Probe asks Redis whether it answers (PING), every Recheck while the
	// limiter is in its fallback; nil: only requests find out.
	Probe func(context.Context) error
	// Replicas is how many gateways share the keys' rates; while Redis is
	// unreachable each limits a key at rate/Replicas (at least 1).
	Replicas int
	// Now is the clock; time.Now when nil.
	Now func() time.Time
}

// New returns a Limiter over backend.
func New(backend Backend, opts Options, log *slog.Logger, obs Observer) *Limiter {
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if opts.Timeout <= 0 {
		opts.Timeout = 50 * time.Millisecond
	}
	if opts.Recheck <= 0 {
		opts.Recheck = 500 * time.Millisecond
	}
	if opts.Replicas < 1 {
		opts.Replicas = 1
	}
	return &Limiter{
		backend: backend, timeout: opts.Timeout, recheck: opts.Recheck, probe: opts.Probe, replicas: opts.Replicas,
		local: NewLocal(opts.Now), log: log, obs: obs, now: opts.Now,
	}
}

// localRate is a key's in-process rate: its share of the fleet's.
func (l *Limiter) localRate(rate int) int { return max(1, rate/l.replicas) }

// Allow decides one request of key at rate per second.
func (l *Limiter) Allow(ctx context.Context, key string, rate int) Decision {
	d, ok := l.remote(ctx, key, rate)
	if !ok {
		d = l.local.Allow(ctx, key, l.localRate(rate))
		d.Limit, d.Local = rate, true
	}
	if l.obs != nil {
		l.obs.Decided(d)
	}
	return d
}

func (l *Limiter) remote(ctx context.Context, key string, rate int) (Decision, bool) {
	if l.down() {
		return Decision{}, false
	}
	n := leaseSize(rate)
	if n == 1 {
		res, ok := l.take(ctx, key, rate, 1)
		if !ok {
			return Decision{}, false
		}
		l.synced(key, rate, res)
		return decision(rate, res), true
	}
	return l.leased(ctx, key, rate, n)
}

// leased decides a request of a key that leases its tokens. A request
// spends a held token when there is one; once fewer than half a lease is
// left, a refill is started in the background, so in steady traffic no
// request waits for Redis. A request that finds no token waits for the
// refill in flight (or starts one). After Redis refuses (the shared bucket
// is empty), requests are refused without asking again until the bucket's
// RetryAfter, when the next token exists.
func (l *Limiter) leased(ctx context.Context, key string, rate, n int) (Decision, bool) {
	v, _ := l.leases.Load(key)
	if v == nil {
		v, _ = l.leases.LoadOrStore(key, &lease{})
	}
	le := v.(*lease)
	le.mu.Lock()
	for {
		now := l.now()
		if !now.Before(le.expires) {
			le.tokens = 0 // held too long: given up
		}
		if le.tokens > 0 {
			le.tokens--
			if le.tokens < n/2 && le.refilling == nil {
				l.refill(le, key, rate, n)
			}
			d := Decision{Allowed: true, Limit: rate, Remaining: le.remaining + le.tokens, ResetAfter: max(0, le.reset.Sub(now))}
			le.mu.Unlock()
			return d, true
		}
		if now.Before(le.refusedUntil) {
			d := Decision{Limit: rate, ResetAfter: max(0, le.reset.Sub(now)), RetryAfter: le.refusedUntil.Sub(now)}
			le.mu.Unlock()
			return d, true
		}
		if le.refilling == nil {
			l.refill(le, key, rate, n)
		}
		landed := le.refilling
		le.mu.Unlock()
		select {
		case <-landed:
		case <-ctx.Done():
			return Decision{}, false
		}
		if l.down() {
			return Decision{}, false
		}
		le.mu.Lock()
		if le.failed {
			le.mu.Unlock()
			return Decision{}, false
		}
	}
}

// refill asks Redis for up to n more tokens from a goroutine of its own;
// le.mu is held. le.refilling is closed when the answer has landed.
func (l *Limiter) refill(le *lease, key string, rate, n int) {
	landed := make(chan struct{})
	le.refilling = landed
	go func() {
		defer close(landed)
		res, ok := l.take(context.Background(), key, rate, n)
		now := l.now()
		le.mu.Lock()
		defer le.mu.Unlock()
		le.refilling, le.failed = nil, !ok
		if !ok {
			return
		}
		l.synced(key, rate, res)
		if !now.Before(le.expires) {
			le.tokens = 0
		}
		if res.Allowed > 0 {
			le.tokens += res.Allowed
			le.expires, le.refusedUntil = now.Add(LeaseTTL), time.Time{}
		} else {
			le.refusedUntil = now.Add(res.RetryAfter)
		}
		le.remaining, le.reset = res.Remaining, now.Add(res.ResetAfter)
	}()
}

// down reports whether Redis is not to be asked now: it failed within the
// last recheck period.
func (l *Limiter) down() bool {
	till := l.downTill.Load()
	return till != 0 && l.now().UnixNano() < till // no clock read while Redis answers
}

// synced keeps key's in-process bucket where Redis last said the shared one
// is (this replica's share of it). Without it, a fallback started with a
// full bucket: each time a slow Redis tipped a gateway into its fallback, a
// key that had just spent its bucket got a whole burst again (a 300/s key
// through two gateways on a busy machine: 1,363 requests in 3 s, not 900).
func (l *Limiter) synced(key string, rate int, res *redis_rate.Result) {
	l.local.Sync(key, l.localRate(rate), res.Remaining/l.replicas)
}

// decision is the answer to one request from a Redis result.
func decision(rate int, res *redis_rate.Result) Decision {
	d := Decision{Allowed: res.Allowed > 0, Limit: rate, Remaining: res.Remaining, ResetAfter: res.ResetAfter}
	if !d.Allowed {
		d.RetryAfter = res.RetryAfter
	}
	return d
}

// take asks Redis for up to n tokens of key; false when Redis failed (the
// limiter is then in its fallback) or the caller went away.
func (l *Limiter) take(ctx context.Context, key string, rate, n int) (*redis_rate.Result, bool) {
	rctx, cancel := context.WithTimeout(ctx, l.timeout)
	defer cancel()
	res, err := l.backend.AllowN(rctx, key, redis_rate.PerSecond(rate), n)
	if err != nil {
		if ctx.Err() != nil {
			// The client went away; that says nothing about Redis.
			return nil, false
		}
		l.downTill.Store(l.now().Add(l.recheck).UnixNano())
		if l.fallback.CompareAndSwap(false, true) {
			l.warnFallback(err)
			if l.obs != nil {
				l.obs.FallbackChanged(true)
			}
			if l.probe != nil {
				go l.probeUntilBack()
			}
		}
		return nil, false
	}
	l.recovered()
	return res, true
}

// fallbackLogEvery is how often, at most, a gateway logs falling back.
const fallbackLogEvery = time.Minute

// warnFallback says the limiter fell back: a WARN, not an ERROR (requests
// still pass, limited in-process; a Redis answer a few milliseconds past
// the deadline on a busy node is enough), at most once a minute with how
// many more fallbacks came since. Each one counts in the observer's
// counter, which the dashboard and GatewayRateLimitFallbackFlapping read.
func (l *Limiter) warnFallback(err error) {
	now := l.now().UnixNano()
	last := l.lastWarn.Load()
	if last != 0 && now-last < int64(fallbackLogEvery) {
		l.unwarned.Add(1)
		return
	}
	if !l.lastWarn.CompareAndSwap(last, now) {
		l.unwarned.Add(1)
		return
	}
	l.log.Warn("rate limit store slow or unavailable; limiting in-process", "err", err, "replicas", l.replicas,
		"more_since_last_line", l.unwarned.Swap(0))
}

// recovered leaves the fallback (once, whoever notices first).
func (l *Limiter) recovered() {
	if l.fallback.CompareAndSwap(true, false) {
		l.downTill.Store(0)
		// Said only after an outage the log told of: a blip the WARN line
		// did not show (it counted it) needs no line for its end either.
		if l.unwarned.Load() == 0 {
			l.log.Info("rate limit store answers again; limiting in Redis")
		}
		if l.obs != nil {
			l.obs.FallbackChanged(false)
		}
	}
}

// probeUntilBack pings Redis every Recheck while the limiter is in its
// fallback, so an idle gateway leaves it (and its gauge) as soon as Redis
// is back, rather than at its next request.
func (l *Limiter) probeUntilBack() {
	t := time.NewTicker(l.recheck)
	defer t.Stop()
	for range t.C {
		if !l.fallback.Load() {
			return
		}
		ctx, cancel := context.WithTimeout(context.Background(), l.timeout)
		err := l.probe(ctx)
		cancel()
		if err == nil {
			l.recovered()
			return
		}
	}
}

// Local is an in-process GCRA with redis_rate's arithmetic: a burst of rate,
// one emission every 1/rate seconds. Each key has its own lock: Sync runs
// on every request Redis decides for a key below LeaseMinRate, and keys
// must not wait on one another for it.
type Local struct {
	keys sync.Map // key → *localKey
	now  func() time.Time
}

type localKey struct {
	mu  sync.Mutex
	tat time.Time // theoretical arrival time
}

// NewLocal returns an empty in-process limiter on clock now.
func NewLocal(now func() time.Time) *Local { return &Local{now: now} }

func (l *Local) key(key string) *localKey {
	v, ok := l.keys.Load(key)
	if !ok {
		v, _ = l.keys.LoadOrStore(key, &localKey{})
	}
	return v.(*localKey)
}

// Sync sets key's bucket at rate to hold remaining tokens (of a burst of
// rate), as the shared bucket was last seen.
func (l *Local) Sync(key string, rate, remaining int) {
	emission := max(time.Second/time.Duration(rate), 1)
	remaining = min(max(remaining, 0), rate)
	tat := l.now().Add(emission * time.Duration(rate-remaining))
	k := l.key(key)
	k.mu.Lock()
	k.tat = tat
	k.mu.Unlock()
}

// Allow decides one request of key at rate per second.
func (l *Local) Allow(_ context.Context, key string, rate int) Decision {
	now := l.now()
	emission := max(time.Second/time.Duration(rate), 1)
	burstOffset := emission * time.Duration(rate)

	k := l.key(key)
	k.mu.Lock()
	defer k.mu.Unlock()
	tat := k.tat
	if tat.Before(now) {
		tat = now
	}
	newTat := tat.Add(emission)
	allowAt := newTat.Add(-burstOffset)
	diff := now.Sub(allowAt)
	if diff < 0 {
		return Decision{Limit: rate, Remaining: 0, ResetAfter: tat.Sub(now), RetryAfter: -diff}
	}
	k.tat = newTat
	return Decision{Allowed: true, Limit: rate, Remaining: int(diff / emission), ResetAfter: newTat.Sub(now)}
}
