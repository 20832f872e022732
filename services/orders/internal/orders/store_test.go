package orders

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/partnerpay/api/pkg/database"
	"github.com/partnerpay/api/pkg/environment"
	"github.com/partnerpay/api/pkg/events"
	"github.com/partnerpay/api/testkit/pgtest"
)

// No answer rests on a row the standby lacks (DESIGN §6): an order's read,
// which its status and its hosted page answer from, waits until the
// synchronous standby has what it read.
func TestAnOrderReadAnswersOnlyWhatTheStandbyHas(t *testing.T) {
	t.Parallel()
	r := pgtest.StartReplicated(t)
	s := NewStore(pgtest.OpenURL(t, r.URL(), Feed.Migrations(), Migrations), environment.Sandbox)
	at := time.Now().UTC()
	if err := s.Create(context.Background(), Record{ID: "ord_1", Owner: "acme", Direction: "buy", Status: StatusAwaitingPayment,
		CryptoCurrency: "USDC", Chain: 84532, FiatCurrency: "EUR", Country: "DE", FiatAmount: "100", WalletAddress: wallet,
		ExpiresAt: at.Add(OrderTTL), CreatedAt: at}, Order{}); err != nil {
		t.Fatal(err)
	}
	r.ReadsOnlyWhatTheStandbyHas(t, `UPDATE orders SET status = 'processing', payment_method = 'card' WHERE id = 'ord_1'`,
		func(ctx context.Context) error {
			got, err := s.Get(ctx, "ord_1")
			if err == nil && got.Status != StatusProcessing {
				err = fmt.Errorf("order status %q, want %q", got.Status, StatusProcessing)
			}
			return err
		})
}

// The schema holds an order's rules itself: its terms
// never change, its status moves only forward, and completed, failed and
// expired are final.
func TestTheSchemaHoldsTheOrderRules(t *testing.T) {
	t.Parallel()
	db := pgtest.Open(t, Feed.Migrations(), Migrations)
	ctx := context.Background()
	s := NewStore(db, environment.Sandbox)
	at := time.Date(2026, 11, 22, 5, 0, 0, 0, time.UTC)
	r := Record{ID: "ord_1", Owner: "acme", Direction: "buy", Status: StatusAwaitingPayment, CryptoCurrency: "USDC", Chain: 84532,
		FiatCurrency: "EUR", Country: "DE", FiatAmount: "100", WalletAddress: wallet, ExpiresAt: at.Add(OrderTTL), CreatedAt: at}
	if err := s.Create(ctx, r, Order{}); err != nil {
		t.Fatal(err)
	}
	if err := s.Create(ctx, r, Order{}); err != nil {
		t.Fatalf("a retry of the same order: %v", err)
	}
	got, err := s.Get(ctx, "ord_1")
	if err != nil || got.Owner != "acme" || got.FiatAmount != "100" || got.CryptoAmount != "" || !got.ExpiresAt.Equal(r.ExpiresAt) {
		t.Fatalf("read back %+v %v", got, err)
	}
	for _, stmt := range []string{
		`UPDATE orders SET fiat_amount = '1' WHERE id = 'ord_1'`,
		`UPDATE orders SET wallet_address = '0x0000000000000000000000000000000000000000' WHERE id = 'ord_1'`,
		`UPDATE orders SET status = 'completed' WHERE id = 'ord_1'`, // a buy completes with its hash
		`UPDATE orders SET status = 'awaiting_deposit' WHERE id = 'ord_1'`,
		`UPDATE orders SET status = 'failed' WHERE id = 'ord_1'`, // failed says why
	} {
		if _, err := db.Exec(ctx, stmt); !database.IsRuleViolation(err) {
			t.Errorf("%s: %v, want the schema to refuse it", stmt, err)
		}
	}
	if _, err := db.Exec(ctx, `UPDATE orders SET status = 'processing', payment_method = 'card' WHERE id = 'ord_1'`); err != nil {
		t.Fatal(err)
	}
	for _, stmt := range []string{
		`UPDATE orders SET status = 'awaiting_payment' WHERE id = 'ord_1'`,
		`UPDATE orders SET status = 'expired' WHERE id = 'ord_1'`, // a paid order does not expire
	} {
		if _, err := db.Exec(ctx, stmt); !database.IsRuleViolation(err) {
			t.Errorf("%s: %v, want the schema to refuse it", stmt, err)
		}
	}
	if _, err := db.Exec(ctx, `UPDATE orders SET status = 'completed', tx_hash = '0xab' WHERE id = 'ord_1'`); err != nil {
		t.Fatal(err)
	}
	for _, stmt := range []string{
		`UPDATE orders SET status = 'failed', failure_reason = 'card_declined' WHERE id = 'ord_1'`,
		`UPDATE orders SET tx_hash = '0xcd' WHERE id = 'ord_1'`,
	} {
		if _, err := db.Exec(ctx, stmt); !database.IsRuleViolation(err) {
			t.Errorf("%s on a completed order: %v, want the schema to refuse it", stmt, err)
		}
	}
	sell := r
	sell.ID, sell.Direction, sell.Status, sell.DepositAddress = "ord_2", "sell", StatusAwaitingDeposit, wallet
	if err := s.Create(ctx, sell, Order{}); err != nil {
		t.Fatal(err)
	}
	if got, err := s.Advance(ctx, "ord_2", Progress{Status: StatusExpired}, sell.ExpiresAt); err != nil || got.Status != StatusExpired {
		t.Errorf("at its expiry: %+v %v, want expired", got, err)
	}
	if _, err := db.Exec(ctx, `UPDATE orders SET status = 'processing' WHERE id = 'ord_2'`); !database.IsRuleViolation(err) {
		t.Errorf("an expired order moved on: %v", err)
	}
	if _, err := s.Get(ctx, "ord_unknown"); !errors.Is(err, ErrNotFound) {
		t.Errorf("unknown order: %v", err)
	}
}

