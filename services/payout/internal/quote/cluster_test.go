package quote

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/partnerpay/api/testkit/redistest"
)

// The book's scripts run on a real 3-master Redis Cluster: every key of a
// quote shares its hash tag, so each script stays in one slot.
func TestTheBookOnARedisCluster(t *testing.T) {
	t.Parallel()
	c := redistest.StartCluster(t)
	opts, err := redis.ParseClusterURL(c.URL())
	if err != nil {
		t.Fatal(err)
	}
	rdb := redis.NewClusterClient(opts)
	defer rdb.Close()
	b := NewBook(rdb, []byte("quote-secret-0123456789"), time.Now)
	ctx := context.Background()
	ids := map[string]bool{}
	for i := range 50 { // enough requests to land on every master
		o, err := b.Open(ctx, payout, "acme", 84532, "req-"+string(rune('a'+i%26))+string(rune('a'+i/26)), time.Minute, record)
		if err != nil {
			t.Fatalf("open on a cluster: %v", err)
		}
		again, err := b.Open(ctx, payout, "acme", 84532, "req-"+string(rune('a'+i%26))+string(rune('a'+i/26)), time.Minute, record)
		if err != nil || again.ID == o.ID {
			t.Fatalf("the same request again: %+v %v, want a new quote", again, err)
		}
		id, _ := payout.Parse(o.ID)
		if _, err := b.Close(ctx, id, "ada"); err != nil {
			t.Fatalf("close on a cluster: %v", err)
		}
		if f, err := b.Find(ctx, id, "acme"); err != nil || f.State != Open {
			t.Fatalf("find on a cluster: %+v %v", f, err)
		}
		if f, err := b.FindClosing(ctx, id, "acme", Guess{Rail: "sepa", Country: "DE", By: "ada"}); err != nil || f.State != Open || f.Closing != NotTried {
			t.Fatalf("find and close on a cluster, the record naming no corridor: %+v %v", f, err)
		}
		if next, err := b.Open(ctx, payout, "acme", 84532, "req-"+string(rune('a'+i%26))+string(rune('a'+i/26)), time.Minute, record); err != nil || next.ID == o.ID {
			t.Fatalf("the same request after closing: %+v %v", next, err)
		}
		ids[o.ID[len("bpq_84532_"):][:4]] = true
	}
	for i := range 20 { // a quote of the guessed corridor, closed as it is read, on every master
		o, err := b.Open(ctx, payout, "acme", 84532, "sepa-"+strconv.Itoa(i), time.Minute, func(id string, exp time.Time) ([]byte, error) {
			return []byte(`{"id":"` + id + `","rail":"sepa","country":"DE"}`), nil
		})
		if err != nil {
			t.Fatal(err)
		}
		id, _ := payout.Parse(o.ID)
		if f, err := b.FindClosing(ctx, id, "acme", Guess{Rail: "sepa", Country: "DE", By: "ada"}); err != nil || f.Closing != ClosedForBy {
			t.Fatalf("find and close on a cluster: %+v %v", f, err)
		}
		if mine, err := b.Close(ctx, id, "eve"); err != nil || mine {
			t.Fatalf("close for another after FindClosing, on a cluster: %v %v", mine, err)
		}
	}
	if len(ids) < 10 {
		t.Errorf("only %d hash tags in 50 quotes", len(ids))
	}
}
