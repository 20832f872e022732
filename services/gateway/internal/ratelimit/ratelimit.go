// Package ratelimit applies each key's requests-per-second limit. The bucket
// lives in Redis (redis_rate's GCRA), shared by every gateway replica. When
// Redis does not answer within its deadline, requests are not failed: the
// gateway limits in-process with the same algorithm, at the key's rate
// divided by the number of gateway replicas (so the fleet stays near the
// key's rate), until Redis answers again. Whether Redis answers again is
// probed in the background, so the fallback state follows Redis' health,
// not the next request.
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
type Backend interface {
	Allow(ctx context.Context, key string, limit redis_rate.Limit) (*redis_rate.Result, error)
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
	if l.now().UnixNano() < l.downTill.Load() {
		return Decision{}, false
	}
	rctx, cancel := context.WithTimeout(ctx, l.timeout)
	defer cancel()
	res, err := l.backend.Allow(rctx, key, redis_rate.PerSecond(rate))
	if err != nil {
		if ctx.Err() != nil {
			// The client went away; that says nothing about Redis.
			return Decision{}, false
		}
		l.downTill.Store(l.now().Add(l.recheck).UnixNano())
		if l.fallback.CompareAndSwap(false, true) {
			l.log.Error("rate limit store unavailable; limiting in-process", "err", err, "replicas", l.replicas)
			if l.obs != nil {
				l.obs.FallbackChanged(true)
			}
			if l.probe != nil {
				go l.probeUntilBack()
			}
		}
		return Decision{}, false
	}
	l.recovered()
	d := Decision{
		Allowed:    res.Allowed > 0,
		Limit:      rate,
		Remaining:  res.Remaining,
		ResetAfter: res.ResetAfter,
	}
	if !d.Allowed {
		d.RetryAfter = res.RetryAfter
	}
	return d, true
}

// recovered leaves the fallback (once, whoever notices first).
func (l *Limiter) recovered() {
	if l.fallback.CompareAndSwap(true, false) {
		l.downTill.Store(0)
		l.log.Info("rate limit store answers again; limiting in Redis")
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
// one emission every 1/rate seconds.
type Local struct {
	mu  sync.Mutex
	tat map[string]time.Time // theoretical arrival time per key
	now func() time.Time
}

// NewLocal returns an empty in-process limiter on clock now.
func NewLocal(now func() time.Time) *Local {
	return &Local{tat: make(map[string]time.Time), now: now}
}

// Allow decides one request of key at rate per second.
func (l *Local) Allow(_ context.Context, key string, rate int) Decision {
	now := l.now()
	emission := max(time.Second/time.Duration(rate), 1)
	burstOffset := emission * time.Duration(rate)

	l.mu.Lock()
	defer l.mu.Unlock()
	tat := l.tat[key]
	if tat.Before(now) {
		tat = now
	}
	newTat := tat.Add(emission)
	allowAt := newTat.Add(-burstOffset)
	diff := now.Sub(allowAt)
	if diff < 0 {
		return Decision{Limit: rate, Remaining: 0, ResetAfter: tat.Sub(now), RetryAfter: -diff}
	}
	l.tat[key] = newTat
	return Decision{Allowed: true, Limit: rate, Remaining: int(diff / emission), ResetAfter: newTat.Sub(now)}
}
