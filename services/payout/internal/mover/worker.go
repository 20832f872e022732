// Package mover moves payouts on the bank provider's word (DESIGN §3):
// the hand-over of a payout whose deposit arrived, the provider's changes
// feed, expiries, reconciliation of an overdue payout, and refunds. Every
// provider call that moves a payout is made here, with no lock held
// (provider.go); what it
// decides is written by the store (internal/store) in a short transaction
// that reads the payout as it then stands.
package mover

import (
	"cmp"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"log/slog"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/partnerpay/api/pkg/bankprovider"
	"github.com/partnerpay/api/pkg/config"
	"github.com/partnerpay/api/pkg/database"
	"github.com/partnerpay/api/pkg/environment"
	"github.com/partnerpay/api/pkg/lifecycle"
	"github.com/partnerpay/api/pkg/obs"
	"github.com/partnerpay/api/pkg/worker"
	"github.com/partnerpay/api/services/payout/internal/record"
	"github.com/partnerpay/api/services/payout/internal/store"
)

// Who moves a payout: the service, not the reader (DESIGN §3). Every
// replica runs a Worker: five queues, each a loop of its own with its own
// claim, so none waits behind another's backlog.
//
//   - changes: the provider's changes feed, followed from its place kept
//     in PostgreSQL, each change applied once (by its id) in the
//     transaction that moves its payout. Completions, failures and returns
//     weeks later all arrive this way: the cost grows with the changes,
//     not with the payouts in flight or in their return window.
//   - hand-over: a payout whose deposit arrived is handed to the provider,
//     keyed by our payout id, until the provider confirms it, never after.
//   - expiry: a deposit window closes on the database's clock.
//   - reconciliation: a payout whose change has not come well after its
//     rail's settlement is asked about on its own, at a decaying rate, at
//     most ReconcileChecks times in its life. Nothing polls a completed
//     payout for returns.
//
// No transaction spans a provider call: a queue claims its due payouts in
// one short statement that leases them, calls the provider with no lock
// held, and applies each answer in a short transaction of its own that
// reads the payout as it then stands. A partner's write to a payout (a
// refund address) never waits for the provider. A payout that cannot be
// moved is logged once, counted by reason and backed off alone; the rest
// of its round moves. A provider that fails is backed off as a whole (one
// circuit per provider): its errors slow our calls to it.

// Provider carries payouts: the bank provider (pkg/bankprovider).
type Provider interface {
	CreatePayout(ctx context.Context, in bankprovider.NewPayout) (bankprovider.Payout, error)
	PayoutByReference(ctx context.Context, reference string) (bankprovider.Payout, error)
	CheckPayee(ctx context.Context, in bankprovider.PayeeCheck) (bankprovider.PayeeResult, error)
	Changes(ctx context.Context, after string, limit int) ([]bankprovider.Change, bool, error)
}

// Config tunes the mover (the payout binary's configuration embeds it).
type Config struct {
	// How often the provider's changes feed is read when nothing new came
	// (a page that was full is followed at once).
	FeedEvery time.Duration `env:"PAYOUT_FEED_EVERY, default=1s"`
	// In the sandbox, the sandbox provider's settlement
	// (SANDBOX_PAYOUT_SETTLE), which the reconciliation waits for.
	SandboxSettle time.Duration `env:"SANDBOX_PAYOUT_SETTLE, default=3s"`
}

// Validate checks the durations.
func (c Config) Validate() error {
	return errors.Join(config.Positive("PAYOUT_FEED_EVERY", c.FeedEvery), config.Positive("SANDBOX_PAYOUT_SETTLE", c.SandboxSettle))
}

const (
	// ReconcileChecks is the most times a payout is asked about on its
	// own in its life (against about 1,500 when every payout was polled
	// for its 60-day return window).
	ReconcileChecks = 24
	// reconcileFirst is the first gap between two of its checks, doubled
	// at each; reconcileMost the longest.
	reconcileFirst = 5 * time.Second
	reconcileMost  = 24 * time.Hour
	// feedPage is how many changes a page of the provider's feed holds.
	feedPage = 100
	// changesKept is how long an applied change's id is kept; holdsKept a
	// quote's binding to its beneficiary (its quote lives a minute).
	changesKept = 30 * 24 * time.Hour
	holdsKept   = 48 * time.Hour
)

