package orders

import (
	"context"
	"net/url"
	"strconv"
	"testing"
	"time"

	"github.com/partnerpay/api/pkg/idempotency"
	"github.com/partnerpay/api/testkit/pgtest"
)

// Orders carry the partner's reference and are listed, newest first, by
// key, filtered by status and reference, paged by cursor; another key's
// never appear.
func TestOrdersAreListedWithTheirReference(t *testing.T) {
	t.Parallel()
	db := pgtest.Open(t, idempotency.Migrations, Feed.Migrations(), Migrations)
	f := newFixtureOn(db)
	ctx := context.Background()
	var made []string
	for i := range 5 {
		req := CreateRequest{Direction: "buy", CryptoCurrency: "USDC", Chain: 84532, FiatCurrency: "EUR", Country: "DE",
			FiatAmount: ptr(strconv.Itoa(100 + i)), WalletAddress: wallet, Reference: ptr("cart-" + strconv.Itoa(i%2))}
		o, err := f.svc.Create(ctx, card, req)
		if err != nil {
			t.Fatal(err)
		}
		if o.Reference != "cart-"+strconv.Itoa(i%2) {
			t.Fatalf("the answer does not echo the reference: %+v", o)
		}
		made = append(made, o.OrderID)
		f.clock.t = f.clock.t.Add(time.Second)
	}
	if st, err := f.svc.Status(ctx, card, StatusRequest{OrderID: made[0]}); err != nil || st.Reference != "cart-0" {
		t.Fatalf("the status does not echo the reference: %+v %v", st, err)
	}
	list := func(caller string, query string) OrderList {
		c := card
		c.KeyID = caller
		q, _ := url.ParseQuery(query)
		page, err := f.svc.List(ctx, c, q)
		if err != nil {
			t.Fatalf("%s: %v", query, err)
		}
		return page
	}
	first := list(card.KeyID, "limit=3")
	second := list(card.KeyID, "limit=3&startingAfter="+url.QueryEscape(first.NextCursor))
	var got []string
	for _, o := range append(first.Data, second.Data...) {
		got = append(got, o.OrderID)
	}
	if !first.HasMore || second.HasMore || len(got) != 5 {
		t.Fatalf("pages %+v then %+v", first, second)
	}
	for i := range made {
		if got[i] != made[len(made)-1-i] {
			t.Fatalf("not newest first: %v, made %v", got, made)
		}
	}
	if page := list(card.KeyID, "reference=cart-1"); len(page.Data) != 2 {
		t.Errorf("reference cart-1: %d orders", len(page.Data))
	}
	if page := list(card.KeyID, "status=completed"); len(page.Data) != 0 {
		t.Errorf("status completed: %d orders", len(page.Data))
	}
	if page := list("globex", ""); len(page.Data) != 0 {
		t.Errorf("another key sees %d orders", len(page.Data))
	}
	if _, err := f.svc.Create(ctx, card, CreateRequest{Direction: "buy", CryptoCurrency: "USDC", Chain: 84532, FiatCurrency: "EUR",
		Country: "DE", FiatAmount: ptr("100"), WalletAddress: wallet, Reference: ptr("")}); code(err) != "invalid_request" {
		t.Errorf("an empty reference: %v", err)
	}
	if _, err := db.Exec(ctx, `UPDATE orders SET reference = 'other'`); err == nil {
		t.Error("an order's reference was changed")
	}
}
