// Package worker runs the rounds of a service's worker: the loop that moves
// the records a provider drives, in every replica (DESIGN §3, "Who moves
// it"). A round claims the records due now (FOR UPDATE SKIP LOCKED, so two
// replicas never work one record), works them side by side and writes
// what each came to with when it is next due; this package paces the
// rounds, counts them and spreads a round's provider calls.
package worker

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/partnerpay/api/pkg/obs"
)

const (
	// PollMin is the soonest a record in flight is asked about again.
	PollMin = 500 * time.Millisecond
	// RoundSize is how many records a round claims.
	RoundSize = 32
	// InParallel is how many provider calls a round makes at once.
	InParallel = 8
	// ProviderWait bounds one call to a provider.
	ProviderWait = 3 * time.Second

	idleRound   = 250 * time.Millisecond
	failedRound = 2 * time.Second
)

// Outcomes are the values of the outcome label of
// partnerapi_worker_rounds_total.
var Outcomes = []string{"worked", "idle", "failed"}

// Loop runs one worker's rounds.
type Loop struct {
	name   string
	round  func(context.Context) (int, error)
	log    *slog.Logger
	rounds *prometheus.CounterVec
	wake   chan struct{}
	idle   time.Duration
}

// New is the loop of the worker name (payout, fiat, orders), whose round
// returns how many records it claimed; its rounds are counted in reg.
func New(name string, round func(context.Context) (int, error), log *slog.Logger, reg prometheus.Registerer) *Loop {
	l := &Loop{name: name, round: round, log: log, wake: make(chan struct{}, 1), idle: idleRound,
		rounds: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: obs.Namespace, Subsystem: "worker", Name: "rounds_total",
			Help: "Rounds of the worker that moves the records a provider drives, by outcome (worked: it claimed records; idle: none was due; failed: the database failed it)."},
			[]string{"worker", "outcome"}),
	}
	// Every loop of a process counts in the one series family.
	if err := reg.Register(l.rounds); err != nil {
		are, ok := err.(prometheus.AlreadyRegisteredError)
		if !ok {
			panic(err)
		}
		l.rounds = are.ExistingCollector.(*prometheus.CounterVec)
	}
	for _, o := range Outcomes {
		l.rounds.WithLabelValues(name, o)
	}
	return l
}

// IdleEvery sets how long the loop waits after a round that found nothing
// due (a quarter of a second by default): a loop whose round calls a
// provider (a changes feed) waits longer, so an idle service costs the
// provider a call a second, not four.
func (l *Loop) IdleEvery(d time.Duration) *Loop {
	l.idle = d
	return l
}

// Wake starts the loop's next round at once, if it is waiting (work was
// just made due here: a deposit's hand-over, say); a wake while a round
// runs starts the next one as soon as that ends.
func (l *Loop) Wake() {
	select {
	case l.wake <- struct{}{}:
	default:
	}
}

// Run runs rounds until ctx ends: the next at once after a round that
// claimed records (more may be due) or on a Wake, a quarter of a second
// after an idle one, two seconds after a failed one.
func (l *Loop) Run(ctx context.Context) {
	for {
		wait, outcome := l.idle, "idle"
		n, err := l.round(ctx)
		switch {
		case ctx.Err() != nil:
			return
		case err != nil:
			outcome, wait = "failed", failedRound
			l.log.WarnContext(ctx, "worker round failed; trying again", "worker", l.name, "err", err)
		case n > 0:
			outcome, wait = "worked", 0
		}
		l.rounds.WithLabelValues(l.name, outcome).Inc()
		if wait == 0 {
			continue
		}
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-l.wake:
			t.Stop()
		case <-t.C:
		}
	}
}

// Each is work of every record of a round, at most InParallel at once, in
// the records' order; each call has ProviderWait for its provider call.
func Each[R, C any](ctx context.Context, due []R, work func(context.Context, R) C) []C {
	out := make([]C, len(due))
	var wg sync.WaitGroup
	slots := make(chan struct{}, InParallel)
	for i, r := range due {
		slots <- struct{}{}
		wg.Go(func() {
			defer func() { <-slots }()
			wctx, cancel := context.WithTimeout(ctx, ProviderWait)
			defer cancel()
			out[i] = work(wctx, r)
		})
	}
	wg.Wait()
	return out
}

// Next is when a record whose last change was at since is next asked
// about: a tenth of the time since, from PollMin up to most.
func Next(now, since time.Time, most time.Duration) time.Time {
	return now.Add(min(max(now.Sub(since)/10, PollMin), max(most, PollMin)))
}
