package payout

import (
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"maps"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/redis/go-redis/v9"

	"github.com/partnerpay/api/pkg/database"
	"github.com/partnerpay/api/pkg/environment"
	"github.com/partnerpay/api/pkg/format"
	"github.com/partnerpay/api/services/payout/internal/quote"
	"github.com/partnerpay/api/services/payout/internal/record"
	"github.com/partnerpay/api/services/payout/internal/store"
	"github.com/partnerpay/api/testkit/pgtest"
	"github.com/partnerpay/api/testkit/redistest"
)

var migrationSets = []database.Migrations{store.Feed.Migrations(), store.Migrations}

var testStart = time.Now().UTC().Truncate(time.Second)

// storedPayout is a payout made now: on PostgreSQL its created_at is the
// database's now() whatever the caller says (expiry is read on one clock).
func storedPayout(id, quoteID, name string) record.StoredPayout {
	now := testStart
	return record.StoredPayout{ID: id, QuoteID: quoteID, KeyID: "acme", BeneficiaryName: name,
		Beneficiary: []byte(`{"name":"` + name + `","iban":"` + goodIBAN + `"}`),
		Chain:       84532, CryptoCurrency: "USDC", FiatCurrency: "EUR", Country: "DE", CryptoAmount: "100",
		Rail: "sepa_instant", Settlement: "PT10S", Status: "awaiting_deposit", QuoteExpiresAt: now.Add(time.Hour), CreatedAt: now,
		DepositAddress: addressOf(id), DepositExpiresAt: now.Add(DepositWindow), StatusAt: now}
}

// addressOf is a deposit address of the test's own for payout id: two
// payouts never share one.
func addressOf(id string) string {
	sum := sha256.Sum256([]byte(id))
	a, _ := format.Checksummed("0x" + hex.EncodeToString(sum[:20]))
	return a
}

func answerAny(p record.Record) (Payout, error) {
	return Payout{PayoutID: p.ID, QuoteID: p.QuoteID}, nil
}

// The database holds the money rules itself: a quote executes once, never
// after its expiry, and an executed payout's beneficiary never changes.
func TestTheSchemaHoldsTheMoneyRules(t *testing.T) {
	t.Parallel()
	db := pgtest.Open(t, migrationSets...)
	ctx := context.Background()
	s := store.NewStore(db, environment.Sandbox)
	if _, err := s.Execute(ctx, storedPayout("bpo_1", "bpq_1", "Ada"), answerAny); err != nil {
		t.Fatal(err)
	}
	got, err := s.Execute(ctx, storedPayout("bpo_2", "bpq_1", "Eve"), func(p record.Record) (Payout, error) {
		if p.ID != "bpo_1" || p.BeneficiaryName != "Ada" {
			t.Errorf("the second execution saw %+v, want the first payout", p)
		}
		return Payout{}, errOtherPayee
	})
	if !errors.Is(err, errOtherPayee) || got.PayoutID != "" {
		t.Fatalf("a second execution of the quote: %+v %v", got, err)
	}
	stored, err := s.ByQuote(ctx, "bpq_1")
	want := storedPayout("bpo_1", "bpq_1", "Ada")
	if err != nil || stored.CreatedAt.IsZero() {
		t.Fatalf("read back %+v %v", stored, err)
	}
	stored.CreatedAt = want.CreatedAt
	if !reflect.DeepEqual(stored.StoredPayout, want) {
		t.Fatalf("read back %+v, want %+v", stored, want)
	}
	for _, stmt := range []string{
		`INSERT INTO payouts (id, quote_id, key_id, beneficiary_name, beneficiary, chain, crypto_currency, fiat_currency, country, crypto_amount, rail, estimated_settlement, status, quote_expires_at, created_at, deposit_address, deposit_expires_at, status_at)
			SELECT 'bpo_3', 'bpq_1', key_id, 'Eve', beneficiary, chain, crypto_currency, fiat_currency, country, crypto_amount, rail, estimated_settlement, status, quote_expires_at, created_at, deposit_address, deposit_expires_at, status_at FROM payouts`,
		`UPDATE payouts SET beneficiary_name = 'Eve'`,
		`UPDATE payouts SET beneficiary = '{"name":"Eve","iban":"FR1420041010050500013M02606"}'`,
		`UPDATE payouts SET crypto_amount = '1000000'`,
		`UPDATE payouts SET deposit_address = '0x1111111111111111111111111111111111111111'`,
		`UPDATE payouts SET status = 'completed', completed_at = created_at`,
		`UPDATE payouts SET status = 'pending'`,
	} {
		if _, err := db.Exec(ctx, stmt); err == nil {
			t.Errorf("%s: accepted", stmt)
		}
	}
	// At its expiry on PostgreSQL's own clock, read from it: the insert's
	// now() is later. (db.Now() less 1 ms was our estimate of that clock,
	// off by up to half a round trip: on a busy machine it ran ahead, and
	// the payout was in time.)
	late := storedPayout("bpo_4", "bpq_4", "Ada")
	if err := db.QueryRow(ctx, `SELECT clock_timestamp()`).Scan(&late.QuoteExpiresAt); err != nil {
		t.Fatal(err)
	}
	late.CreatedAt = late.QuoteExpiresAt
	if _, err := s.Execute(ctx, late, answerAny); !errors.Is(err, store.ErrExpired) {
		t.Errorf("a payout at its quote's expiry: %v, want the check to refuse it", err)
	}
	if _, err := s.ByQuote(ctx, "bpq_4"); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("unknown quote: %v", err)
	}
}

