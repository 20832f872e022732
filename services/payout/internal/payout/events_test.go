package payout

import (
	"context"
	"encoding/json"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/partnerpay/api/pkg/bankprovider"
	"github.com/partnerpay/api/pkg/events"
	"github.com/partnerpay/api/services/payout/internal/store"
	"github.com/partnerpay/api/testkit/pgtest"
)

// feed places what was written and reads the key's whole feed.
func (f statusFixture) feed(t *testing.T, key string) []events.Stored {
	t.Helper()
	ctx := context.Background()
	for {
		n, err := store.Feed.Sequence(ctx, f.db)
		if err != nil {
			t.Fatal(err)
		}
		if n == 0 {
			break
		}
	}
	p, err := store.Feed.Read(ctx, f.db, key, events.Query{Limit: 100})
	if err != nil {
		t.Fatal(err)
	}
	return p.Events
}

// Every status change of a payout and of its refunds writes its event, in
// order, with the payout as its status call answers it and the status
// before; another key's feed has none of them.
func TestEveryChangeWritesItsEvent(t *testing.T) {
	t.Parallel()
	f := newStatusFixture(t, pgtest.Open(t, migrationSets...))
	ctx := context.Background()
	p := f.payout(t, "77")
	if _, err := f.deposit(ctx, acme, DepositRequest{PayoutID: p.PayoutID, Outcome: strp("returned"), Reason: strp("account_closed")}); err != nil {
		t.Fatal(err)
	}
	f.provider.says(p.PayoutID, bankprovider.Payout{Status: "returned", ReturnReason: "account_closed", CompletedAt: "2026-11-26T12:00:03Z"})
	f.later(t, time.Second)
	if _, err := f.svc.SetRefundAddress(ctx, acme, RefundAddressRequest{PayoutID: p.PayoutID, Address: "0x5aAeb6053F3E94C9b9A09f33669435E7Ef1BeAed"}); err != nil {
		t.Fatal(err)
	}
	f.later(t, 4*time.Second)

	type seen struct{ typ, previous, status string }
	var got []seen
	for _, e := range f.feed(t, acme.KeyID) {
		var d struct {
			Object struct {
				Environment string `json:"environment"`
				PayoutID    string `json:"payoutId"`
				Status      string `json:"status"`
			} `json:"object"`
			PreviousStatus string `json:"previousStatus"`
			RefundID       string `json:"refundId"`
		}
		if err := json.Unmarshal(e.Data, &d); err != nil || d.Object.PayoutID != p.PayoutID || d.Object.Environment != "sandbox" {
			t.Fatalf("%s: %s %v", e.Type, e.Data, err)
		}
		// A refund's event names its refund; no other event has one.
		isRefund := strings.HasPrefix(e.Type, "payout.refund.")
		if isRefund != strings.HasPrefix(d.RefundID, "rf_") || (isRefund && !strings.Contains(string(e.Data), `"refundId":"`+d.RefundID+`"`)) {
			t.Errorf("%s: refundId %q", e.Type, d.RefundID)
		}
		got = append(got, seen{e.Type, d.PreviousStatus, d.Object.Status})
	}
	want := []seen{
		{"payout.awaiting_deposit", "", "awaiting_deposit"},
		{"payout.processing", "awaiting_deposit", "processing"},
		{"payout.completed", "processing", "returned"},
		{"payout.returned", "completed", "returned"},
		{"payout.refund.awaiting_address", "", "returned"},
		{"payout.refund.pending", "awaiting_address", "returned"},
		{"payout.refund.sent", "pending", "returned"},
		{"payout.refund.confirmed", "sent", "returned"},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("events:\n got %v\nwant %v", got, want)
	}
	if other := f.feed(t, "globex"); len(other) != 0 {
		t.Errorf("globex's feed: %v", other)
	}

	// The last event's object is the payout as its status call answers it.
	all := f.feed(t, acme.KeyID)
	st := f.status(t, p.PayoutID)
	body, _ := json.Marshal(st)
	want2 := `{"object":{"environment":"sandbox",` + string(body[1:]) + `,"previousStatus":"sent","refundId":"` + st.Refunds[0].RefundID + `"}`
	if last := all[len(all)-1]; string(last.Data) != want2 {
		t.Errorf("the last event's data:\n got %s\nwant %s", last.Data, want2)
	}
	// The first one's createdAt is the database's, as the status call's.
	var first struct {
		Object struct {
			CreatedAt string `json:"createdAt"`
		} `json:"object"`
	}
	if err := json.Unmarshal(all[0].Data, &first); err != nil || first.Object.CreatedAt != st.CreatedAt {
		t.Errorf("the first event's createdAt %q, the payout's %q", first.Object.CreatedAt, st.CreatedAt)
	}
}
