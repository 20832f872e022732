package mover

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"regexp"
	"slices"
	"sync"
	"time"

	"github.com/partnerpay/api/pkg/bankprovider"
	"github.com/partnerpay/api/pkg/catalog"
	"github.com/partnerpay/api/pkg/environment"
	"github.com/partnerpay/api/pkg/lifecycle"
	"github.com/partnerpay/api/pkg/worker"
	"github.com/partnerpay/api/services/payout/internal/record"
	"github.com/partnerpay/api/services/payout/internal/simbug"
)

// What the payout service makes of the bank provider's word (DESIGN §3):
// the hand-over, each call with no lock held and its answer applied to the
// payout as it then stands, and every word the provider can say, each
// with a meaning.

// errProviderFailed is a provider call that failed (down, 5xx, a
// timeout): the payout is backed off, and the provider's circuit counts it.
var errProviderFailed = errors.New("the bank provider failed the call")

// call makes one provider call within ProviderWait, telling the
// provider's circuit how it went: an answer (yes or no) closes it, a
// failure backs the provider off as a whole.
func (w *Worker) call(ctx context.Context, fn func(ctx context.Context) (bankprovider.Payout, error)) (bankprovider.Payout, error) {
	pctx, cancel := context.WithTimeout(ctx, worker.ProviderWait)
	defer cancel()
	word, err := fn(pctx)
	var pe *bankprovider.Error
	switch {
	case err == nil, errors.As(err, &pe) && pe.Status < 500:
		w.circuit.Answered()
	default:
		w.circuit.Failed()
		return word, fmt.Errorf("%w: %w", errProviderFailed, err)
	}
	return word, err
}

// backOff pushes p's provider call (its hand-over, or its reconciliation)
// back after a failure, alone, and returns err.
func (w *Worker) backOff(ctx context.Context, p record.StoredPayout, err error) error {
	n := p.Failures + 1
	if ferr := w.store.Failed(ctx, p.ID, n, w.clock().Add(worker.Backoff(n, time.Hour))); ferr != nil {
		return errors.Join(err, ferr)
	}
	return err
}

// handOver gives the provider payout p, whose deposit arrived, keyed by
// our payout id (a retry is answered the payout the provider has), with
// no lock held, and applies its answer to the payout as it then stands: a
// payout is never processing without the provider having it. The
// provider refusing it outright fails it, and its deposit is refunded;
// anything else is tried again, p alone backed off.
func (w *Worker) handOverOne(ctx context.Context, p record.StoredPayout) error {
	amount := p.FiatAmount
	if amount == "" {
		amount = p.CryptoAmount
	}
	in := bankprovider.NewPayout{Reference: p.ID, Rail: p.Rail, Currency: p.FiatCurrency, Country: p.Country,
		Amount: amount, Beneficiary: p.Beneficiary}
	if w.env == environment.Sandbox && p.SandboxOutcome != "" {
		in.Sandbox = &bankprovider.SandboxOutcome{Outcome: p.SandboxOutcome, Reason: p.SandboxReason}
	}
	word, err := w.call(ctx, func(ctx context.Context) (bankprovider.Payout, error) { return w.provider.CreatePayout(ctx, in) })
	var pe *bankprovider.Error
	refused := errors.As(err, &pe) && refusedOutright(pe.Status)
	switch {
	case err != nil && !refused && simbug.Planted("handover-abandoned"):
		refused = true
	case err != nil && !refused && simbug.Planted("row-error-swallowed"):
		word, err = bankprovider.Payout{ID: "po_" + p.ID, Reference: p.ID, Status: "processing"}, nil
	}
	if err != nil && !refused {
		return w.backOff(ctx, p, err)
	}
	if refused {
		w.log.WarnContext(ctx, "the bank provider refused a payout outright; it failed and its deposit is refunded", "payout_id", p.ID, "err", err)
	}
	_, err = w.store.Update(ctx, p.ID, func(r record.Record) (record.Change, error) {
		now := w.clock()
		switch {
		case r.HandedOverAt != nil || r.HandoverAt == nil || r.Status != lifecycle.PayoutAwaitingDeposit:
			// Moved meanwhile (another replica, the changes feed): as it is.
			return record.Change{HandedOver: r.HandedOverAt != nil}, nil
		case refused:
			c := w.fail(r.StoredPayout, now, lifecycle.PayoutFailureInvalidAccount, "")
			c.HandedOver = true
			return c, nil
		}
		return w.word(r.StoredPayout, word, now)
	})
	return err
}

