package bank

import (
	"strings"
	"testing"
	"time"

	"github.com/partnerpay/api/pkg/bankprovider"
)

func newPayout(ref string, outcome *bankprovider.SandboxOutcome) bankprovider.NewPayout {
	return bankprovider.NewPayout{Reference: ref, Rail: "sepa_instant", Currency: "EUR", Country: "DE", Amount: "100",
		Beneficiary: []byte(`{"name":"Ada","iban":"DE89370400440532013000"}`), Sandbox: outcome}
}

// A payout plays out the outcome its sandbox call chose, on the clock:
// processing until PayoutSettle has passed, then completed, failed, or
// completed and, one PayoutSettle later, returned.
func TestAPayoutPlaysOutItsOutcome(t *testing.T) {
	t.Parallel()
	c := &clock{time.Date(2026, 11, 26, 12, 0, 0, 0, time.UTC)}
	b := newBank(c)
	for _, tt := range []struct {
		ref     string
		outcome *bankprovider.SandboxOutcome
		at1     bankprovider.Payout // after one PayoutSettle
		at2     bankprovider.Payout // after two
	}{
		{"bpo_1", nil, bankprovider.Payout{Status: "completed", CompletedAt: "2026-11-26T12:00:03Z"}, bankprovider.Payout{Status: "completed", CompletedAt: "2026-11-26T12:00:03Z"}},
		{"bpo_2", &bankprovider.SandboxOutcome{Outcome: "failed", Reason: "name_mismatch"}, bankprovider.Payout{Status: "failed", FailureReason: "name_mismatch"}, bankprovider.Payout{Status: "failed", FailureReason: "name_mismatch"}},
		{"bpo_3", &bankprovider.SandboxOutcome{Outcome: "returned", Reason: "beneficiary_deceased"}, bankprovider.Payout{Status: "completed", CompletedAt: "2026-11-26T12:00:03Z"},
			bankprovider.Payout{Status: "returned", ReturnReason: "beneficiary_deceased", CompletedAt: "2026-11-26T12:00:03Z"}},
	} {
		p, created, err := b.CreatePayout(newPayout(tt.ref, tt.outcome))
		if err != nil || !created || p.Status != "processing" || p.Reference != tt.ref {
			t.Fatalf("%s: %+v %v %v", tt.ref, p, created, err)
		}
		if again, created, _ := b.CreatePayout(newPayout(tt.ref, tt.outcome)); created || again.ID != p.ID {
			t.Errorf("%s handed over twice: %+v", tt.ref, again)
		}
		tt.at1.ID, tt.at1.Reference, tt.at2.ID, tt.at2.Reference = p.ID, tt.ref, p.ID, tt.ref
		c.t = c.t.Add(3 * time.Second)
		if got, _ := b.PayoutByReference(tt.ref); got != tt.at1 {
			t.Errorf("%s after one settle: %+v, want %+v", tt.ref, got, tt.at1)
		}
		c.t = c.t.Add(3 * time.Second)
		if got, _ := b.PayoutByReference(tt.ref); got != tt.at2 {
			t.Errorf("%s after two: %+v, want %+v", tt.ref, got, tt.at2)
		}
		c.t = c.t.Add(-6 * time.Second)
	}
	for _, bad := range []*bankprovider.SandboxOutcome{{Outcome: "failed"}, {Outcome: "returned", Reason: "name_mismatch"}, {Outcome: "completed", Reason: "x"}, {Outcome: "lost"}} {
		if _, _, err := b.CreatePayout(newPayout("bpo_bad", bad)); failure(t, err).Status != 422 {
			t.Errorf("outcome %+v accepted", bad)
		}
	}
	if _, err := b.PayoutByReference("bpo_none"); failure(t, err).Status != 404 {
		t.Error("an unknown payout")
	}
}