// CallLease is how long a payout claimed for a provider call is another
// replica's (or the request's that recorded its deposit) to leave alone:
// the call's time and some.
const CallLease = worker.ProviderWait + 5*time.Second

// Queue names: the closed set of values of the queue label.
const (
	queueChanges   = "changes"
	queueHandOver  = "handover"
	queueExpiry    = "expiry"
	queueReconcile = "reconcile"
)

// Parts are what a Worker is made of.
type Parts struct {
	Env   environment.Name
	Store *store.Store
	// Provider carries payouts whose stablecoins arrived (the sandbox
	// provider in sandbox); nil: none is connected, and nothing is
	// handed over.
	Provider Provider
	// Now is the database's clock (database.DB.Now).
	Now    func() time.Time
	Config Config
	// Log receives the worker's lines; nil discards them.
	Log      *slog.Logger
	Registry prometheus.Registerer
}

// Worker moves the payouts of one replica.
type Worker struct {
	env      environment.Name
	store    *store.Store
	provider Provider
	now      func() time.Time
	cfg      Config
	log      *slog.Logger
	rows     *worker.Rows
	owner    string // this replica, as the provider feed's lease names it
	// circuit backs the provider off as a whole while it fails.
	circuit *worker.Circuit

	missing  prometheus.Counter
	unlisted *prometheus.CounterVec
	codes    *codeSet

	handOver, expiry, reconcile, changes *worker.Loop
	lastForget                           time.Time
}

// New is the worker made of p; its metrics go to p.Registry.
func New(p Parts) *Worker {
	log, reg, cfg := p.Log, p.Registry, p.Config
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	cfg.FeedEvery, cfg.SandboxSettle = cmp.Or(cfg.FeedEvery, time.Second), cmp.Or(cfg.SandboxSettle, 3*time.Second)
	var b [8]byte
	_, _ = rand.Read(b[:])
	w := &Worker{env: p.Env, store: p.Store, provider: p.Provider, now: p.Now, cfg: cfg, circuit: worker.NewCircuit(p.Now),
		log: log, rows: worker.NewRows("payout", log, reg), owner: hex.EncodeToString(b[:]),
		missing: prometheus.NewCounter(prometheus.CounterOpts{Namespace: obs.Namespace, Subsystem: "payout", Name: "provider_missing_total",
			Help: "Payouts the bank provider had confirmed and then did not know, each counted once when found: an incident (never re-sent, never moved on that word)."}),
		unlisted: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: obs.Namespace, Subsystem: "payout", Name: "provider_unlisted_total",
			Help: "Failures and returns whose reason the provider gave in words we do not list (failureReason provider_rejected, returnReason returned_by_bank), by kind and the provider's code (the first 32 codes a process sees; the rest are other)."},
			[]string{"kind", "code"}),
		codes: newCodeSet(32),
	}
	reg.MustRegister(w.missing, w.unlisted)
	w.rows.Declare(queueChanges, queueHandOver, queueExpiry, queueReconcile)
	w.handOver = worker.New("payout_handover", w.HandOverRound, log, reg)
	w.expiry = worker.New("payout_expiry", w.ExpiryRound, log, reg)
	w.reconcile = worker.New("payout_reconcile", w.ReconcileRound, log, reg).IdleEvery(time.Second)
	w.changes = worker.New("payout_changes", w.ChangesRound, log, reg).IdleEvery(w.cfg.FeedEvery)
	return w
}

// Run runs every queue until ctx ends.
func (w *Worker) Run(ctx context.Context) {
	done := make(chan struct{})
	for _, l := range []*worker.Loop{w.handOver, w.expiry, w.reconcile, w.changes} {
		go func() { l.Run(ctx); done <- struct{}{} }()
	}
	for range 4 {
		<-done
	}
}

// Round runs one round of every queue, in the order a payout's life goes
// through them (tests and the simulator drive the worker by rounds); it
// returns how many payouts and changes they claimed.
func (w *Worker) Round(ctx context.Context) (int, error) {
	total := 0
	for _, round := range []func(context.Context) (int, error){w.ChangesRound, w.HandOverRound, w.ExpiryRound, w.ReconcileRound} {
		n, err := round(ctx)
		total += n
		if err != nil {
			return total, err
		}
	}
	return total, nil
}

