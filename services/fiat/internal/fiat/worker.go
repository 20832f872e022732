package fiat

import (
	"context"
	"encoding/json"
	"log/slog"
	"reflect"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/partnerpay/api/pkg/bankprovider"
	"github.com/partnerpay/api/pkg/database"
	"github.com/partnerpay/api/pkg/lifecycle"
	"github.com/partnerpay/api/pkg/worker"
)

// Who moves the on-ramp's records: the service, not the reader (DESIGN §3).
// Every replica runs a Worker: each round claims the records due now (FOR
// UPDATE SKIP LOCKED) — accounts whose identity check is not final, virtual
// accounts and one-off deposits, whose transfers the provider lists — asks
// the provider about each, and keeps its word with when to ask next: a
// tenth of the time since the record last changed, from half a second up
// to PollMax while it waits for something (an account's check, a
// deposit's money), up to an hour for a virtual account already funded
// (more transfers may come, at any time, for weeks). The cost grows with
// the records in flight, and a provider's change reaches the record within
// seconds whether or not anyone reads it; a sandbox pay-in or identity
// result has its record asked about at once.

// Worker moves the records of one replica's fiat service.
type Worker struct {
	svc     *service
	pollMax time.Duration
	loop    *worker.Loop
	rows    *worker.Rows
	// circuit backs the provider off as a whole while its calls fail.
	circuit *worker.Circuit
}

// NewWorker is the worker of svc (NewService's); a record in flight is
// asked about at most every pollMax. Its rounds are counted in reg.
func NewWorker(svc Service, pollMax time.Duration, log *slog.Logger, reg prometheus.Registerer) *Worker {
	w := &Worker{svc: svc.(*service), pollMax: max(pollMax, worker.PollMin), rows: worker.NewRows("fiat", log, reg),
		circuit: worker.NewCircuit(svc.(*service).now)}
	w.rows.Declare("fiat_accounts", "fiat_virtual_accounts", "fiat_deposits")
	w.loop = worker.New("fiat", w.Round, log, reg)
	return w
}

const (
	pollSettled = time.Hour // a funded virtual account
	// depositGrace is how long after its expiresAt a one-off deposit is
	// still asked about: a transfer sent in time may land a little later.
	depositGrace = 24 * time.Hour
)

// Run works due records until ctx ends.
func (w *Worker) Run(ctx context.Context) { w.loop.Run(ctx) }

// Round works the accounts, virtual accounts and deposits due now; it
// returns how many it claimed.
func (w *Worker) Round(ctx context.Context) (int, error) {
	// A failing provider gets one probe at a time, each later (DESIGN §3).
	limit := w.circuit.Calls(worker.RoundSize)
	if limit == 0 {
		return 0, nil
	}
	now := w.svc.created()
	until := now.Add(worker.ProviderWait + 5*time.Second) // each row's lease while its call is out
	store := w.svc.store
	failed := func(table, id string, err error) time.Time {
		if err == nil {
			w.rows.Moved(id) // its failures in a row end
			return time.Time{}
		}
		n := w.rows.Streak(id)
		w.rows.Failed(ctx, table, id, worker.DatabaseReason(err, database.IsRuleViolation), n, err)
		return now.Add(worker.Backoff(n, time.Hour))
	}
	a, err := store.DueAccounts(ctx, now, until, limit, func(ctx context.Context, due []AccountRecord) []Check {
		return worker.Each(ctx, due, func(ctx context.Context, r AccountRecord) Check { return w.account(ctx, r, now) })
	}, failed)
	if err != nil {
		return a, err
	}
	v, err := store.DueVirtualAccounts(ctx, now, until, limit, func(ctx context.Context, due []VirtualAccountRecord) []Check {
		return worker.Each(ctx, due, func(ctx context.Context, r VirtualAccountRecord) Check { return w.virtualAccount(ctx, r, now) })
	}, failed)
	if err != nil {
		return a + v, err
	}
	d, err := store.DueDeposits(ctx, now, until, limit, func(ctx context.Context, due []DepositRecord) []Check {
		return worker.Each(ctx, due, func(ctx context.Context, r DepositRecord) Check { return w.deposit(ctx, r, now) })
	}, failed)
	return a + v + d, err
}

// account reads an account's status from the provider.
func (w *Worker) account(ctx context.Context, r AccountRecord, now time.Time) Check {
	c, err := w.svc.provider.Customer(ctx, r.ProviderCustomerID)
	w.circuit.Observe(err)
	if err != nil {
		return w.later(now, r.StatusAt, w.pollMax)
	}
	if st := wireStatus(c.Status); st != r.Status {
		next := now.Add(worker.PollMin)
		return Check{Status: st, Next: &next}
	}
	return w.later(now, r.StatusAt, w.pollMax)
}

// virtualAccount reads the transfers to a virtual account.
func (w *Worker) virtualAccount(ctx context.Context, r VirtualAccountRecord, now time.Time) Check {
	txs, err := w.svc.provider.Transactions(ctx, r.ProviderAccountID)
	w.circuit.Observe(err)
	if err != nil {
		return w.later(now, r.ChangedAt, w.pollMax)
	}
	st, _ := funding(txs)
	most := w.pollMax
	if st.Status == lifecycle.Funded && settled(txs) {
		most = pollSettled
	}
	c := w.later(now, r.ChangedAt, most)
	if raws := rawsOf(txs); !sameTransactions(raws, r.Transactions) {
		next := now.Add(worker.PollMin)
		c = Check{Transactions: raws, Next: &next}
	}
	return c
}

// deposit reads the transfers sent for a one-off deposit; funded, it is
// final, and past its window (and a grace) it is no longer asked about.
func (w *Worker) deposit(ctx context.Context, r DepositRecord, now time.Time) Check {
	if r.Status == lifecycle.Funded || (!r.ExpiresAt.IsZero() && now.After(r.ExpiresAt.Add(depositGrace))) {
		return Check{}
	}
	txs, err := w.svc.provider.DepositTransactions(ctx, r.ProviderInstructionID)
	w.circuit.Observe(err)
	if err != nil {
		return w.later(now, r.ChangedAt, w.pollMax)
	}
	raws := rawsOf(txs)
	if sameTransactions(raws, r.Transactions) {
		return w.later(now, r.ChangedAt, w.pollMax)
	}
	c := Check{Transactions: raws}
	if st, err := funding(txs); err == nil && st.Status == lifecycle.Funded {
		c.Funded = true // final: never asked again
		return c
	}
	next := now.Add(worker.PollMin)
	c.Next = &next
	return c
}

// later is a record asked about again: a tenth of the time since it last
// changed, from half a second up to most.
func (w *Worker) later(now, since time.Time, most time.Duration) Check {
	next := worker.Next(now, since, most)
	return Check{Next: &next}
}

// settled reports whether every transfer listed has settled: nothing is
// on its way.
func settled(txs []bankprovider.Transaction) bool {
	for _, t := range txs {
		if t.Status != "settled" {
			return false
		}
	}
	return true
}

func rawsOf(txs []bankprovider.Transaction) []json.RawMessage {
	out := make([]json.RawMessage, len(txs))
	for i, t := range txs {
		out[i] = t.Raw
	}
	return out
}

// sameTransactions reports whether the provider lists what was kept (the
// store keeps each record as jsonb, which may order and space it
// otherwise): the same records, in the same order, each the same JSON
// value.
func sameTransactions(a, b []json.RawMessage) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		var x, y any
		if json.Unmarshal(a[i], &x) != nil || json.Unmarshal(b[i], &y) != nil || !reflect.DeepEqual(x, y) {
			return false
		}
	}
	return true
}
