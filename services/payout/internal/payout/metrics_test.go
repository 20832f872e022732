package payout

import (
	"context"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/partnerpay/api/pkg/bankprovider"
	"github.com/partnerpay/api/services/payout/internal/store"
	"github.com/partnerpay/api/testkit/pgtest"
)

// The payout figures: moves as they commit, the payouts in flight by
// status and rail with the oldest's age, and the refunds owed, on the
// database's word.
func TestThePayoutFiguresAreTheDatabases(t *testing.T) {
	t.Parallel()
	db := pgtest.Open(t, migrationSets...)
	f := newStatusFixture(t, db)
	reg := prometheus.NewPedanticRegistry()
	m := store.NewMetrics(db, slog.New(slog.DiscardHandler), reg)
	f.svc.(*service).payouts.(*store.Store).Measure(m)
	ctx := context.Background()

	waiting := f.payout(t, "20")
	failing := f.payout(t, "21")
	if _, err := f.deposit(ctx, acme, DepositRequest{PayoutID: failing.PayoutID, Outcome: strp("failed"), Reason: strp("account_closed")}); err != nil {
		t.Fatal(err)
	}
	f.provider.says(failing.PayoutID, bankprovider.Payout{Status: "failed", FailureReason: "account_closed"})
	processing := f.payout(t, "22")
	if _, err := f.deposit(ctx, acme, DepositRequest{PayoutID: processing.PayoutID}); err != nil {
		t.Fatal(err)
	}
	f.later(t, time.Second)
	_ = waiting

	want := `
# HELP partnerapi_payout_moves_total Payouts moved to each status, as the moves commit (a payout made counts under awaiting_deposit).
# TYPE partnerapi_payout_moves_total counter
partnerapi_payout_moves_total{status="awaiting_deposit"} 3
partnerapi_payout_moves_total{status="completed"} 0
partnerapi_payout_moves_total{status="expired"} 0
partnerapi_payout_moves_total{status="failed"} 1
partnerapi_payout_moves_total{status="processing"} 2
partnerapi_payout_moves_total{status="returned"} 0
# HELP partnerapi_payout_refunds_owed Refunds owed and not yet sent, by status (awaiting_address: the payout has no refund address; pending: being sent).
# TYPE partnerapi_payout_refunds_owed gauge
partnerapi_payout_refunds_owed{status="awaiting_address"} 1
partnerapi_payout_refunds_owed{status="pending"} 0
# HELP partnerapi_payout_figures_up 1 when the last scrape read the payout figures from the database; 0 when it could not (they are then missing).
# TYPE partnerapi_payout_figures_up gauge
partnerapi_payout_figures_up 1
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want), "partnerapi_payout_moves_total", "partnerapi_payout_refunds_owed",
		"partnerapi_payout_figures_up"); err != nil {
		t.Error(err)
	}
	in := func(status, rail string) float64 {
		mfs, err := reg.Gather()
		if err != nil {
			t.Fatal(err)
		}
		for _, mf := range mfs {
			if mf.GetName() != "partnerapi_payout_in_flight" {
				continue
			}
			for _, m := range mf.GetMetric() {
				l := m.GetLabel()
				if l[0].GetValue() == rail && l[1].GetValue() == status {
					return m.GetGauge().GetValue()
				}
			}
		}
		t.Fatalf("no partnerapi_payout_in_flight{status=%q,rail=%q}", status, rail)
		return 0
	}
	if a, p := in("awaiting_deposit", "sepa_instant"), in("processing", "sepa_instant"); a != 1 || p != 1 {
		t.Errorf("in flight: %v awaiting_deposit, %v processing; want 1 and 1", a, p)
	}
	if n := in("processing", "ach"); n != 0 {
		t.Errorf("ach processing: %v", n)
	}
}
