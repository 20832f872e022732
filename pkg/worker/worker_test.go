package worker

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

// A round that claimed records is followed at once by the next; each
// round is counted by its outcome, and the loop ends with its context.
func TestTheLoopCountsEachRound(t *testing.T) {
	t.Parallel()
	reg := prometheus.NewPedanticRegistry()
	ctx, cancel := context.WithCancel(context.Background())
	var calls atomic.Int32
	done := make(chan struct{})
	l := New("payout", func(context.Context) (int, error) {
		switch calls.Add(1) {
		case 1, 2:
			return 3, nil
		case 3:
			return 0, errors.New("the database is away")
		default:
			cancel()
			return 0, nil
		}
	}, slog.New(slog.DiscardHandler), reg)
	go func() { l.Run(ctx); close(done) }()
	<-done
	want := `
# HELP partnerapi_worker_rounds_total Rounds of the worker that moves the records a provider drives, by outcome (worked: it claimed records; idle: none was due; failed: the database failed it).
# TYPE partnerapi_worker_rounds_total counter
partnerapi_worker_rounds_total{outcome="failed",worker="payout"} 1
partnerapi_worker_rounds_total{outcome="idle",worker="payout"} 0
partnerapi_worker_rounds_total{outcome="worked",worker="payout"} 2
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want)); err != nil {
		t.Error(err)
	}
}

// Each keeps the records' order and makes at most InParallel calls at
// once.
func TestEachRunsSideBySideInOrder(t *testing.T) {
	t.Parallel()
	var now, most atomic.Int32
	due := make([]int, 3*InParallel)
	for i := range due {
		due[i] = i
	}
	release := make(chan struct{})
	go func() {
		for now.Load() < InParallel {
			time.Sleep(time.Millisecond)
		}
		close(release)
	}()
	out := Each(context.Background(), due, func(ctx context.Context, r int) int {
		n := now.Add(1)
		for m := most.Load(); n > m && !most.CompareAndSwap(m, n); m = most.Load() {
		}
		<-release
		if _, ok := ctx.Deadline(); !ok {
			t.Error("a call without its deadline")
		}
		now.Add(-1)
		return r * 2
	})
	for i, v := range out {
		if v != 2*i {
			t.Fatalf("out[%d] = %d", i, v)
		}
	}
	if most.Load() != InParallel {
		t.Errorf("%d calls at once, want %d", most.Load(), InParallel)
	}
}

// A record is asked about again a tenth of the time since it changed,
// from PollMin up to most.
func TestNext(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 11, 27, 12, 0, 0, 0, time.UTC)
	for _, tt := range []struct {
		since, most, want time.Duration
	}{
		{0, 2 * time.Second, PollMin},
		{10 * time.Second, 2 * time.Second, time.Second},
		{time.Hour, 2 * time.Second, 2 * time.Second},
		{time.Hour, 0, PollMin},
	} {
		if got := Next(now, now.Add(-tt.since), tt.most).Sub(now); got != tt.want {
			t.Errorf("changed %v ago, at most %v: in %v, want %v", tt.since, tt.most, got, tt.want)
		}
	}
}

// Two loops of one process (the payout worker and the events' loop) count
// in one family, each under its name.
func TestTwoLoopsShareTheirFamily(t *testing.T) {
	t.Parallel()
	reg := prometheus.NewPedanticRegistry()
	round := func(context.Context) (int, error) { return 0, nil }
	New("payout", round, slog.New(slog.DiscardHandler), reg)
	New("events", round, slog.New(slog.DiscardHandler), reg)
	if n, err := testutil.GatherAndCount(reg, "partnerapi_worker_rounds_total"); err != nil || n != 6 {
		t.Errorf("%d series, %v; want 6", n, err)
	}
}