// Links: minting one supersedes the order's earlier ones,
// each is redeemed once while current, and the schema refuses a link that
// changes, a second use, or a superseded link made current again.
func TestTheSchemaHoldsTheLinkRules(t *testing.T) {
	t.Parallel()
	db := pgtest.Open(t, Feed.Migrations(), Migrations)
	ctx := context.Background()
	s := NewStore(db, environment.Sandbox)
	at := time.Date(2026, 11, 22, 5, 0, 0, 0, time.UTC)
	r := Record{ID: "ord_1", Owner: "acme", Direction: "buy", Status: StatusAwaitingPayment, CryptoCurrency: "USDC", Chain: 84532,
		FiatCurrency: "EUR", Country: "DE", FiatAmount: "100", WalletAddress: wallet, ProviderID: "co_1", ExpiresAt: at.Add(OrderTTL), CreatedAt: at}
	if err := s.Create(ctx, r, Order{}); err != nil {
		t.Fatal(err)
	}
	if got, _ := s.Get(ctx, "ord_1"); got.ProviderID != "co_1" {
		t.Errorf("provider id read back: %q", got.ProviderID)
	}
	for _, l := range []LinkRecord{{ID: "ol_1", OrderID: "ord_1", ProviderSessionID: "cps_1", ReturnURL: "https://p.example/", CreatedAt: at},
		{ID: "ol_2", OrderID: "ord_1", ProviderSessionID: "cps_2", CreatedAt: at}} {
		if err := s.Mint(ctx, l); err != nil {
			t.Fatal(err)
		}
	}
	if l, err := s.Link(ctx, "ol_1"); err != nil || l.Current || l.ReturnURL != "https://p.example/" {
		t.Errorf("the first link after a second: %+v %v", l, err)
	}
	if err := s.Redeem(ctx, "ol_1", at); !errors.Is(err, ErrSuperseded) {
		t.Errorf("redeem a superseded link: %v", err)
	}
	if err := s.Redeem(ctx, "ol_2", at); err != nil {
		t.Fatal(err)
	}
	if err := s.Redeem(ctx, "ol_2", at); !errors.Is(err, ErrUsed) {
		t.Errorf("redeem twice: %v", err)
	}
	for _, stmt := range []string{
		`UPDATE order_links SET used_at = NULL WHERE id = 'ol_2'`,
		`UPDATE order_links SET provider_session_id = 'cps_9' WHERE id = 'ol_1'`,
		`UPDATE order_links SET is_current = true WHERE id = 'ol_1'`,
		`UPDATE orders SET provider_order_id = 'co_2' WHERE id = 'ord_1'`,
	} {
		if _, err := db.Exec(ctx, stmt); !database.IsRuleViolation(err) {
			t.Errorf("%s: %v, want the schema to refuse it", stmt, err)
		}
	}
	got, err := s.Advance(ctx, "ord_1", Progress{Status: StatusProcessing, PaymentMethod: "card"}, at)
	if err != nil || got.Status != StatusProcessing || got.PaymentMethod != "card" {
		t.Fatalf("advance: %+v %v", got, err)
	}
	if got, err := s.Advance(ctx, "ord_1", Progress{Status: StatusExpired}, at); err != nil || got.Status != StatusProcessing {
		t.Errorf("a paid order expired: %+v %v", got, err)
	}
	if got, err := s.Advance(ctx, "ord_1", Progress{Status: StatusCompleted, TxHash: "0xab"}, at); err != nil || got.Status != StatusCompleted || got.PaymentMethod != "card" {
		t.Errorf("completed: %+v %v", got, err)
	}
}