// refusedOutright is a provider status that no retry changes: the request
// as sent is refused (not a timeout, a rate limit or a conflict in flight).
func refusedOutright(status int) bool {
	return status >= 400 && status < 500 && status != http.StatusRequestTimeout && status != http.StatusConflict &&
		status != http.StatusTooManyRequests
}

// providerCode is the shape the provider's own code is kept in: anything
// else is not kept (a provider cannot smuggle a value through it).
var providerCode = regexp.MustCompile(`^[A-Za-z0-9_.-]{1,32}$`)

// word is what the provider's word on payout p (its answer to a
// hand-over or a check, or a change in its feed) does to p as it stands
// at now: the path of arrows from p's status to where the provider says
// it stands (nothing for a word that is not ahead of it), the refund a
// failure or a return owes, and where p then stands in the queues. Every
// word has a meaning: a failure or return reason we do not list becomes
// ours (provider_rejected, returned_by_bank) with the provider's code
// kept; a status we cannot read is an error (the payout is backed off and
// asked about again).
func (w *Worker) word(p record.StoredPayout, said bankprovider.Payout, now time.Time) (record.Change, error) {
	switch said.Status {
	case lifecycle.PayoutProcessing, lifecycle.PayoutCompleted, lifecycle.PayoutFailed, lifecycle.PayoutReturned:
	default:
		return record.Change{}, fmt.Errorf("%w: status %.32q", worker.ErrUnreadable, said.Status)
	}
	var c record.Change
	status := p.Status
	if status == lifecycle.PayoutAwaitingDeposit {
		if p.HandoverAt == nil {
			return record.Change{}, nil // no deposit of its was handed over: not the provider's to move
		}
		// The provider has it: the hand-over is confirmed (the answer to
		// it, or its change in the feed when the answer was lost).
		c.Steps = append(c.Steps, record.Step{To: lifecycle.PayoutProcessing, At: now, HandedOverAt: &now})
		c.HandedOver = true
		next := now.Add(w.reconcileAfter(p))
		c.Reconcile = &next
		status = lifecycle.PayoutProcessing
	}
	completedAt := now
	if t, err := time.Parse(time.RFC3339, said.CompletedAt); err == nil {
		completedAt = t.UTC()
	}
	completed := record.Step{To: lifecycle.PayoutCompleted, At: now, CompletedAt: &completedAt}
	switch {
	case said.Status == lifecycle.PayoutCompleted && status == lifecycle.PayoutProcessing:
		c.Steps = append(c.Steps, completed)
		c.Reconciled, c.Reconcile = true, nil // a return comes as a change; nothing polls for it
	case said.Status == lifecycle.PayoutFailed && status == lifecycle.PayoutProcessing:
		reason, code := w.failureReason(said)
		f := w.fail(p, now, reason, code)
		c.Steps, c.Refunds = append(c.Steps, f.Steps...), f.Refunds
		c.Reconciled, c.Reconcile = true, nil
	case said.Status == lifecycle.PayoutReturned && (status == lifecycle.PayoutProcessing || status == lifecycle.PayoutCompleted):
		if status == lifecycle.PayoutProcessing {
			c.Steps = append(c.Steps, completed)
		}
		reason, returnCode, code := w.returnReason(p.Rail, said)
		c.Steps = append(c.Steps, record.Step{To: lifecycle.PayoutReturned, At: now, ReturnReason: reason, ReturnCode: returnCode, ProviderCode: code})
		c.Refunds = append(c.Refunds, w.refundOf(p, lifecycle.RefundPayoutReturned, now))
		c.Reconciled, c.Reconcile = true, nil
	}
	return c, nil
}

// reconcileAfter is how long after its hand-over a payout is first asked
// about on its own, if its change has not come: twice its settlement (the
// rail's published one; the sandbox provider's in the sandbox) and some.
func (w *Worker) reconcileAfter(p record.StoredPayout) time.Duration {
	settle := time.Minute
	if w.env == environment.Sandbox {
		settle = 2 * w.cfg.SandboxSettle // a return comes one settle after the completion
	} else if r, ok := catalog.RailNamed(p.Rail); ok {
		settle = r.SettlesIn()
	}
	return 2*settle + reconcileFirst
}