// Each rule a payout row keeps is a named CHECK constraint, refused by
// its name: a copy of a good row breaking one rule at a time, and the
// unbroken copy accepted. And because they are declarations, not a
// trigger's, they hold where triggers do not run: under
// session_replication_role = replica (pg_restore --disable-triggers,
// logical replication's apply), a row with both amounts, an unknown status
// or no deposit hash is refused all the same.
func TestEachPayoutRuleRefusesByName(t *testing.T) {
	t.Parallel()
	columns := []string{"id", "quote_id", "key_id", "beneficiary_name", "beneficiary", "chain", "crypto_currency", "fiat_currency",
		"country", "crypto_amount", "fiat_amount", "rail", "estimated_settlement", "status", "quote_expires_at", "created_at",
		"reference", "deposit_address", "deposit_expires_at", "deposit_tx_hash", "completed_at", "failure_reason", "return_reason",
		"status_at", "handover_at", "handed_over_at", "return_code", "refund_address", "deposit_amount"}
	arrived := map[string]string{"deposit_tx_hash": "'0xab'", "handover_at": "created_at", "handed_over_at": "created_at"}
	with := func(base map[string]string, more map[string]string) map[string]string {
		m := map[string]string{}
		maps.Copy(m, base)
		maps.Copy(m, more)
		return m
	}
	cases := []struct {
		rule string
		set  map[string]string
	}{
		{"", nil},
		{"payouts_not_after_expiry", map[string]string{"quote_expires_at": "created_at"}},
		{"payouts_one_amount", map[string]string{"fiat_amount": "'5'"}},
		{"payouts_status", with(arrived, map[string]string{"status": "'bogus'"})},
		{"payouts_reference", map[string]string{"reference": "''"}},
		{"payouts_reference", map[string]string{"reference": "'" + strings.Repeat("r", 65) + "'"}},
		{"payouts_deposit_arrived", map[string]string{"status": "'processing'"}},
		{"payouts_completed_at", with(arrived, map[string]string{"status": "'processing'", "completed_at": "created_at"})},
		{"payouts_failure_reason", with(arrived, map[string]string{"status": "'processing'", "failure_reason": "'name_mismatch'"})},
		{"payouts_return_reason", with(arrived, map[string]string{"status": "'completed'", "completed_at": "created_at",
			"return_reason": "'refused_by_beneficiary'"})},
		{"payouts_deposit_arrived", map[string]string{"status": "'expired'", "deposit_tx_hash": "'0xab'"}},
		{"payouts_handover_after_deposit", map[string]string{"handover_at": "created_at"}},
		{"payouts_handed_over_after_intent", map[string]string{"deposit_tx_hash": "'0xab'", "handed_over_at": "created_at"}},
		{"payouts_processing_handed_over", map[string]string{"status": "'processing'", "deposit_tx_hash": "'0xab'", "handover_at": "created_at"}},
		{"payouts_short_not_handed_over", with(arrived, map[string]string{"status": "'failed'", "failure_reason": "'deposit_short'",
			"handed_over_at": "NULL"})},
		{"payouts_return_code", map[string]string{"return_code": "'R02'"}},
		{"payouts_refund_address", map[string]string{"refund_address": "'0x12'"}},
		{"payouts_deposit_amount", map[string]string{"deposit_amount": "'ten'"}},
	}
	db := pgtest.Open(t, migrationSets...)
	ctx := context.Background()
	if _, err := store.NewStore(db, environment.Sandbox).Execute(ctx, storedPayout("bpo_good", "bpq_good", "Ada"), answerAny); err != nil {
		t.Fatal(err)
	}
	for _, role := range []string{"origin", "replica"} {
		for i, c := range cases {
			set := with(c.set, map[string]string{"id": fmt.Sprintf("'bpo_%s%d'", role, i), "quote_id": fmt.Sprintf("'bpq_%s%d'", role, i),
				"deposit_address": fmt.Sprintf("'%s'", addressOf(fmt.Sprint(role, i)))})
			values := make([]string, len(columns))
			for j, col := range columns {
				values[j] = cmp.Or(set[col], col)
			}
			stmt := "INSERT INTO payouts (" + strings.Join(columns, ", ") + ") SELECT " + strings.Join(values, ", ") +
				" FROM payouts WHERE id = 'bpo_good'"
			err := db.Tx(ctx, func(tx pgx.Tx) error {
				if _, err := tx.Exec(ctx, "SET LOCAL session_replication_role = "+role); err != nil {
					return err
				}
				_, err := tx.Exec(ctx, stmt)
				return err
			})
			switch {
			case c.rule == "" && err != nil:
				t.Errorf("%s: the good row copied: %v", role, err)
			case c.rule != "" && !database.Violates(err, c.rule):
				t.Errorf("%s: %v: %v, want %s to refuse it", role, c.set, err, c.rule)
			}
		}
	}
}

