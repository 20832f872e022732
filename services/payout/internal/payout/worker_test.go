package payout

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/partnerpay/api/pkg/bankprovider"
	"github.com/partnerpay/api/services/payout/internal/mover"
	"github.com/partnerpay/api/testkit/pgtest"
)

// deposited is a payout of amount whose deposit arrived and that the
// provider took (processing).
func (f statusFixture) deposited(t *testing.T, amount string) Payout {
	t.Helper()
	p := f.payout(t, amount)
	st, err := f.deposit(context.Background(), acme, DepositRequest{PayoutID: p.PayoutID})
	if err != nil || st.Status != "processing" {
		t.Fatalf("the deposit: %+v %v", st, err)
	}
	return p
}

// failures is partnerapi_worker_row_failures_total for queue and reason.
func (f statusFixture) failures(t testing.TB, queue, reason string) float64 {
	return f.metric(t, "partnerapi_worker_row_failures_total", "worker", "payout", "queue", queue, "reason", reason)
}

// metric is the value of the counter or gauge name with labels (name,
// value, ...) in the fixture's registry, as a scrape reads it: 0 when it
// has no such series.
func (f statusFixture) metric(t testing.TB, name string, labels ...string) float64 {
	t.Helper()
	return metricIn(t, f.reg, name, labels...)
}

// metricIn is metric's value in reg.
func metricIn(t testing.TB, reg prometheus.Gatherer, name string, labels ...string) float64 {
	t.Helper()
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range families {
		if mf.GetName() != name {
			continue
		}
	series:
		for _, m := range mf.GetMetric() {
			for i := 0; i+1 < len(labels); i += 2 {
				if !slices.ContainsFunc(m.GetLabel(), func(l *dto.LabelPair) bool { return l.GetName() == labels[i] && l.GetValue() == labels[i+1] }) {
					continue series
				}
			}
			if m.GetCounter() != nil {
				return m.GetCounter().GetValue()
			}
			return m.GetGauge().GetValue()
		}
	}
	return 0
}

// refuse has the database refuse moving payout id to status, as a bug or
// a broken row would (a trigger of the test's own).
func refuse(t *testing.T, f statusFixture, id, status string) (lift func()) {
	t.Helper()
	ctx := context.Background()
	fn := "refuse_" + strings.TrimPrefix(id, "bpo_")
	if _, err := f.db.Exec(ctx, `CREATE FUNCTION `+fn+`() RETURNS trigger LANGUAGE plpgsql AS $$
		BEGIN IF NEW.id = '`+id+`' AND NEW.status = '`+status+`' THEN RAISE EXCEPTION 'refused by the test'; END IF; RETURN NEW; END $$`); err != nil {
		t.Fatal(err)
	}
	if _, err := f.db.Exec(ctx, `CREATE TRIGGER `+fn+` BEFORE UPDATE ON payouts FOR EACH ROW EXECUTE FUNCTION `+fn+`()`); err != nil {
		t.Fatal(err)
	}
	return func() {
		if _, err := f.db.Exec(ctx, `DROP TRIGGER `+fn+` ON payouts`); err != nil {
			t.Fatal(err)
		}
	}
}

// One payout the database refuses to move does not stop the round: the
// other payouts of the same page of changes, and of the same expiry
// round, move; the refused one is counted, logged once and backed off
// alone, and moves once it can (its change is read again by asking).
func TestOneRefusedRowDoesNotStopTheRound(t *testing.T) {
	t.Parallel()
	f := newStatusFixture(t, pgtest.Open(t, migrationSets...))
	a, b, c := f.deposited(t, "71"), f.deposited(t, "72"), f.deposited(t, "73")
	lift := refuse(t, f, b.PayoutID, "completed")
	for _, p := range []Payout{a, b, c} {
		f.provider.says(p.PayoutID, bankprovider.Payout{Status: "completed", CompletedAt: "2026-11-26T12:00:03Z"})
	}
	f.later(t, time.Second)
	for _, p := range []Payout{a, c} {
		if st := f.status(t, p.PayoutID); st.Status != "completed" {
			t.Errorf("%s beside a refused payout: %s, want completed", p.PayoutID, st.Status)
		}
	}
	if st := f.status(t, b.PayoutID); st.Status != "processing" {
		t.Errorf("the refused payout: %s", st.Status)
	}
	if n := f.failures(t, "changes", "refused"); n != 1 {
		t.Errorf("row failures {changes, refused} = %v, want 1", n)
	}
	lift()
	f.later(t, time.Minute) // its backoff over: asked about on its own
	if st := f.status(t, b.PayoutID); st.Status != "completed" {
		t.Errorf("the refused payout once the database takes it: %s", st.Status)
	}

	// The expiry queue: one refused, the others expire in the same round.
	x, y, z := f.payout(t, "74"), f.payout(t, "75"), f.payout(t, "76")
	lift = refuse(t, f, y.PayoutID, "expired")
	defer lift()
	f.later(t, DepositWindow)
	for _, p := range []Payout{x, z} {
		if st := f.status(t, p.PayoutID); st.Status != "expired" {
			t.Errorf("%s beside a refused expiry: %s", p.PayoutID, st.Status)
		}
	}
	if st := f.status(t, y.PayoutID); st.Status != "awaiting_deposit" {
		t.Errorf("the refused expiry: %s", st.Status)
	}
	if n := f.failures(t, "expiry", "refused"); n != 1 {
		t.Errorf("row failures {expiry, refused} = %v, want 1: backed off, not retried every round", n)
	}
}

