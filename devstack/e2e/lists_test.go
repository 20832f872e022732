package e2e

import (
	"context"
	"fmt"
	"net/url"
	"strings"
	"testing"

	partnerapi "github.com/partnerpay/api/clients/go"
)

// A partner that lost its ids finds its payouts again: the generated
// client's iterator pages through GET /v1/bank/payouts on its own, newest
// first, filtered by the partner's reference; another key sees none of
// them, and a cursor edited or carried to another key is refused.
func TestPayoutsAreListedThroughTheClientsIterator(t *testing.T) {
	s := startStack(t)
	key := s.issue("acme", "--products", "bank", "--source-chains", "84532", "--rate", "1000", "--max-execution-usd", "1000000")
	c := newClient(t, s, key)
	ctx := context.Background()
	var made []string
	for i := range 7 {
		rc := railCases()[0]
		rc.quote.FiatAmount = ptr(fmt.Sprintf("%d", 300+i))
		made = append(made, payoutTo(t, c, rc, fmt.Sprintf("order-%d", i%2)).PayoutId)
	}
	var listed []string
	for p, err := range c.AllBankPayouts(ctx, &partnerapi.ListBankPayoutsParams{Limit: ptr(2)}) {
		if err != nil {
			t.Fatal(err)
		}
		if len(p.History) == 0 || p.Beneficiary.Account != "3000" {
			t.Errorf("an element is not the status object: %+v", p)
		}
		listed = append(listed, p.PayoutId)
	}
	if len(listed) != len(made) {
		t.Fatalf("listed %v, made %v", listed, made)
	}
	for i := range made {
		if listed[i] != made[len(made)-1-i] {
			t.Fatalf("not newest first: listed %v, made %v", listed, made)
		}
	}
	n := 0
	for p, err := range c.AllBankPayouts(ctx, &partnerapi.ListBankPayoutsParams{Reference: ptr("order-1")}) {
		if err != nil || p.Reference == nil || *p.Reference != "order-1" {
			t.Fatalf("%+v %v", p, err)
		}
		n++
	}
	if n != 3 {
		t.Errorf("%d payouts with reference order-1, want 3", n)
	}
	// A reference, and a list's query string, are never logged (DESIGN §8).
	if logs := s.logs.String(); strings.Contains(logs, "order-1") || strings.Contains(logs, "reference=") {
		t.Error("a partner's reference reached a log line")
	}
	globex := s.issue("globex", "--products", "bank", "--source-chains", "84532", "--rate", "1000")
	other := newClient(t, s, globex)
	page, err := other.ListBankPayoutsWithResponse(ctx, nil)
	if err != nil || page.JSON200 == nil || len(page.JSON200.Data) != 0 || page.JSON200.HasMore {
		t.Fatalf("another key's list: %v %s", err, page.Body)
	}
	first, _ := c.ListBankPayoutsWithResponse(ctx, &partnerapi.ListBankPayoutsParams{Limit: ptr(2)})
	cursor := *first.JSON200.NextCursor
	edited := []byte(cursor)
	if edited[5] == 'A' {
		edited[5] = 'B'
	} else {
		edited[5] = 'A'
	}
	const badCursor = "startingAfter is not a cursor of this list, for this key and these filters: pass nextCursor from the page before, as it was, with the same status, reference, createdFrom and createdTo."
	for _, tt := range []struct {
		name, key, query, msg string
	}{
		{"another key's cursor", globex, "startingAfter=" + url.QueryEscape(cursor), badCursor},
		{"an edited cursor", key, "startingAfter=" + url.QueryEscape(string(edited)), badCursor},
		{"a cursor under another reference", key, "reference=other&startingAfter=" + url.QueryEscape(cursor), badCursor},
		{"a cursor under another status", key, "status=completed&startingAfter=" + url.QueryEscape(cursor), badCursor},
		{"a limit over 100", key, "limit=101", "limit must be a whole number from 1 to 100."},
		{"an offset", key, "offset=20", `Unknown query parameter "offset"; a list takes limit, startingAfter, status, reference, createdFrom and createdTo.`},
	} {
		r := s.get("/v1/bank/payouts?"+tt.query, tt.key)
		if r.Status != 400 || r.Body != errorBody("invalid_request", tt.msg) {
			t.Errorf("%s: %d %s", tt.name, r.Status, r.Body)
		}
	}
	if r := s.get("/v1/bank/payouts", s.issue("fiat-only", "--products", "fiat", "--rate", "1000")); r.Status != 403 {
		t.Errorf("without the bank product: %d %s", r.Status, r.Body)
	}
}

// Card orders carry the partner's reference and are listed through the
// client's iterator too.
func TestOrdersAreListedThroughTheClientsIterator(t *testing.T) {
	s := startStack(t)
	key := s.issue("acme", "--products", "card", "--source-chains", "84532", "--destination-chains", "84532", "--rate", "1000", "--max-execution-usd", "100000")
	c := newClient(t, s, key)
	ctx := context.Background()
	var made []string
	for i := range 3 {
		body := partnerapi.CreateOrderJSONRequestBody{Direction: partnerapi.CreateOrderRequestDirectionBuy, CryptoCurrency: "USDC", Chain: 84532,
			FiatCurrency: "EUR", Country: "DE", WalletAddress: orderWallet, FiatAmount: ptr(fmt.Sprintf("%d", 100+i)), Reference: ptr(fmt.Sprintf("cart-%d", i%2))}
		r, err := c.CreateOrderWithResponse(ctx, nil, body)
		if err != nil || r.JSON200 == nil || r.JSON200.Reference == nil || *r.JSON200.Reference != fmt.Sprintf("cart-%d", i%2) {
			t.Fatalf("create order: %v %s", err, r.Body)
		}
		made = append(made, r.JSON200.OrderId)
	}
	var listed []string
	for o, err := range c.AllOrders(ctx, &partnerapi.ListOrdersParams{Limit: ptr(2)}) {
		if err != nil {
			t.Fatal(err)
		}
		listed = append(listed, o.OrderId)
	}
	if len(listed) != 3 || listed[0] != made[2] || listed[2] != made[0] {
		t.Fatalf("listed %v, made %v", listed, made)
	}
	n := 0
	for o, err := range c.AllOrders(ctx, &partnerapi.ListOrdersParams{Reference: ptr("cart-0")}) {
		if err != nil || o.Reference == nil || *o.Reference != "cart-0" {
			t.Fatalf("%+v %v", o, err)
		}
		n++
	}
	if n != 2 {
		t.Errorf("%d orders with reference cart-0, want 2", n)
	}
}