// Twenty executions of one quote at once, half for another beneficiary,
// through the service: one payout, answered to its own
// beneficiary only.
func TestTwentyConcurrentExecutionsWithMixedBeneficiaries(t *testing.T) {
	t.Parallel()
	db := pgtest.Open(t, migrationSets...)
	svc, _ := newTestServiceOn(t, db, time.Minute)
	id := quoteFor(t, svc, acme, QuoteRequest{CryptoCurrency: "USDC", Chain: 84532, FiatCurrency: "EUR", Country: "DE", CryptoAmount: strp("200")})
	payees := []ExecuteRequest{pay(id, "Ada Lovelace", goodIBAN), pay(id, "Charles Babbage", "DE12500105170648489890")}
	var wg sync.WaitGroup
	var mu sync.Mutex
	payouts := map[string]string{} // payout id → beneficiary
	for i := range 20 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			req := payees[i%2]
			p, err := svc.Execute(context.Background(), acme, req)
			mu.Lock()
			defer mu.Unlock()
			switch code(err) {
			case "":
				if prev, ok := payouts[p.PayoutID]; ok && prev != string(req.Beneficiary) {
					t.Errorf("payout %s answered to %s and %s", p.PayoutID, prev, req.Beneficiary)
				}
				payouts[p.PayoutID] = string(req.Beneficiary)
			case "quote_already_executed":
			default:
				t.Errorf("unexpected %v", err)
			}
		}()
	}
	wg.Wait()
	if len(payouts) != 1 {
		t.Fatalf("%d payouts for one quote: %v", len(payouts), payouts)
	}
	var n int
	if err := db.QueryRow(context.Background(), `SELECT count(*) FROM payouts`).Scan(&n); err != nil || n != 1 {
		t.Errorf("%d payout rows (%v)", n, err)
	}
}

// Redis holds only offers: an executed quote answers from the system of
// record when Redis has lost everything, and a lost offer that was never
// executed is unknown, never repriced.
func TestAnExecutedQuoteOutlivesRedis(t *testing.T) {
	t.Parallel()
	db := pgtest.Open(t, migrationSets...)
	rs := redistest.Start(t)
	rdb := redis.NewClient(&redis.Options{Addr: rs.Addr})
	defer rdb.Close()
	svc := NewService(keyed(Config{Env: environment.Sandbox, TTL: time.Minute, Book: quote.NewBook(rdb, []byte("test-secret-0123456789"), time.Now),
		Payouts: store.NewStore(db, environment.Sandbox), Now: time.Now, Secret: []byte("s")}))
	ctx := context.Background()
	req := QuoteRequest{CryptoCurrency: "USDC", Chain: 84532, FiatCurrency: "EUR", Country: "DE", CryptoAmount: strp("70")}
	executed := quoteFor(t, svc, acme, req)
	unexecuted := quoteFor(t, svc, acme, QuoteRequest{CryptoCurrency: "USDC", Chain: 84532, FiatCurrency: "EUR", Country: "DE", CryptoAmount: strp("71")})
	ada := pay(executed, "Ada", goodIBAN)
	first, err := svc.Execute(ctx, acme, ada)
	if err != nil {
		t.Fatal(err)
	}
	if err := rdb.FlushAll(ctx).Err(); err != nil {
		t.Fatal(err)
	}
	if p, err := svc.Execute(ctx, acme, ada); err != nil || !reflect.DeepEqual(p, first) {
		t.Errorf("the same beneficiary after Redis lost everything: %+v %v, want %+v", p, err, first)
	}
	if _, err := svc.Execute(ctx, acme, pay(executed, "Eve", "DE12500105170648489890")); code(err) != "quote_already_executed" {
		t.Errorf("another beneficiary after Redis lost everything: %v", err)
	}
	other := acme
	other.KeyID = "globex"
	if _, err := svc.Execute(ctx, other, ada); code(err) != "quote_not_found" {
		t.Errorf("another key: %v", err)
	}
	if _, err := svc.Execute(ctx, acme, pay(unexecuted, "Ada", goodIBAN)); code(err) != "quote_not_found" {
		t.Errorf("an unexecuted quote whose offer was lost: %v, want quote_not_found (quote again)", err)
	}
	if again := quoteFor(t, svc, acme, req); again == executed {
		t.Error("the executed quote's id came back after Redis lost its offer")
	}
}