// Every word of the provider has a meaning: a failure or return reason we
// do not list becomes ours (provider_rejected, returned_by_bank) with the
// provider's code kept, is counted by code, and owes its refund; it never
// leaves a payout where it was.
func TestAnUnlistedReasonHasAMeaning(t *testing.T) {
	t.Parallel()
	f := newStatusFixture(t, pgtest.Open(t, migrationSets...))
	failed, returned := f.deposited(t, "81"), f.deposited(t, "82")
	f.provider.says(failed.PayoutID, bankprovider.Payout{Status: "failed", FailureReason: "insufficient_funds"})
	f.provider.says(returned.PayoutID, bankprovider.Payout{Status: "returned", ReturnReason: "account_frozen", ReturnCode: "R16",
		CompletedAt: "2026-11-26T12:00:03Z"})
	f.later(t, time.Second)
	st := f.status(t, failed.PayoutID)
	if st.Status != "failed" || st.FailureReason != "provider_rejected" || st.ProviderCode != "insufficient_funds" ||
		!equal(refunds(st), strs("payout_failed/awaiting_address/1234567.89/USDC")) {
		t.Errorf("an unlisted failure: %+v %v", st, refunds(st))
	}
	st = f.status(t, returned.PayoutID)
	if st.Status != "returned" || st.ReturnReason != "returned_by_bank" || st.ReturnCode != "R16" || st.ProviderCode != "account_frozen" ||
		!equal(refunds(st), strs("payout_returned/awaiting_address/1234567.89/USDC")) {
		t.Errorf("an unlisted return: %+v %v", st, refunds(st))
	}
	for _, k := range [][2]string{{"failure", "insufficient_funds"}, {"return", "account_frozen"}} {
		if n := f.metric(t, "partnerapi_payout_provider_unlisted_total", "kind", k[0], "code", k[1]); n != 1 {
			t.Errorf("unlisted{%s,%s} = %v, want 1", k[0], k[1], n)
		}
	}
}

// A provider that fails for a minute gets fewer calls, not more: its
// circuit makes one probe at a time, each after a longer wait, and the
// payouts waiting on it move once it answers again.
func TestAFailingProviderIsBackedOff(t *testing.T) {
	t.Parallel()
	f := newStatusFixture(t, pgtest.Open(t, migrationSets...))
	var ps []Payout
	for i := range 5 {
		ps = append(ps, f.payout(t, "9"+string(rune('0'+i))))
	}
	f.provider.set(func(f *fakeProvider) { f.down = true })
	for _, p := range ps {
		if _, err := f.deposit(context.Background(), acme, DepositRequest{PayoutID: p.PayoutID}); err != nil {
			t.Fatal(err)
		}
	}
	creates, asked, _ := f.provider.counts()
	before := creates + asked + f.provider.feeds()
	// A minute, a tenth of a second at a time: 600 rounds of each queue.
	// The first records the deposits on the chain and tries to hand the
	// payouts over; the others are the worker's rounds alone (the calls to
	// the provider are theirs), so the chain's clock, a sealed block each
	// time it moves, moves once, after them.
	f.later(t, 100*time.Millisecond)
	for range 599 {
		f.clock.add(100 * time.Millisecond)
		f.workOffChain(t)
	}
	if err := f.chain.chain.AdjustTime(599 * 100 * time.Millisecond); err != nil {
		t.Fatal(err)
	}
	creates, asked, _ = f.provider.counts()
	calls := creates + asked + f.provider.feeds() - before
	if calls > 20 {
		t.Errorf("%d calls to a provider failing for a minute (600 rounds), want at most 20: one probe at a time, each later", calls)
	}
	f.provider.set(func(f *fakeProvider) { f.down = false })
	f.later(t, 31*time.Second) // the longest wait for the next probe
	f.later(t, 30*time.Second) // and each payout's own backoff
	for _, p := range ps {
		if st := f.status(t, p.PayoutID); st.Status != "processing" {
			t.Errorf("%s once the provider answers again: %s", p.PayoutID, st.Status)
		}
	}
	t.Logf("%d calls to the provider during its minute down", calls)
}

