package worker

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/partnerpay/api/pkg/obs"
)

// Circuit backs a provider off as a whole (DESIGN §3, §6): while its calls
// fail, the worker's queues that call it make one call (a probe) at a
// time, each after a wait that doubles from PollMin up to CircuitMost,
// so a provider's outage slows our calls to it instead of multiplying
// them; the first call that succeeds closes it. Safe for concurrent use.
type Circuit struct {
	now func() time.Time

	mu       sync.Mutex
	failures int
	until    time.Time
}

// CircuitMost is the longest a failing provider waits for its next probe.
const CircuitMost = 30 * time.Second

// NewCircuit is a closed circuit on the clock now (nil: time.Now).
func NewCircuit(now func() time.Time) *Circuit {
	if now == nil {
		now = time.Now
	}
	return &Circuit{now: now}
}

// Calls is how many of n due calls may be made now: n while the provider
// answers, one (a probe) once its wait is over while it fails, and none
// before that.
func (c *Circuit) Calls(n int) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	switch {
	case c.failures == 0:
		return n
	case c.now().Before(c.until):
		return 0
	}
	// One probe at a time: the next waits for its answer.
	c.until = c.now().Add(CircuitMost)
	return min(n, 1)
}

// Failed records a call the provider failed (down, 5xx, a timeout): the
// next probe waits twice as long as the last.
func (c *Circuit) Failed() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.failures++
	c.until = c.now().Add(Backoff(c.failures, CircuitMost))
}

// Answered records a call the provider answered (yes or no): it is up.
func (c *Circuit) Answered() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.failures, c.until = 0, time.Time{}
}

// Observe records a call's outcome: no error, or an error that says the
// provider answered (ProviderAnswered: a refusal), is an answer; any other
// error (down, 5xx, a timeout) a failure.
func (c *Circuit) Observe(err error) {
	var a interface{ ProviderAnswered() bool }
	if err == nil || errors.As(err, &a) && a.ProviderAnswered() {
		c.Answered()
		return
	}
	c.Failed()
}

// Failing reports whether the provider's last call failed.
func (c *Circuit) Failing() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.failures > 0
}

// Backoff is the wait after the n-th failure in a row: PollMin doubled
// each time, up to most.
func Backoff(n int, most time.Duration) time.Duration {
	d := PollMin
	for i := 1; i < n && d < most; i++ {
		d *= 2
	}
	return min(d, most)
}

// Reasons a record could not be moved: the closed set of values of the
// reason label of partnerapi_worker_row_failures_total.
const (
	// ReasonRefused: the database refused the write (a rule of the schema).
	ReasonRefused = "refused"
	// ReasonDatabase: the database failed the write otherwise.
	ReasonDatabase = "database"
	// ReasonProvider: the provider failed the call (down, 5xx, timeout).
	ReasonProvider = "provider"
	// ReasonUnreadable: the provider answered something we cannot read, or
	// the record itself cannot be read (a refund's token or amount).
	ReasonUnreadable = "unreadable"
)

// Rows counts and logs the records a worker could not move (DESIGN §3,
// "Rows fail alone"): each is logged once, on its first failure in a row,
// counted every time by queue and reason, and backed off alone while the
// others of its round move.
type Rows struct {
	worker   string
	log      *slog.Logger
	failures *prometheus.CounterVec

	mu     sync.Mutex
	streak map[string]int // failures in a row, of records whose table keeps none
}

// maxStreaks bounds the records whose failures in a row are kept in
// memory (a record beyond it is logged each time it fails).
const maxStreaks = 10000

// NewRows is the failure count of the worker name, registered in reg
// (one series family for every worker of a process).
func NewRows(name string, log *slog.Logger, reg prometheus.Registerer) *Rows {
	r := &Rows{worker: name, log: log, streak: map[string]int{},
		failures: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: obs.Namespace, Subsystem: "worker", Name: "row_failures_total",
			Help: "Records a worker could not move in a round, by queue and reason (refused: the database refused the write; database: it failed otherwise; provider: the provider failed the call; unreadable: its answer, or the record itself, could not be read). Each is backed off alone; the rest of the round moves."},
			[]string{"worker", "queue", "reason"}),
	}
	if err := reg.Register(r.failures); err != nil {
		are, ok := err.(prometheus.AlreadyRegisteredError)
		if !ok {
			panic(err)
		}
		r.failures = are.ExistingCollector.(*prometheus.CounterVec)
	}
	return r
}

// Counter is the count's series family (for tests).
func (r *Rows) Counter() *prometheus.CounterVec { return r.failures }

// Declare makes queue's series exist from the start (0, not "no data").
func (r *Rows) Declare(queues ...string) {
	for _, q := range queues {
		for _, reason := range []string{ReasonRefused, ReasonDatabase, ReasonProvider, ReasonUnreadable} {
			r.failures.WithLabelValues(r.worker, q, reason)
		}
	}
}

// Failed counts record id's failure in queue for reason; the n-th in a
// row (n from 1) is logged when it is the first.
func (r *Rows) Failed(ctx context.Context, queue, id, reason string, n int, err error) {
	r.failures.WithLabelValues(r.worker, queue, reason).Inc()
	if n == 1 {
		r.log.WarnContext(ctx, "a record could not be moved; it is backed off alone, the others move", "worker", r.worker, "queue", queue,
			"id", id, "reason", reason, "err", err)
	}
}

// Streak counts one more failure in a row of record id, for a worker
// whose table keeps no count, and returns it (1: the first).
func (r *Rows) Streak(id string) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.streak) >= maxStreaks {
		return 1
	}
	r.streak[id]++
	return r.streak[id]
}

// Moved ends record id's failures in a row.
func (r *Rows) Moved(id string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	delete(r.streak, id)
}

// DatabaseReason is the reason of a database error: refused when the
// schema's rules refused it.
func DatabaseReason(err error, refused func(error) bool) string {
	if refused(err) {
		return ReasonRefused
	}
	return ReasonDatabase
}

// ErrUnreadable marks a provider answer we could not read.
var ErrUnreadable = errors.New("the provider's answer could not be read")