// Every status change of an order writes its event, once, with the order
// as its status call answers it; a retried creation and a move that
// changes no status write none.
func TestEveryOrderChangeWritesItsEvent(t *testing.T) {
	t.Parallel()
	db := pgtest.Open(t, Feed.Migrations(), Migrations)
	ctx := context.Background()
	s := NewStore(db, environment.Sandbox)
	at := time.Date(2026, 11, 22, 5, 0, 0, 0, time.UTC)
	r := Record{ID: "ord_2", Owner: "acme", Direction: "buy", Status: StatusAwaitingPayment, CryptoCurrency: "USDC", Chain: 84532,
		FiatCurrency: "EUR", Country: "DE", FiatAmount: "100", WalletAddress: wallet, ExpiresAt: at.Add(OrderTTL), CreatedAt: at}
	for range 2 {
		if err := s.Create(ctx, r, Order{}); err != nil {
			t.Fatal(err)
		}
	}
	for _, p := range []Progress{{Status: StatusProcessing, PaymentMethod: "card"}, {Status: StatusProcessing}, {Status: StatusCompleted, TxHash: "0x" + strings.Repeat("a", 64)}} {
		if _, err := s.Advance(ctx, r.ID, p, at.Add(time.Minute)); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := Feed.Sequence(ctx, db); err != nil {
		t.Fatal(err)
	}
	page, err := Feed.Read(ctx, db, "acme", events.Query{Limit: 10})
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, e := range page.Events {
		got = append(got, e.Type)
	}
	if strings.Join(got, " ") != "order.awaiting_payment order.processing order.completed" {
		t.Fatalf("events: %v", got)
	}
	want := `{"object":{"environment":"sandbox","orderId":"ord_2","direction":"buy","status":"completed","paymentMethod":"card",` +
		`"cryptoAmount":"1234567.89","fiatAmount":"1234567.89","txHash":"0x` + strings.Repeat("a", 64) + `"},"previousStatus":"processing"}`
	if string(page.Events[2].Data) != want {
		t.Errorf("the completion's data:\n got %s\nwant %s", page.Events[2].Data, want)
	}
}
