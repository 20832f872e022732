package e2e

import (
	"encoding/json"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"
)

// Not parallel: see the package comment (one stack at a time).
//
// Following along without webhooks (DESIGN §9): through the gateway, one
// feed over the four services.

type feedEvent struct {
	ID        string `json:"id"`
	Type      string `json:"type"`
	CreatedAt string `json:"createdAt"`
	Data      struct {
		Object         map[string]any `json:"object"`
		PreviousStatus string         `json:"previousStatus"`
	} `json:"data"`
}

type feedPage struct {
	Environment string      `json:"environment"`
	Data        []feedEvent `json:"data"`
	HasMore     bool        `json:"hasMore"`
	NextCursor  string      `json:"nextCursor"`
}

// events reads one page of the feed after cursor, with query's filters.
func (s *stack) events(key, cursor, query string) feedPage {
	s.t.Helper()
	q, _ := url.ParseQuery(query)
	if cursor != "" {
		q.Set("startingAfter", cursor)
	}
	r := s.get("/v1/events?"+q.Encode(), key)
	var p feedPage
	if r.Status != 200 || json.Unmarshal([]byte(r.Body), &p) != nil || p.NextCursor == "" || fieldOrder(s.t, r.Body)[0] != "environment" {
		s.t.Fatalf("GET /v1/events: %d %s", r.Status, r.Body)
	}
	return p
}

// follower follows a key's feed from its start, keeping every event.
type follower struct {
	s        *stack
	key, q   string
	cursor   string
	mu       sync.Mutex
	seen     []feedEvent
	ofObject map[string][]string // object id → its event types, in order
}

func (s *stack) follow(key, query string) *follower {
	return &follower{s: s, key: key, q: query, ofObject: map[string][]string{}}
}

// poll reads the feed until it has no more.
func (f *follower) poll() {
	for {
		p := f.s.events(f.key, f.cursor, f.q)
		f.mu.Lock()
		for _, e := range p.Data {
			f.seen = append(f.seen, e)
			id := objectID(e)
			f.ofObject[id] = append(f.ofObject[id], e.Type)
		}
		f.mu.Unlock()
		f.cursor = p.NextCursor
		// An empty page that has more is a service behind (down, or its
		// standby stalled): its events come later, so come back later.
		if !p.HasMore || len(p.Data) == 0 {
			return
		}
	}
}

func objectID(e feedEvent) string {
	for _, k := range []string{"payoutId", "orderId", "virtualAccountId", "depositId", "accountId", "consentSessionId"} {
		if v, ok := e.Data.Object[k].(string); ok {
			return v
		}
	}
	return ""
}

func (f *follower) types(id string) string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return strings.Join(f.ofObject[id], " ")
}