// A deposit to a payout that took one already, or to a final one, is
// refunded (deposit_unexpected): a chain cannot refuse a transfer.
func TestASecondDepositIsRefunded(t *testing.T) {
	t.Parallel()
	f := newStatusFixture(t, pgtest.Open(t, migrationSets...))
	ctx := context.Background()
	processing, completed, failed := f.deposited(t, "101"), f.deposited(t, "102"), f.deposited(t, "103")
	f.provider.says(completed.PayoutID, bankprovider.Payout{Status: "completed", CompletedAt: "2026-11-26T12:00:03Z"})
	f.provider.says(failed.PayoutID, bankprovider.Payout{Status: "failed", FailureReason: "account_closed"})
	f.later(t, time.Second)
	for _, tt := range []struct {
		p       Payout
		status  string
		refunds []string
	}{
		{processing, "processing", strs("deposit_unexpected/awaiting_address/5.00/USDC")},
		{completed, "completed", strs("deposit_unexpected/awaiting_address/5.00/USDC")},
		{failed, "failed", strs("deposit_unexpected/awaiting_address/5.00/USDC", "payout_failed/awaiting_address/1234567.89/USDC")},
	} {
		st, err := f.deposit(ctx, acme, DepositRequest{PayoutID: tt.p.PayoutID, Amount: strp("5")})
		if got := refunds(st); err != nil || st.Status != tt.status || !equal(slices.Sorted(slices.Values(got)), tt.refunds) {
			t.Errorf("a second deposit to a %s payout: %+v %v (refunds %v)", tt.status, st.Status, err, refunds(st))
		}
	}
}

// A partner's write to a payout never waits for the provider: while the
// worker's call to hand the payout over is held at the provider, setting
// its refund address answers.
func TestPartnerWritesNeverWaitForTheProvider(t *testing.T) {
	t.Parallel()
	f := newStatusFixture(t, pgtest.Open(t, migrationSets...))
	ctx := context.Background()
	p := f.payout(t, "111")
	hold, held := make(chan struct{}), make(chan struct{}, 1)
	f.provider.set(func(f *fakeProvider) { f.hold, f.held = hold, held })
	deposited := make(chan error, 1)
	go func() {
		_, err := f.deposit(ctx, acme, DepositRequest{PayoutID: p.PayoutID})
		deposited <- err
	}()
	<-held // the hand-over's call is out, and held
	st, err := f.svc.SetRefundAddress(ctx, acme, RefundAddressRequest{PayoutID: p.PayoutID, Address: "0x5aAeb6053F3E94C9b9A09f33669435E7Ef1BeAed"})
	if err != nil || st.RefundAddress != "0x5aAeb6053F3E94C9b9A09f33669435E7Ef1BeAed" {
		t.Fatalf("the refund address while the provider holds the hand-over: %+v %v", st, err)
	}
	f.provider.set(func(f *fakeProvider) { f.hold = nil })
	close(hold)
	if err := <-deposited; err != nil {
		t.Fatal(err)
	}
	if st := f.status(t, p.PayoutID); st.Status != "processing" || st.RefundAddress == "" {
		t.Errorf("after the hand-over: %+v", st)
	}
}

