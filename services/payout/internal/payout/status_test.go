package payout

import (
	"context"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/partnerpay/api/pkg/bankprovider"
	"github.com/partnerpay/api/pkg/database"
	"github.com/partnerpay/api/pkg/environment"
	"github.com/partnerpay/api/pkg/lifecycle"
	"github.com/partnerpay/api/services/payout/internal/quote"
	"github.com/partnerpay/api/testkit/pgtest"
	"github.com/partnerpay/api/testkit/redistest"
)

// statusFixture is the service with a fake provider whose word a test sets.
type statusFixture struct {
	svc      Service
	clock    *clock
	provider *fakeProvider
	db       *database.DB
}

func newStatusFixture(t testing.TB, db *database.DB) statusFixture {
	t.Helper()
	rs := redistest.Start(t)
	rdb := redis.NewClient(&redis.Options{Addr: rs.Addr})
	t.Cleanup(func() { rdb.Close() })
	c := &clock{t: time.Now()}
	p := newFakeProvider()
	svc := NewService(Config{Env: environment.Sandbox, TTL: time.Hour, Book: quote.NewBook(rdb, []byte("test-secret-0123456789"), c.now),
		Payouts: NewStore(db), Provider: p, Now: c.now, Secret: []byte("test-secret-0123456789")})
	return statusFixture{svc: svc, clock: c, provider: p, db: db}
}

