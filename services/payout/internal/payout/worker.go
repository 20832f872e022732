package payout

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
	"slices"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/partnerpay/api/pkg/bankprovider"
	"github.com/partnerpay/api/pkg/config"
	"github.com/partnerpay/api/pkg/environment"
	"github.com/partnerpay/api/pkg/lifecycle"
	"github.com/partnerpay/api/pkg/obs"
	"github.com/partnerpay/api/pkg/worker"
)

// Who moves a payout: the service, not the reader (DESIGN §3). Every
// replica runs a Worker. Each round it claims the payouts due now (their
// deposit window's end, the provider's next word) with FOR UPDATE SKIP
// LOCKED, so two replicas never work one payout and a dead replica's are
// claimed by the next round of another; it works them side by side and
// writes what each came to, with when it is due next, in the round's
// transaction. A payout's next check comes sooner the more recently it
// changed (a tenth of the time since, from half a second up to PollMax),
// so the cost grows with the payouts in flight, not with all of them, and
// a sandbox payout's change reaches its record within a second or two.
//
// The hand-over is exactly once, and never forgotten: the intent is
// recorded with the deposit, before the provider is called; the worker
// calls the provider for every payout whose hand-over it finds recorded
// and not confirmed, keyed by our payout id (the provider answers a retry
// with the payout it has), and a payout the provider confirmed is never
// sent again: a provider that no longer knows it is an incident, counted,
// logged and paged on, and the payout is not moved on that word.

// Provider carries payouts: the bank provider (pkg/bankprovider).
type Provider interface {
	CreatePayout(ctx context.Context, in bankprovider.NewPayout) (bankprovider.Payout, error)
	PayoutByReference(ctx context.Context, reference string) (bankprovider.Payout, error)
	CheckPayee(ctx context.Context, in bankprovider.PayeeCheck) (bankprovider.PayeeResult, error)
}

// WorkerConfig tunes the workers of a payout service (its binary's
// configuration embeds it).
type WorkerConfig struct {
	// How often a payout in flight is asked about at most: a payout's
	// next check is a tenth of the time since it last changed, from half a
	// second up to this.
	PollMax time.Duration `env:"PAYOUT_POLL_MAX, default=2s"`
	// How long a completed payout is still asked about, for a return.
	ReturnWindow time.Duration `env:"PAYOUT_RETURN_WINDOW, default=1440h"`
	// How long a sandbox refund takes to be sent once it is pending (the
	// sandbox provider's settlement, SANDBOX_PAYOUT_SETTLE).
	SandboxSettle time.Duration `env:"SANDBOX_PAYOUT_SETTLE, default=3s"`
}

// Validate checks the durations.
func (c WorkerConfig) Validate() error {
	return errors.Join(config.Positive("PAYOUT_POLL_MAX", c.PollMax), config.Positive("PAYOUT_RETURN_WINDOW", c.ReturnWindow),
		config.Positive("SANDBOX_PAYOUT_SETTLE", c.SandboxSettle))
}

// Worker moves the payouts of one replica's service.
type Worker struct {
	svc     *service
	store   *Store
	log     *slog.Logger
	missing prometheus.Counter
	loop    *worker.Loop
}

// NewWorker is the worker of svc (NewService's) on store; its metrics go
// to reg.
func NewWorker(svc Service, store *Store, log *slog.Logger, reg prometheus.Registerer) *Worker {
	w := &Worker{svc: svc.(*service), store: store, log: log,
		missing: prometheus.NewCounter(prometheus.CounterOpts{Namespace: obs.Namespace, Subsystem: "payout", Name: "provider_missing_total",
			Help: "Checks that found a payout the bank provider had confirmed missing at the provider: an incident (never re-sent, never moved on that word)."}),
	}
	reg.MustRegister(w.missing)
	w.loop = worker.New("payout", w.Round, log, reg)
	return w
}

// Run works due payouts and sends due refunds until ctx ends.
func (w *Worker) Run(ctx context.Context) { w.loop.Run(ctx) }

// Round works the payouts due now, side by side, and sends the refunds
// due; it returns how many it claimed and sent.
func (w *Worker) Round(ctx context.Context) (int, error) {
	n, err := w.store.Due(ctx, w.svc.clock(), worker.RoundSize, w.round)
	if err != nil {
		return n, err
	}
	sent, err := w.sendRefunds(ctx)
	return n + sent, err
}