// failed is the count, log line (the first in a row) and the reason of a
// payout's failure in queue.
func (w *Worker) failed(ctx context.Context, queue, id string, n int, err error) {
	reason := worker.DatabaseReason(err, database.IsRuleViolation)
	switch {
	case errors.Is(err, worker.ErrUnreadable):
		reason = worker.ReasonUnreadable
	case errors.Is(err, errProviderFailed):
		reason = worker.ReasonProvider
	}
	w.rows.Failed(ctx, queue, id, reason, n, err)
}

// ExpiryRound closes the deposit windows due now.
func (w *Worker) ExpiryRound(ctx context.Context) (int, error) {
	return w.store.ExpireDue(ctx, w.clock(), worker.RoundSize, func(id string, n int, err error) {
		w.failed(ctx, queueExpiry, id, n, err)
	})
}

// HandOverRound hands the payouts whose deposit arrived to the provider.
func (w *Worker) HandOverRound(ctx context.Context) (int, error) {
	return w.callRound(ctx, queueHandOver, w.store.ClaimHandOvers, w.handOverOne)
}

// ReconcileRound asks the provider about the payouts whose change is
// overdue, each on its own.
func (w *Worker) ReconcileRound(ctx context.Context) (int, error) {
	return w.callRound(ctx, queueReconcile, w.store.ClaimReconciles, w.reconcileOne)
}

// callRound is a round of a queue that calls the provider: it claims as
// many due payouts as the provider's circuit allows (one at a time while
// the provider fails), leased for the call's time, and calls and applies
// each (one) side by side, with no lock held; one that fails is counted
// and backed off alone.
func (w *Worker) callRound(ctx context.Context, queue string, claim func(ctx context.Context, now, until time.Time, limit int) ([]record.StoredPayout, error),
	one func(ctx context.Context, p record.StoredPayout) error) (int, error) {
	if w.provider == nil {
		return 0, nil
	}
	calls := w.circuit.Calls(worker.RoundSize)
	if calls == 0 {
		return 0, nil
	}
	now := w.clock()
	due, err := claim(ctx, now, now.Add(CallLease), calls)
	if err != nil || len(due) == 0 {
		return len(due), err
	}
	worker.Each(ctx, due, func(ctx context.Context, p record.StoredPayout) struct{} {
		if err := one(ctx, p); err != nil {
			w.failed(ctx, queue, p.ID, p.Failures+1, err)
		}
		return struct{}{}
	})
	return len(due), nil
}

// reconcileOne asks the provider about p, with no lock held, and applies
// its word to p as it then stands.
func (w *Worker) reconcileOne(ctx context.Context, p record.StoredPayout) error {
	word, err := w.call(ctx, func(ctx context.Context) (bankprovider.Payout, error) { return w.provider.PayoutByReference(ctx, p.ID) })
	missing := bankprovider.IsType(err, bankprovider.TypeResourceMissing)
	if err != nil && !missing {
		return w.backOff(ctx, p, err)
	}
	var found bool
	_, err = w.store.Update(ctx, p.ID, func(r record.Record) (record.Change, error) {
		now := w.clock()
		// A payout the feed ended while the check was out (failed,
		// returned) has nothing left to ask about, whatever the answer. A
		// completed one takes a return the answer brings (it is checked
		// only when a change to it could not be applied), and is then asked
		// about no more, found or forgotten: nothing polls a completed
		// payout for returns.
		switch r.Status {
		case lifecycle.PayoutAwaitingDeposit, lifecycle.PayoutProcessing:
		case lifecycle.PayoutCompleted:
			if missing {
				return record.Change{Reconciled: true}, nil
			}
		default:
			return record.Change{Reconciled: true}, nil
		}
		if missing {
			if r.HandedOverAt == nil {
				// The hand-over queue sends it; reconciliation has nothing
				// to ask until the provider confirms it (it sets the next
				// check then), rather than every lease.
				return record.Change{Reconciled: true}, nil
			}
			// The provider confirmed it, and no longer has it: never
			// re-sent, never moved on that word; noted once.
			found = r.ProviderMissingAt == nil
			c := w.nextCheck(r.StoredPayout, now)
			c.Missing = &now
			return c, nil
		}
		c, err := w.word(r.StoredPayout, word, now)
		if err != nil {
			return record.Change{}, err
		}
		switch {
		case len(c.Steps) > 0 || c.Reconciled:
		case r.Status == lifecycle.PayoutCompleted:
			c.Reconciled, c.Checked = true, true
		default:
			next := w.nextCheck(r.StoredPayout, now)
			c.Reconcile, c.Reconciled, c.Checked = next.Reconcile, next.Reconciled, true
		}
		return c, nil
	})
	if err == nil && found {
		w.missing.Inc()
		w.log.ErrorContext(ctx, "the bank provider no longer has a payout it confirmed; not re-sent, not moved: reconcile with the provider",
			"payout_id", p.ID, "status", p.Status)
	}
	return err
}