func (f statusFixture) payout(t *testing.T, amount string) Payout {
	t.Helper()
	id := quoteFor(t, f.svc, acme, QuoteRequest{CryptoCurrency: "USDC", Chain: 84532, FiatCurrency: "EUR", Country: "DE", CryptoAmount: strp(amount)})
	p, err := f.svc.Execute(context.Background(), acme, pay(id, "Ada Lovelace", goodIBAN))
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func (f statusFixture) status(t *testing.T, id string) PayoutStatus {
	t.Helper()
	st, err := f.svc.Status(context.Background(), acme, StatusRequest{PayoutID: id})
	if err != nil {
		t.Fatal(err)
	}
	return st
}

func statuses(st PayoutStatus) []string {
	var out []string
	for _, h := range st.History {
		out = append(out, h.Status)
	}
	return out
}

func strs(s ...string) []string { return s }

func equal(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// A payout goes from awaiting_deposit through processing to the outcome
// its sandbox deposit chose, as the provider reports it, each status once
// in its history.
func TestAPayoutReachesItsOutcome(t *testing.T) {
	t.Parallel()
	db := pgtest.Open(t, migrationSets...)
	f := newStatusFixture(t, db)
	ctx := context.Background()
	for _, tt := range []struct {
		name, outcome, reason string
		amount                string
		word                  bankprovider.Payout
		want                  []string
	}{
		{"completed", "", "", "101", bankprovider.Payout{Status: "completed", CompletedAt: "2026-11-26T12:00:03Z"}, strs("awaiting_deposit", "processing", "completed")},
		{"failed", "failed", "name_mismatch", "102", bankprovider.Payout{Status: "failed", FailureReason: "name_mismatch"}, strs("awaiting_deposit", "processing", "failed")},
		{"returned", "returned", "account_closed", "103", bankprovider.Payout{Status: "returned", ReturnReason: "account_closed", CompletedAt: "2026-11-26T12:00:03Z"},
			strs("awaiting_deposit", "processing", "completed", "returned")},
	} {
		t.Run(tt.name, func(t *testing.T) {
			p := f.payout(t, tt.amount)
			if st := f.status(t, p.PayoutID); st.Status != "awaiting_deposit" || !equal(statuses(st), strs("awaiting_deposit")) || st.Payout != p {
				t.Fatalf("a new payout's status: %+v", st)
			}
			req := DepositRequest{PayoutID: p.PayoutID}
			if tt.outcome != "" {
				req.Outcome, req.Reason = &tt.outcome, &tt.reason
			}
			st, err := f.svc.SandboxDeposit(ctx, acme, req)
			if err != nil || st.Status != "processing" || len(st.DepositTxHash) != 66 || !equal(statuses(st), strs("awaiting_deposit", "processing")) {
				t.Fatalf("the deposit: %+v %v", st, err)
			}
			handed := f.provider.payouts[p.PayoutID]
			if tt.outcome != "" && (handed.Sandbox == nil || handed.Sandbox.Outcome != tt.outcome || handed.Sandbox.Reason != tt.reason) {
				t.Errorf("handed to the provider as %+v", handed)
			}
			if string(handed.Beneficiary) != `{"name":"Ada Lovelace","iban":"DE89370400440532013000"}` || handed.Rail != "sepa_instant" {
				t.Errorf("handed to the provider as %+v", handed)
			}
			if _, err := f.svc.SandboxDeposit(ctx, acme, req); code(err) != "payout_not_awaiting_deposit" {
				t.Errorf("a second deposit: %v", err)
			}
			f.provider.says(p.PayoutID, tt.word)
			st = f.status(t, p.PayoutID)
			if st.Status != tt.word.Status || !equal(statuses(st), tt.want) || st.FailureReason != tt.word.FailureReason || st.ReturnReason != tt.word.ReturnReason ||
				(tt.word.CompletedAt != "") != (st.CompletedAt != "") || st.DepositTxHash == "" {
				t.Fatalf("after the provider's word: %+v", st)
			}
			if again := f.status(t, p.PayoutID); !equal(statuses(again), tt.want) {
				t.Errorf("read again: %v", statuses(again))
			}
		})
	}
}

// No deposit within the window: the payout expires, and a deposit after
// that is refused.
func TestAPayoutWithoutItsDepositExpires(t *testing.T) {
	t.Parallel()
	f := newStatusFixture(t, pgtest.Open(t, Migrations))
	p := f.payout(t, "33")
	f.clock.add(DepositWindow)
	st := f.status(t, p.PayoutID)
	if st.Status != "expired" || !equal(statuses(st), strs("awaiting_deposit", "expired")) {
		t.Fatalf("%+v", st)
	}
	if _, err := f.svc.SandboxDeposit(context.Background(), acme, DepositRequest{PayoutID: p.PayoutID}); code(err) != "payout_not_awaiting_deposit" {
		t.Errorf("a deposit after expiry: %v", err)
	}
}

// Another key's payout, an unknown id and a malformed one are all 404
// payout_not_found.
func TestAPayoutIsFoundOnlyByItsKey(t *testing.T) {
	t.Parallel()
	f := newStatusFixture(t, pgtest.Open(t, Migrations))
	p := f.payout(t, "44")
	other := acme
	other.KeyID = "globex"
	for _, tt := range []struct {
		caller   string
		payoutID string
	}{{"globex", p.PayoutID}, {"acme", "bpo_00000000000000000000000000000000"}, {"acme", "bpo_x"}, {"acme", p.PayoutID + "0"}, {"acme", ""}} {
		c := acme
		c.KeyID = tt.caller
		if _, err := f.svc.Status(context.Background(), c, StatusRequest{PayoutID: tt.payoutID}); code(err) != "payout_not_found" {
			t.Errorf("%s asking for %q: %v", tt.caller, tt.payoutID, err)
		}
	}
	for _, bad := range []DepositRequest{
		{PayoutID: p.PayoutID, Outcome: strp("failed")},
		{PayoutID: p.PayoutID, Outcome: strp("returned"), Reason: strp("name_mismatch")},
		{PayoutID: p.PayoutID, Reason: strp("account_closed")},
		{PayoutID: p.PayoutID, Outcome: strp("lost")},
	} {
		if _, err := f.svc.SandboxDeposit(context.Background(), acme, bad); code(err) != "invalid_request" {
			t.Errorf("%+v: %v", bad, err)
		}
	}
}

// Two status readers and a deposit racing, then two readers racing the
// provider's word: the payout moves forward once each time, and its history
// holds each status once.
func TestRacingReadersMoveAPayoutOnce(t *testing.T) {
	t.Parallel()
	db := pgtest.Open(t, migrationSets...)
	f := newStatusFixture(t, db)
	ctx := context.Background()
	for round := range 5 {
		p := f.payout(t, "5"+string(rune('0'+round)))
		race := func(fns ...func()) {
			var wg sync.WaitGroup
			for _, fn := range fns {
				wg.Add(1)
				go func() { defer wg.Done(); fn() }()
			}
			wg.Wait()
		}
		read := func() {
			if _, err := f.svc.Status(ctx, acme, StatusRequest{PayoutID: p.PayoutID}); err != nil {
				t.Error(err)
			}
		}
		race(read, read, func() {
			if _, err := f.svc.SandboxDeposit(ctx, acme, DepositRequest{PayoutID: p.PayoutID, Outcome: strp("returned"), Reason: strp("refused_by_beneficiary")}); err != nil {
				t.Error(err)
			}
		})
		f.provider.says(p.PayoutID, bankprovider.Payout{Status: "returned", ReturnReason: "refused_by_beneficiary", CompletedAt: "2026-11-26T12:00:03Z"})
		race(read, read, read)
		if st := f.status(t, p.PayoutID); !equal(statuses(st), strs("awaiting_deposit", "processing", "completed", "returned")) {
			t.Fatalf("round %d: history %v", round, statuses(st))
		}
	}
}

// The database holds the arrows itself: a backward move, a move off a
// final status and a rewrite of what happened are refused in SQL, and
// each history row commits with its move.
func TestTheDatabaseHoldsThePayoutsArrows(t *testing.T) {
	t.Parallel()
	db := pgtest.Open(t, migrationSets...)
	f := newStatusFixture(t, db)
	ctx := context.Background()
	p := f.payout(t, "66")
	if _, err := f.svc.SandboxDeposit(ctx, acme, DepositRequest{PayoutID: p.PayoutID}); err != nil {
		t.Fatal(err)
	}
	f.provider.says(p.PayoutID, bankprovider.Payout{Status: "completed", CompletedAt: "2026-11-26T12:00:03Z"})
	f.status(t, p.PayoutID)
	for _, stmt := range []string{
		`UPDATE payouts SET status = 'processing'`,
		`UPDATE payouts SET status = 'awaiting_deposit', completed_at = NULL, deposit_tx_hash = NULL`,
		`UPDATE payouts SET status = 'failed', failure_reason = 'name_mismatch', completed_at = NULL`,
		`UPDATE payouts SET deposit_tx_hash = '0x00'`,
		`UPDATE payouts SET completed_at = deposit_expires_at`,
		`UPDATE payouts SET status = 'returned'`, // without its reason
		`INSERT INTO payout_history (payout_id, status, at) SELECT id, 'completed', status_at FROM payouts`,
	} {
		if _, err := db.Exec(ctx, stmt); err == nil {
			t.Errorf("%s: accepted", stmt)
		}
	}
	if st := f.status(t, p.PayoutID); st.Status != "completed" || !equal(statuses(st), strs("awaiting_deposit", "processing", "completed")) {
		t.Errorf("after the refused writes: %+v", st)
	}
}

// The database's arrows are DESIGN §3's, no more, no fewer: of every move
// between two statuses, it takes exactly those lifecycle.PayoutMoves
// lists (GET /v1/statuses and the service read that table). Each move brings what its status needs (a deposit hash, a
// completion time, a reason), so a refusal is the arrow's.
func TestTheDatabaseTakesExactlyTheArrows(t *testing.T) {
	t.Parallel()
	statuses := []string{"awaiting_deposit", "processing", "completed", "returned", "expired", "failed"}
	allowed := map[[2]string]bool{}
	for _, m := range lifecycle.PayoutMoves {
		allowed[m] = true
	}
	db := pgtest.Open(t, migrationSets...)
	ctx := context.Background()
	s := NewStore(db)
	n := 0
	for _, from := range statuses {
		for _, to := range statuses {
			if from == to {
				continue
			}
			n++
			p := storedPayout("bpo_"+strconv.Itoa(n), "bpq_"+strconv.Itoa(n), "Ada")
			if _, err := s.Execute(ctx, p, answerAny); err != nil {
				t.Fatal(err)
			}
			// Bring the payout to from, along the arrows, with what each needs.
			at := p.CreatedAt.Add(time.Second)
			done := time.Now().UTC().Truncate(time.Second)
			path := map[string][]Change{
				"processing": {{From: "awaiting_deposit", To: "processing", At: at, DepositTxHash: "0xaa"}},
				"completed":  {{From: "awaiting_deposit", To: "processing", At: at, DepositTxHash: "0xaa"}, {From: "processing", To: "completed", At: at, CompletedAt: &done}},
				"returned": {{From: "awaiting_deposit", To: "processing", At: at, DepositTxHash: "0xaa"}, {From: "processing", To: "completed", At: at, CompletedAt: &done},
					{From: "completed", To: "returned", At: at, ReturnReason: "account_closed"}},
				"expired": {{From: "awaiting_deposit", To: "expired", At: at}},
				"failed":  {{From: "awaiting_deposit", To: "processing", At: at, DepositTxHash: "0xaa"}, {From: "processing", To: "failed", At: at, FailureReason: "name_mismatch"}},
			}[from]
			for _, c := range path {
				if moved, err := s.Move(ctx, p.ID, c); err != nil || !moved {
					t.Fatalf("to %s: %v %v", from, moved, err)
				}
			}
			c := Change{From: from, To: to, At: at.Add(time.Second)}
			switch to {
			case "processing":
				c.DepositTxHash = "0xaa"
			case "completed":
				c.DepositTxHash, c.CompletedAt = "0xaa", &done
			case "returned":
				c.DepositTxHash, c.CompletedAt, c.ReturnReason = "0xaa", &done, "account_closed"
			case "failed":
				c.DepositTxHash, c.FailureReason = "0xaa", "name_mismatch"
			}
			moved, err := s.Move(ctx, p.ID, c)
			if took := err == nil && moved; took != allowed[[2]string{from, to}] {
				t.Errorf("%s → %s: taken %v (%v), want %v", from, to, took, err, allowed[[2]string{from, to}])
			}
		}
	}
}