// round works a round's payouts side by side.
func (w *Worker) round(ctx context.Context, due []StoredPayout) []Change {
	return worker.Each(ctx, due, func(ctx context.Context, p StoredPayout) Change {
		c := w.svc.work(ctx, p)
		if p.HandedOverAt != nil && c.missing {
			w.missing.Inc()
			w.log.ErrorContext(ctx, "the bank provider no longer has a payout it confirmed; not re-sent, not moved: reconcile with the provider",
				"payout_id", p.ID, "status", p.Status)
		}
		return c
	})
}

// sendRefunds marks sent the sandbox refunds pending for a settle. Nothing
// sends a refund outside the sandbox yet: production executes no payouts
// while the payout provider is not connected (DESIGN §3).
func (w *Worker) sendRefunds(ctx context.Context) (int, error) {
	if w.svc.env != environment.Sandbox {
		return 0, nil
	}
	now := w.svc.clock()
	return w.store.RefundsDue(ctx, worker.RoundSize, now.Add(-w.svc.cfg.SandboxSettle), func(Refund) string { return testnetHash() }, now)
}

// work decides what the worker makes of payout p now: its window's end,
// its hand-over, or the provider's word.
func (s *service) work(ctx context.Context, p StoredPayout) Change {
	now := s.clock()
	switch {
	case p.Status == lifecycle.PayoutAwaitingDeposit && p.HandoverAt == nil:
		if now.Before(p.DepositExpiresAt) {
			return Change{Next: &p.DepositExpiresAt}
		}
		return Change{Steps: []Step{{To: lifecycle.PayoutExpired, At: now}}, Done: true}
	case p.HandoverAt != nil && p.HandedOverAt == nil:
		return s.handOver(ctx, p, now)
	case p.Status == lifecycle.PayoutProcessing || p.Status == lifecycle.PayoutCompleted:
		return s.ask(ctx, p, now)
	}
	return Change{Done: true} // final: nothing will move it again
}

// handOver gives the provider a payout whose deposit arrived, keyed by our
// payout id (a retry is answered the payout the provider has), and moves
// it to processing once the provider has it: a payout is never processing
// without that. The provider refusing it outright fails it, and its
// deposit is refunded; anything else is tried again.
func (s *service) handOver(ctx context.Context, p StoredPayout, now time.Time) Change {
	if s.provider == nil {
		return s.retry(now, *p.HandoverAt)
	}
	amount := p.FiatAmount
	if amount == "" {
		amount = p.CryptoAmount
	}
	in := bankprovider.NewPayout{Reference: p.ID, Rail: p.Rail, Currency: p.FiatCurrency, Country: p.Country,
		Amount: amount, Beneficiary: p.Beneficiary}
	if s.env == environment.Sandbox && p.SandboxOutcome != "" {
		in.Sandbox = &bankprovider.SandboxOutcome{Outcome: p.SandboxOutcome, Reason: p.SandboxReason}
	}
	pctx, cancel := context.WithTimeout(ctx, worker.ProviderWait)
	defer cancel()
	word, err := s.provider.CreatePayout(pctx, in)
	var pe *bankprovider.Error
	switch {
	case errors.As(err, &pe) && refusedOutright(pe.Status):
		s.log.WarnContext(ctx, "the bank provider refused a payout outright; it failed and its deposit is refunded", "payout_id", p.ID, "err", err)
		return s.fail(p, now, "invalid_account")
	case err != nil:
		return s.retry(now, *p.HandoverAt)
	}
	c := Change{Steps: []Step{{To: lifecycle.PayoutProcessing, At: now, HandedOverAt: &now}}}
	return s.forward(p, lifecycle.PayoutProcessing, word, now, c)
}

// refusedOutright is a provider status that no retry changes: the request
// as sent is refused (not a timeout, a rate limit or a conflict in flight).
func refusedOutright(status int) bool {
	return status >= 400 && status < 500 && status != http.StatusRequestTimeout && status != http.StatusConflict &&
		status != http.StatusTooManyRequests
}