// A payout's events arrive in order with its object and previous status;
// another key sees none; a tampered cursor, or another key's, is refused;
// a follower polling while six writers create and settle payouts sees every
// payout's whole life, none twice; and a service down delays only its own
// events.
func TestFollowEverythingWithOneCall(t *testing.T) {
	// Not parallel: a stack of its own, timed against bounds (package e2e).
	s := startStack(t)
	acme := s.issue("acme", "--products", "bank,card,fiat", "--source-chains", "84532", "--rate", "1000")
	globex := s.issue("globex", "--products", "bank", "--source-chains", "84532", "--rate", "1000")

	// One payout, followed.
	f := s.follow(acme, "")
	id := s.newPayout(acme, "10", "")
	if r := s.post("/v1/sandbox/payouts/deposit", acme, `{"payoutId":"`+id+`"}`); r.Status != 200 {
		t.Fatalf("deposit: %d %s", r.Status, r.Body)
	}
	want := "payout.awaiting_deposit payout.processing payout.completed"
	s.waitForWithin(10*time.Second, func() bool { f.poll(); return f.types(id) == want })
	var previous []string
	for _, e := range f.seen {
		if e.Data.Object["payoutId"] != id || e.Data.Object["environment"] != "sandbox" || !strings.HasPrefix(e.ID, "evt_") {
			t.Errorf("an event of the payout: %+v", e)
		}
		previous = append(previous, e.Data.PreviousStatus)
	}
	if strings.Join(previous, ",") != ",awaiting_deposit,processing" {
		t.Errorf("previousStatus: %v", previous)
	}
	if last := f.seen[len(f.seen)-1]; last.Data.Object["status"] != "completed" {
		t.Errorf("the completion's object: %v", last.Data.Object)
	}
	if p := s.events(globex, "", ""); len(p.Data) != 0 || p.HasMore {
		t.Errorf("globex sees %d events", len(p.Data))
	}
	// With nothing new, nextCursor is the cursor given.
	if p := s.events(acme, f.cursor, ""); len(p.Data) != 0 || p.NextCursor != f.cursor {
		t.Errorf("an idle page: %+v", p)
	}

	// Cursors and filters.
	notOurs := errorBody("invalid_request", "startingAfter is not a cursor of this feed, for this key and these filters: pass nextCursor from the page before, as it was, with the same type and objectId.")
	tampered := []byte(f.cursor)
	tampered[2] ^= 1
	for name, tt := range map[string]struct{ key, query string }{
		"tampered":      {acme, "startingAfter=" + url.QueryEscape(string(tampered))},
		"another key's": {globex, "startingAfter=" + url.QueryEscape(f.cursor)},
		"other filters": {acme, "type=payout.*&startingAfter=" + url.QueryEscape(f.cursor)},
	} {
		if r := s.get("/v1/events?"+tt.query, tt.key); r.Status != 400 || r.Body != notOurs {
			t.Errorf("%s cursor: %d %s", name, r.Status, r.Body)
		}
	}
	for query, message := range map[string]string{
		"type=payout.bogus": "type must be an event type (GET /v1/statuses lists them, as eventTypes), or a kind followed by .*, such as payout.*.",
		"objectId=bpo_1":    "objectId must be the id of a payout, order, account, virtual account, deposit or consent session.",
		"limit=0":           "limit must be a whole number from 1 to 100.",
		"offset=3":          `Unknown query parameter "offset"; the events feed takes limit, startingAfter, type and objectId.`,
	} {
		if r := s.get("/v1/events?"+query, acme); r.Status != 400 || r.Body != errorBody("invalid_request", message) {
			t.Errorf("%s: %d %s", query, r.Status, r.Body)
		}
	}
	if p := s.events(acme, "", "objectId="+id+"&type=payout.processing"); len(p.Data) != 1 || p.Data[0].Type != "payout.processing" {
		t.Errorf("one object's processing: %+v", p.Data)
	}

	// Six writers, one follower polling all along.
	all := s.follow(acme, "type=payout.*")
	stop := make(chan struct{})
	var polled sync.WaitGroup
	polled.Go(func() {
		for {
			select {
			case <-stop:
				return
			default:
				all.poll()
			}
		}
	})
	var wg sync.WaitGroup
	var mu sync.Mutex
	var made []string
	for range 6 {
		wg.Go(func() {
			for range 5 {
				p := s.newPayout(acme, "11", "")
				if r := s.post("/v1/sandbox/payouts/deposit", acme, `{"payoutId":"`+p+`"}`); r.Status != 200 {
					t.Errorf("deposit: %d %s", r.Status, r.Body)
				}
				mu.Lock()
				made = append(made, p)
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	s.waitForWithin(20*time.Second, func() bool {
		for _, p := range made {
			if all.types(p) != want {
				return false
			}
		}
		return true
	})
	close(stop)
	polled.Wait()
	all.poll()
	ids := map[string]bool{}
	for _, e := range all.seen {
		if ids[e.ID] {
			t.Errorf("event %s seen twice", e.ID)
		}
		ids[e.ID] = true
	}
	for _, p := range append(made, id) {
		if got := all.types(p); got != want {
			t.Errorf("payout %s: %s, want %s", p, got, want)
		}
	}

	// The on-ramp's records: an account through its consent to active, its
	// consent session, its virtual account and the virtual account's
	// funding once a pay-in lands.
	onramp := s.follow(acme, "")
	onramp.cursor = f.cursor
	accountID, vaID := s.activeAccount(acme, "ada@example.com")
	if r := s.post("/v1/sandbox/payin", acme, `{"virtualAccountId":"`+vaID+`","amount":"100.50","currency":"EUR"}`); r.Status != 200 {
		t.Fatalf("pay-in: %d %s", r.Status, r.Body)
	}
	s.waitForWithin(15*time.Second, func() bool {
		onramp.poll()
		return strings.HasSuffix(onramp.types(accountID), "fiat_account.active") &&
			onramp.types(vaID) == "virtual_account.active virtual_account.funding.awaiting_deposit virtual_account.funding.funded"
	})
	if got := onramp.types(accountID); !strings.HasPrefix(got, "fiat_account.consent_required ") {
		t.Errorf("the account's events: %s", got)
	}
	var consent string
	for id, types := range onramp.ofObject {
		if strings.HasPrefix(id, "cs_") {
			consent = strings.Join(types, " ")
		}
	}
	if consent != "consent.pending consent.returned" {
		t.Errorf("the consent session's events: %q", consent)
	}

	// The fiat service down: the payout events keep flowing, and the
	// card orders' too; fiat's come once it is back.
	fiat := s.Services["fiat"]
	fiat.Stop()
	order := decodeOK(t, s.post("/v1/orders", acme, `{"direction":"buy","cryptoCurrency":"USDC","chain":84532,"fiatCurrency":"EUR","country":"DE","fiatAmount":"100","walletAddress":"`+orderWallet+`"}`))["orderId"].(string)
	late := s.follow(acme, "")
	late.cursor = f.cursor
	s.waitForWithin(10*time.Second, func() bool { late.poll(); return late.types(order) == "order.awaiting_payment" })
	if err := fiat.Start(); err != nil {
		t.Fatal(err)
	}
}