// failureReason is the failureReason of the provider's failure, and the
// provider's own code when it is not one we list (provider_rejected).
func (w *Worker) failureReason(said bankprovider.Payout) (reason, code string) {
	if slices.Contains(lifecycle.PayoutFailureReasons, said.FailureReason) {
		return said.FailureReason, ""
	}
	code = w.unlistedCode("failure", said.FailureReason)
	return lifecycle.PayoutProviderRejected, code
}

// returnReason is the returnReason and returnCode of the provider's
// return, and the provider's own code when its reason is not one we list
// (returned_by_bank, its code the returnCode when it gives none).
func (w *Worker) returnReason(rail string, said bankprovider.Payout) (reason, returnCode, code string) {
	given := ""
	if providerCode.MatchString(said.ReturnCode) {
		given = said.ReturnCode
	}
	if slices.Contains(lifecycle.PayoutReturnReasons, said.ReturnReason) {
		return said.ReturnReason, cmpOr(given, lifecycle.ReturnCode(rail, said.ReturnReason)), ""
	}
	code = w.unlistedCode("return", said.ReturnReason)
	return lifecycle.PayoutReturnedByBank, cmpOr(given, code), code
}

func cmpOr(a, b string) string {
	if a != "" {
		return a
	}
	return b
}

// unlisted counts a reason of kind the provider gave that we do not list,
// by its code, and answers the code as kept ("" when it is not in a shape
// we keep).
func (w *Worker) unlistedCode(kind, reason string) string {
	code := ""
	if providerCode.MatchString(reason) {
		code = reason
	}
	label := w.codes.label(code)
	w.unlisted.WithLabelValues(kind, label).Inc()
	w.log.Warn("the bank provider gave a reason we do not list; kept as its code", "kind", kind, "code", label)
	return code
}

// fail is payout p failed for reason (with the provider's code, if any),
// its deposit refunded.
func (w *Worker) fail(p record.StoredPayout, now time.Time, reason, code string) record.Change {
	return record.Change{Steps: []record.Step{{To: lifecycle.PayoutFailed, At: now, FailureReason: reason, ProviderCode: code}},
		Refunds: []record.Refund{w.refundOf(p, lifecycle.RefundPayoutFailed, now)}}
}

// refundOf is the refund, for reason, of the deposit p took: what the
// payout asked for (an excess over it was refunded when it arrived).
func (w *Worker) refundOf(p record.StoredPayout, reason string, now time.Time) record.Refund {
	return record.Refund{ID: record.NewRefundID(), Reason: reason, Amount: record.Owed(p), CryptoCurrency: p.CryptoCurrency, Chain: p.Chain,
		DepositTxHash: p.DepositTxHash, CreatedAt: now}
}

// codeSet keeps a metric's label values to a closed set: the first n
// codes seen, then "other".
type codeSet struct {
	mu   sync.Mutex
	n    int
	seen map[string]bool
}

func newCodeSet(n int) *codeSet { return &codeSet{n: n, seen: map[string]bool{}} }

func (c *codeSet) label(code string) string {
	c.mu.Lock()
	defer c.mu.Unlock()
	switch {
	case code == "":
		return "unreadable"
	case c.seen[code]:
		return code
	case len(c.seen) < c.n:
		c.seen[code] = true
		return code
	}
	return "other"
}

// HandOver hands p, whose deposit was just recorded with its lease, to
// the provider at once, with no lock held, when the provider's circuit
// allows a call; it reports whether the provider's answer was applied.
// Whatever stops it (a provider down, this process killed), the
// hand-over queue finishes it once the lease is over. A nil Worker (no
// mover) hands nothing over.
func (w *Worker) HandOver(ctx context.Context, p record.StoredPayout) bool {
	if w == nil || w.provider == nil || p.HandoverAt == nil || p.HandedOverAt != nil || w.circuit.Calls(1) != 1 {
		return false
	}
	return w.handOverOne(ctx, p) == nil
}