// ask reads the provider's word on a payout it has, and moves it on.
func (s *service) ask(ctx context.Context, p StoredPayout, now time.Time) Change {
	if s.provider == nil {
		return s.retry(now, p.StatusAt)
	}
	pctx, cancel := context.WithTimeout(ctx, worker.ProviderWait)
	defer cancel()
	word, err := s.provider.PayoutByReference(pctx, p.ID)
	switch {
	case bankprovider.IsType(err, bankprovider.TypeResourceMissing):
		// The provider confirmed it, and no longer has it (a sandbox
		// provider restarted, or worse): never re-sent, never moved on
		// that word. Asked again at the slowest pace.
		next := now.Add(s.cfg.PollMax)
		return Change{Next: &next, missing: true}
	case err != nil:
		return s.retry(now, p.StatusAt)
	}
	return s.forward(p, p.Status, word, now, Change{})
}

// forward adds to c the path of arrows from status to where the provider
// says the payout stands (nothing for a word that is not ahead of it, or
// not one we know), the refund a failure or a return owes, and when the
// payout is next asked about.
func (s *service) forward(p StoredPayout, status string, word bankprovider.Payout, now time.Time, c Change) Change {
	completedAt := now
	if t, err := time.Parse(time.RFC3339, word.CompletedAt); err == nil {
		completedAt = t.UTC()
	}
	completed := Step{To: lifecycle.PayoutCompleted, At: now, CompletedAt: &completedAt}
	switch {
	case word.Status == lifecycle.PayoutCompleted && status == lifecycle.PayoutProcessing:
		c.Steps = append(c.Steps, completed)
		status = lifecycle.PayoutCompleted
	case word.Status == lifecycle.PayoutFailed && status == lifecycle.PayoutProcessing && slices.Contains(lifecycle.PayoutFailureReasons, word.FailureReason):
		c.Steps = append(c.Steps, Step{To: lifecycle.PayoutFailed, At: now, FailureReason: word.FailureReason})
		c.Refunds = append(c.Refunds, s.refundOf(p, lifecycle.RefundPayoutFailed, now))
		c.Done = true
		return c
	case word.Status == lifecycle.PayoutReturned && slices.Contains(lifecycle.PayoutReturnReasons, word.ReturnReason) &&
		(status == lifecycle.PayoutProcessing || status == lifecycle.PayoutCompleted):
		if status == lifecycle.PayoutProcessing {
			c.Steps = append(c.Steps, completed)
		}
		c.Steps = append(c.Steps, Step{To: lifecycle.PayoutReturned, At: now, ReturnReason: word.ReturnReason,
			ReturnCode: lifecycle.ReturnCode(p.Rail, word.ReturnReason)})
		c.Refunds = append(c.Refunds, s.refundOf(p, lifecycle.RefundPayoutReturned, now))
		c.Done = true
		return c
	}
	since := p.StatusAt
	if len(c.Steps) > 0 {
		since = now
	}
	switch {
	case status == lifecycle.PayoutCompleted && p.CompletedAt != nil && now.After(p.CompletedAt.Add(s.cfg.ReturnWindow)):
		c.Done = true // past its return window
	case status == lifecycle.PayoutCompleted:
		// A return can come for weeks: asked less and less often.
		next := now.Add(min(max(now.Sub(since)/10, worker.PollMin), time.Hour))
		c.Next = &next
	default:
		next := worker.Next(now, since, s.cfg.PollMax)
		c.Next = &next
	}
	return c
}

// retry is a payout to ask about again, its last change at since.
func (s *service) retry(now, since time.Time) Change {
	next := worker.Next(now, since, s.cfg.PollMax)
	return Change{Next: &next}
}

// fail fails a payout the provider will not take, refunding its deposit.
func (s *service) fail(p StoredPayout, now time.Time, reason string) Change {
	return Change{Steps: []Step{{To: lifecycle.PayoutFailed, At: now, FailureReason: reason}},
		Refunds: []Refund{s.refundOf(p, lifecycle.RefundPayoutFailed, now)}, Done: true}
}

// refundOf is the refund, for reason, of the deposit p took: what the
// payout asked for (an excess over it was refunded when it arrived).
func (s *service) refundOf(p StoredPayout, reason string, now time.Time) Refund {
	return Refund{ID: newRefundID(), Reason: reason, Amount: owed(p), CryptoCurrency: p.CryptoCurrency, Chain: p.Chain,
		DepositTxHash: p.DepositTxHash, CreatedAt: now}
}
