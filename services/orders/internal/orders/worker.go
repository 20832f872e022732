package orders

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/partnerpay/api/pkg/bankprovider"
	"github.com/partnerpay/api/pkg/database"
	"github.com/partnerpay/api/pkg/worker"
)

// Who moves an order: the service, not the reader (DESIGN §3, §7). Every
// replica runs a Worker: each round claims the orders due now (FOR UPDATE
// SKIP LOCKED), asks the card provider about each (or closes the window of
// one the provider never opened), and writes what each came to with when
// it is next due: a tenth of the time since its status last changed, from
// half a second up to PollMax, so the cost grows with the orders in
// flight and a provider's change reaches the record within seconds,
// whether or not anyone reads it.

// Worker moves the orders of one replica's service.
type Worker struct {
	svc     *service
	pollMax time.Duration
	log     *slog.Logger
	loop    *worker.Loop
	rows    *worker.Rows
	circuit *worker.Circuit // backs the card provider off as a whole while it fails
	// forgotten are the orders the provider no longer has, logged once
	// each (not once a round).
	forgotten sync.Map
}

// NewWorker is the worker of svc (NewService's); an order in flight is
// asked about at most every pollMax. Its rounds are counted in reg.
func NewWorker(svc Service, pollMax time.Duration, log *slog.Logger, reg prometheus.Registerer) *Worker {
	w := &Worker{svc: svc.(*service), pollMax: pollMax, log: log, rows: worker.NewRows("orders", log, reg),
		circuit: worker.NewCircuit(svc.(*service).now)}
	w.rows.Declare("orders")
	w.loop = worker.New("orders", w.Round, log, reg)
	return w
}

// Run works due orders until ctx ends.
func (w *Worker) Run(ctx context.Context) { w.loop.Run(ctx) }

// Round works the orders due now, side by side; it returns how many it
// claimed.
func (w *Worker) Round(ctx context.Context) (int, error) {
	now := w.svc.now().UTC().Truncate(time.Microsecond)
	until := now.Add(worker.ProviderWait + 5*time.Second) // each order's lease while its call is out
	limit := w.circuit.Calls(worker.RoundSize)            // one probe at a time while the provider fails
	if limit == 0 {
		return 0, nil
	}
	return w.svc.store.Due(ctx, now, until, limit, func(ctx context.Context, due []Record) []Check {
		return worker.Each(ctx, due, func(ctx context.Context, r Record) Check { return w.check(ctx, r, now) })
	}, func(id string, err error) time.Time {
		if err == nil {
			w.rows.Moved(id) // its failures in a row end
			return time.Time{}
		}
		n := w.rows.Streak(id)
		w.rows.Failed(ctx, "orders", id, worker.DatabaseReason(err, database.IsRuleViolation), n, err)
		return now.Add(worker.Backoff(n, time.Hour))
	})
}

// check decides what the worker makes of order r now. The provider
// decides an order's expiry as it decides its payment (it holds the
// expiresAt the order was opened with): an order is expired here only
// when the provider never opened it.
func (w *Worker) check(ctx context.Context, r Record, now time.Time) Check {
	if Final(r.Status) {
		return Check{}
	}
	if r.ProviderID == "" {
		if awaiting(r.Status) && !now.Before(r.ExpiresAt) {
			return Check{Progress: &Progress{Status: StatusExpired}}
		}
		return Check{Next: &r.ExpiresAt}
	}
	po, err := w.svc.provider.CardOrder(ctx, r.ProviderID)
	w.circuit.Observe(err)
	switch {
	case bankprovider.IsType(err, bankprovider.TypeResourceMissing) || bankprovider.IsType(err, bankprovider.TypeStateLost):
		if _, seen := w.forgotten.LoadOrStore(r.ID, true); !seen {
			w.log.WarnContext(ctx, "the card provider no longer has an order; it is answered as last known", "order_id", r.ID, "status", r.Status)
		}
		next := now.Add(w.pollMax)
		return Check{Next: &next}
	case err != nil:
		return w.later(r, now)
	}
	w.forgotten.Delete(r.ID)
	p, ok := progress(r, po)
	if !ok {
		w.log.WarnContext(ctx, "card provider answer out of shape; order left as it was", "order_id", r.ID, "provider_status", statusLabel(po.Status))
		return w.later(r, now)
	}
	if !forward(r, p) {
		return w.later(r, now)
	}
	c := Check{Progress: &p}
	if !Final(p.Status) {
		next := now.Add(worker.PollMin)
		c.Next = &next
	}
	return c
}

// later is r asked about again: a tenth of the time since its status last
// changed, from half a second up to pollMax.
func (w *Worker) later(r Record, now time.Time) Check {
	next := worker.Next(now, r.StatusAt, w.pollMax)
	return Check{Next: &next}
}
