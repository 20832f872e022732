package consent

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/partnerpay/api/pkg/database"
	"github.com/partnerpay/api/pkg/environment"
	"github.com/partnerpay/api/testkit/pgtest"
)

// No answer rests on a row the standby lacks (DESIGN §6): a session's
// read, which its status answers from, waits until the synchronous standby
// has what it read.
func TestASessionReadAnswersOnlyWhatTheStandbyHas(t *testing.T) {
	t.Parallel()
	r := pgtest.StartReplicated(t)
	s := NewStore(pgtest.OpenURL(t, r.URL(), Feed.Migrations(), Migrations), environment.Sandbox)
	at := time.Now().UTC()
	if err := s.Create(context.Background(), Record{ID: "cs_1", Owner: "acme", AccountID: "acc_1", ProviderCustomerID: "cus_1",
		State: StatePending, CreatedAt: at}); err != nil {
		t.Fatal(err)
	}
	r.ReadsOnlyWhatTheStandbyHas(t, `UPDATE consent_sessions SET state = 'returned', result = 'accepted', returned_at = now() WHERE id = 'cs_1'`,
		func(ctx context.Context) error {
			got, err := s.Get(ctx, "cs_1")
			if err == nil && got.State != StateReturned {
				err = fmt.Errorf("session state %q, want %q", got.State, StateReturned)
			}
			return err
		})
}

// The schema holds a session's rules itself: returned is final, an
// attempt is redeemed once, and only while it is its session's current one.
func TestTheSchemaHoldsTheSessionRules(t *testing.T) {
	t.Parallel()
	db := pgtest.Open(t, Feed.Migrations(), Migrations)
	ctx := context.Background()
	s := NewStore(db, environment.Sandbox)
	at := time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC)
	if err := s.Create(ctx, Record{ID: "cs_1", Owner: "acme", AccountID: "acc_1", ProviderCustomerID: "cus_1", State: StatePending, CreatedAt: at}); err != nil {
		t.Fatal(err)
	}
	first := Attempt{ID: "att_1", SessionID: "cs_1", ProviderSessionID: "ts_1", CreatedAt: at}
	second := Attempt{ID: "att_2", SessionID: "cs_1", ProviderSessionID: "ts_2", ReturnURL: "https://p.test/", CreatedAt: at}
	for _, a := range []Attempt{first, second} {
		if err := s.Mint(ctx, a); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := s.Return(ctx, first, "accepted", at); !errors.Is(err, ErrSuperseded) {
		t.Fatalf("the earlier link's return: %v, want ErrSuperseded", err)
	}
	r, err := s.Return(ctx, second, "declined", at.Add(time.Minute))
	if err != nil || r.State != StateReturned || r.Result != "declined" || !r.ReturnedAt.Equal(at.Add(time.Minute)) {
		t.Fatalf("return: %+v %v", r, err)
	}
	if _, err := s.Return(ctx, second, "accepted", at); !errors.Is(err, ErrUsed) {
		t.Errorf("a second redemption: %v, want ErrUsed", err)
	}
	// A link minted after the return redeems once, and the first
	// outcome stays: returned is final.
	third := Attempt{ID: "att_3", SessionID: "cs_1", ProviderSessionID: "ts_3", CreatedAt: at}
	if err := s.Mint(ctx, third); err != nil {
		t.Fatal(err)
	}
	if r, err := s.Return(ctx, third, "accepted", at); err != nil || r.Result != "declined" {
		t.Errorf("a later return changed the outcome: %+v %v", r, err)
	}
	if got, _ := s.Get(ctx, "cs_1"); got.State != StateReturned || got.Result != "declined" {
		t.Errorf("the session is now %+v", got)
	}
	for _, stmt := range []string{
		`UPDATE consent_sessions SET state = 'pending', result = NULL, returned_at = NULL`,
		`UPDATE consent_sessions SET result = 'accepted'`,
		`UPDATE consent_sessions SET key_id = 'globex'`,
		`UPDATE consent_attempts SET used_at = NULL WHERE id = 'att_2'`,
	} {
		if _, err := db.Exec(ctx, stmt); !database.IsRuleViolation(err) {
			t.Errorf("%s: %v, want the schema to refuse it", stmt, err)
		}
	}
	if _, err := s.Get(ctx, "cs_unknown"); !errors.Is(err, ErrNotFound) {
		t.Errorf("unknown session: %v", err)
	}
}