// A payee check answers by the name's magic words, on the rails that have
// one; any other rail, or no name, is refused naming the field.
func TestAPayeeCheckAnswersByTheName(t *testing.T) {
	t.Parallel()
	b := newBank(&clock{t: time.Now()})
	for _, tt := range []struct {
		name string
		want bankprovider.PayeeResult
	}{
		{"Ada Lovelace", bankprovider.PayeeResult{Result: "match"}},
		{"Ada Mismatch", bankprovider.PayeeResult{Result: "no_match"}},
		{"Ada Close Lovelace", bankprovider.PayeeResult{Result: "close_match", RegisteredName: "Ada Lovelace"}},
		{"Unavailable Ltd", bankprovider.PayeeResult{Result: "not_possible"}},
	} {
		got, err := b.CheckPayee(bankprovider.PayeeCheck{Rail: "sepa", Country: "DE", Beneficiary: []byte(`{"name":"` + tt.name + `","iban":"DE89370400440532013000"}`)})
		if err != nil || got != tt.want {
			t.Errorf("%s: %+v %v, want %+v", tt.name, got, err, tt.want)
		}
	}
	_, err := b.CheckPayee(bankprovider.PayeeCheck{Rail: "ach", Beneficiary: []byte(`{}`)})
	if f := failure(t, err); f.Status != 422 || len(f.Body.Error.Details) != 2 || f.Body.Error.Details[0].Field != "rail" || f.Body.Error.Details[1].Field != "beneficiary.name" {
		t.Errorf("ach without a name: %+v", f.Body.Error)
	}
}

// The provider's changes feed: each change a payout makes enters it once
// its time has come, in the order they happen, each with its own id; a
// follower pages through it from the last id it has; a cursor of another
// boot is state_lost (the follower starts again).
func TestTheChangesFeedTellsEachChangeOnce(t *testing.T) {
	t.Parallel()
	c := &clock{time.Date(2026, 11, 26, 12, 0, 0, 0, time.UTC)}
	b := newBank(c)
	if _, _, err := b.CreatePayout(newPayout("bpo_a", &bankprovider.SandboxOutcome{Outcome: "returned", Reason: "account_closed"})); err != nil {
		t.Fatal(err)
	}
	if _, _, err := b.CreatePayout(newPayout("bpo_b", &bankprovider.SandboxOutcome{Outcome: "failed", Reason: "name_mismatch"})); err != nil {
		t.Fatal(err)
	}
	seen := func(after string) ([]string, string) {
		t.Helper()
		var out []string
		for {
			page, more, err := b.Changes(after, 2)
			if err != nil {
				t.Fatal(err)
			}
			for _, ch := range page {
				out = append(out, ch.Payout.Reference+":"+ch.Payout.Status)
				after = ch.ID
			}
			if !more {
				return out, after
			}
		}
	}
	got, after := seen("")
	if want := "bpo_a:processing bpo_b:processing"; strings.Join(got, " ") != want {
		t.Errorf("at the hand-overs: %v, want %s", got, want)
	}
	c.t = c.t.Add(3 * time.Second)
	got, after = seen(after)
	if want := "bpo_a:completed bpo_b:failed"; strings.Join(got, " ") != want {
		t.Errorf("a settle later: %v, want %s", got, want)
	}
	c.t = c.t.Add(time.Hour)
	got, _ = seen(after)
	if want := "bpo_a:returned"; strings.Join(got, " ") != want {
		t.Errorf("much later: %v, want %s (each change once)", got, want)
	}
	other := newBank(c) // the provider restarted empty
	if _, _, err := other.Changes(after, 10); failure(t, err).Status != 410 || failure(t, err).Body.Error.Type != bankprovider.TypeStateLost {
		t.Errorf("a cursor of another boot: %v, want 410 state_lost", err)
	}
	for _, bad := range []string{"chg_x", after + "0"} {
		if _, _, err := b.Changes(bad, 10); failure(t, err).Status != 422 {
			t.Errorf("cursor %q: %v, want 422", bad, err)
		}
	}
	if _, _, err := b.Changes("", 0); failure(t, err).Status != 422 {
		t.Errorf("limit 0: %v", err)
	}
}
