package payout

import (
	"context"
	"sync/atomic"

	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"
)

// A crash between any two statements (issue 60): a round given a crash
// budget of n dies before its n-th statement (or commit, or connection
// taken from the pool) reaches PostgreSQL, as a process killed there
// would: what it committed stays, the rest is rolled back, and its replica
// starts again with nothing in memory. The budget is spent by the
// database's tracer hooks (pgx's, through otelpgx), which see every
// statement of a context that carries a recording span.

type crashKey struct{}

// crashBudget is how many statements a round may still make.
type crashBudget struct {
	start  int64
	left   atomic.Int64
	cancel context.CancelFunc
	fired  atomic.Bool
}

// crashAfter is ctx for a round that dies before its n-th statement, and
// the budget, to ask whether it did.
func crashAfter(ctx context.Context, n int) (context.Context, *crashBudget, context.CancelFunc) {
	ctx, cancel := context.WithCancel(ctx)
	b := &crashBudget{start: int64(n), cancel: cancel}
	b.left.Store(int64(n))
	ctx = context.WithValue(ctx, crashKey{}, b)
	return trace.ContextWithSpan(ctx, recordingSpan{}), b, cancel
}

// spent is how many statements the round made (or began: the one it died
// before included).
func (b *crashBudget) spent() int { return int(b.start - max(0, b.left.Load())) }

// recordingSpan makes the tracer hooks see the round's statements.
type recordingSpan struct{ noop.Span }

func (recordingSpan) IsRecording() bool { return true }

// crashTracing is the tracer provider of the simulation's database.
type crashTracing struct{ noop.TracerProvider }

func (crashTracing) Tracer(string, ...trace.TracerOption) trace.Tracer { return crashTracer{} }

type crashTracer struct{ noop.Tracer }

// Start spends one statement of the round's budget; the last one kills
// the round before the statement is sent, and no later one is sent
// either: pgx sends a statement with the context its tracer returns, and
// that context is cancelled. (A request's work runs on a context without
// its caller's cancellation, idempotency.Middleware's, so cancelling the
// round's context alone would not stop it; the budget, a value, is still
// there.)
func (crashTracer) Start(ctx context.Context, name string, opts ...trace.SpanStartOption) (context.Context, trace.Span) {
	b, ok := ctx.Value(crashKey{}).(*crashBudget)
	if !ok {
		return ctx, recordingSpan{}
	}
	if left := b.left.Add(-1); left == 0 {
		b.fired.Store(true)
		b.cancel()
	} else if left > 0 {
		return ctx, recordingSpan{}
	}
	dead, cancel := context.WithCancel(ctx)
	cancel()
	return dead, recordingSpan{}
}