// nextCheck is when p is next asked about on its own after a check at
// now that found nothing new: twice the last gap, up to a day, and never
// after its ReconcileChecks-th check.
func (w *Worker) nextCheck(p record.StoredPayout, now time.Time) record.Change {
	if p.ReconcileChecks+1 >= ReconcileChecks {
		return record.Change{Reconciled: true, Checked: true}
	}
	next := now.Add(min(reconcileFirst<<min(p.ReconcileChecks, 20), reconcileMost))
	return record.Change{Reconcile: &next, Checked: true}
}

// ChangesRound reads the next page of the provider's changes under the
// feed's lease, with no lock held, and applies it; a full page is
// followed at once (the count says so).
func (w *Worker) ChangesRound(ctx context.Context) (int, error) {
	if w.provider == nil || w.circuit.Calls(1) == 0 {
		return 0, nil
	}
	now := w.clock()
	if now.Sub(w.lastForget) > time.Hour {
		_, err := w.store.ForgetChanges(ctx, now.Add(-changesKept))
		if err = errors.Join(err, w.store.ForgetHolds(ctx, now.Add(-holdsKept))); err == nil {
			w.lastForget = now
		}
	}
	after, ok, err := w.store.LeaseFeed(ctx, w.owner, now, now.Add(CallLease))
	if err != nil || !ok {
		return 0, err
	}
	pctx, cancel := context.WithTimeout(ctx, worker.ProviderWait)
	changes, more, err := w.provider.Changes(pctx, after, feedPage)
	cancel()
	switch {
	case bankprovider.IsType(err, bankprovider.TypeStateLost):
		// A sandbox provider restarted empty: its feed starts again.
		w.circuit.Answered()
		w.log.WarnContext(ctx, "the bank provider no longer knows the feed's place (a sandbox provider restarted); following its feed from its start")
		changes, after, more = nil, "", true
	case err != nil:
		w.circuit.Failed()
		return 0, w.store.ReleaseFeed(ctx, w.owner)
	default:
		w.circuit.Answered()
	}
	next := after
	feed := make([]store.FeedChange, 0, len(changes))
	words := make(map[string]bankprovider.Payout, len(changes))
	for _, c := range changes {
		next = c.ID
		if c.Type != bankprovider.ChangePayout || !record.ValidID(c.Payout.Reference) {
			continue // not a payout of ours
		}
		feed = append(feed, store.FeedChange{ID: c.ID, PayoutID: c.Payout.Reference})
		words[c.ID] = c.Payout
	}
	moved, err := w.store.ApplyChanges(ctx, w.owner, next, now, feed, func(r record.Record, ch store.FeedChange) (record.Change, error) {
		return w.word(r.StoredPayout, words[ch.ID], w.clock())
	}, func(ch store.FeedChange, n int, err error) { w.failed(ctx, queueChanges, ch.PayoutID, n, err) })
	if err != nil {
		return 0, err
	}
	if more {
		return max(moved, 1), nil
	}
	return moved, nil
}

// clock is the database's clock now, to the microsecond it keeps.
func (w *Worker) clock() time.Time { return w.now().UTC().Truncate(time.Microsecond) }