// A payout whose change the feed lost is found by asking, once it is
// overdue; a payout asked about on its own is asked a bounded number of
// times in its life, and a completed one is never asked about for returns.
func TestReconciliationIsRareAndBounded(t *testing.T) {
	t.Parallel()
	f := newStatusFixture(t, pgtest.Open(t, migrationSets...))
	lost, silent, done := f.deposited(t, "121"), f.deposited(t, "122"), f.deposited(t, "123")
	f.provider.tells(lost.PayoutID, bankprovider.Payout{Status: "completed", CompletedAt: "2026-11-26T12:00:03Z"})
	f.provider.says(done.PayoutID, bankprovider.Payout{Status: "completed", CompletedAt: "2026-11-26T12:00:03Z"})
	f.later(t, time.Second)
	if st := f.status(t, lost.PayoutID); st.Status != "processing" {
		t.Fatalf("a change the feed lost, before it is overdue: %s", st.Status)
	}
	f.later(t, time.Minute)
	if st := f.status(t, lost.PayoutID); st.Status != "completed" {
		t.Errorf("a change the feed lost, once overdue: %s", st.Status)
	}
	_, asked, _ := f.provider.counts()
	// Sixty days, six hours at a time, of the worker's rounds: what this
	// asks of the provider is theirs (the deposits were recorded above), so
	// the chain's clock, a sealed block each time it moves, moves once,
	// after.
	for range 60 * 4 {
		f.clock.add(6 * time.Hour)
		f.workOffChain(t)
	}
	if err := f.chain.chain.AdjustTime(60 * 24 * time.Hour); err != nil {
		t.Fatal(err)
	}
	_, after, _ := f.provider.counts()
	if n := after - asked; n > mover.ReconcileChecks {
		t.Errorf("%d checks of a payout whose change never came, over 60 days; want at most %d", n, mover.ReconcileChecks)
	}
	if st := f.status(t, silent.PayoutID); st.Status != "processing" {
		t.Errorf("the silent payout: %s", st.Status)
	}
	t.Logf("a silent payout was asked about %d times in 60 days; the completed ones not at all", after-asked)
}

// A check that is out while the feed brings the payout's final change
// (completed, or returned) leaves it so and asked about no more: the
// provider's answer, found or forgotten (a sandbox provider restarted),
// changes nothing and schedules no next check, and a payout that is final
// is no incident.
// (In make test's kills test, a returned payout was asked about once the
// provider restarted, and reported as missing.)
func TestACheckOutWhileTheFeedEndsThePayoutAsksNoMore(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		final     string
		forgotten bool
	}{{"returned", false}, {"returned", true}, {"completed", false}, {"completed", true}} {
		t.Run(fmt.Sprintf("%s,forgotten=%v", c.final, c.forgotten), func(t *testing.T) {
			t.Parallel()
			f := newStatusFixture(t, pgtest.Open(t, migrationSets...))
			p := f.deposited(t, "124")
			ctx := context.Background()
			f.provider.set(func(fp *fakeProvider) {
				fp.asking = func(ref string) {
					fp.set(func(fp *fakeProvider) { fp.asking = nil })
					f.provider.says(ref, bankprovider.Payout{Status: "completed", CompletedAt: "2026-11-26T12:00:03Z"})
					if c.final == "returned" {
						f.provider.says(ref, bankprovider.Payout{Status: "returned", ReturnReason: "refused_by_beneficiary"})
					}
					if _, err := f.worker.ChangesRound(ctx); err != nil {
						t.Error(err)
					}
					if c.forgotten {
						f.provider.set(func(fp *fakeProvider) { delete(fp.word, ref) })
					}
				}
			})
			f.later(t, time.Minute) // overdue: the check goes out, and the feed ends the payout meanwhile
			if st := f.status(t, p.PayoutID); st.Status != c.final {
				t.Fatalf("after the check and the feed: %s, want %s", st.Status, c.final)
			}
			_, asked, _ := f.provider.counts()
			for range 8 {
				f.clock.add(6 * time.Hour)
				f.workOffChain(t)
			}
			if _, after, _ := f.provider.counts(); after != asked {
				t.Errorf("a %s payout was asked about %d more times", c.final, after-asked)
			}
			if n := f.metric(t, "partnerapi_payout_provider_missing_total"); n != 0 {
				t.Errorf("partnerapi_payout_provider_missing_total = %v: a final payout the provider forgot is no incident", n)
			}
			if st := f.status(t, p.PayoutID); st.Status != c.final {
				t.Errorf("in the end: %s, want %s", st.Status, c.final)
			}
		})
	}
}
