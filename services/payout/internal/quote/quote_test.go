package quote

import (
	"context"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/partnerpay/api/testkit/redistest"
)

var payout = Kind{Prefix: "bpq"}

type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) now() time.Time      { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *clock) add(d time.Duration) { c.mu.Lock(); defer c.mu.Unlock(); c.t = c.t.Add(d) }

func newBook(t testing.TB) (*Book, *clock, redis.UniversalClient) {
	t.Helper()
	rs := redistest.Start(t)
	rdb := redis.NewClient(&redis.Options{Addr: rs.Addr})
	t.Cleanup(func() { rdb.Close() })
	c := &clock{t: time.Now()}
	return NewBook(rdb, []byte("quote-secret-0123456789"), c.now), c, rdb
}

func record(id string, exp time.Time) ([]byte, error) {
	return []byte(`{"id":"` + id + `","expiresAt":"` + exp.Format(time.RFC3339) + `"}`), nil
}

func open(t *testing.T, b *Book, owner, canonical string, ttl time.Duration) Offer {
	t.Helper()
	o, err := b.Open(context.Background(), payout, owner, 84532, canonical, ttl, record)
	if err != nil {
		t.Fatal(err)
	}
	return o
}

func find(t *testing.T, b *Book, id, owner string) Found {
	t.Helper()
	pid, ok := payout.Parse(id)
	if !ok {
		t.Fatalf("id %q does not parse", id)
	}
	f, err := b.Find(context.Background(), pid, owner)
	if err != nil {
		t.Fatal(err)
	}
	return f
}

// Every quote request opens a new quote (DESIGN §3): the same request
// twice is two quotes, each a fixed offer of its own, each the asking
// key's alone.
func TestEveryRequestOpensANewQuote(t *testing.T) {
	t.Parallel()
	b, _, _ := newBook(t)
	first := open(t, b, "acme", "req-1", time.Minute)
	if len(first.ID) != len("bpq_84532_")+32 {
		t.Fatalf("first offer %+v", first)
	}
	again := open(t, b, "acme", "req-1", time.Minute)
	if again.ID == first.ID {
		t.Fatalf("the same request twice: %s both times, want two quotes", first.ID)
	}
	for _, o := range []Offer{first, again} {
		if f := find(t, b, o.ID, "acme"); f.State != Open || string(f.Record) != string(o.Record) {
			t.Errorf("find open %s: %+v", o.ID, f)
		}
		if f := find(t, b, o.ID, "globex"); f.State != Unknown {
			t.Errorf("another key's open quote reads as %v", f.State)
		}
	}
}

// A quote being executed is closed for its beneficiary: closing it again
// for the same one is fine, for another refused; it still reads as open
// (what it became is the system of record's to say).
func TestAClosedQuoteIsBoundToItsBeneficiary(t *testing.T) {
	t.Parallel()
	b, _, _ := newBook(t)
	o := open(t, b, "acme", "req", time.Minute)
	id, _ := payout.Parse(o.ID)
	if mine, err := b.Close(context.Background(), id, "ada"); err != nil || !mine {
		t.Fatal(mine, err)
	}
	if mine, err := b.Close(context.Background(), id, "ada"); err != nil || !mine {
		t.Fatalf("closing twice for one beneficiary: %v %v", mine, err)
	}
	if mine, err := b.Close(context.Background(), id, "eve"); err != nil || mine {
		t.Fatalf("closing for another beneficiary: %v %v, want it refused", mine, err)
	}
	if f := find(t, b, o.ID, "acme"); f.State != Open || string(f.Record) != string(o.Record) {
		t.Errorf("find closed: %+v", f)
	}
	if f := find(t, b, o.ID, "globex"); f.State != Unknown {
		t.Errorf("another key's closed quote reads as %v", f.State)
	}
}

// FindClosing reads an offer and closes it in the same round trip when the
// guess names the quote's rail and country; it leaves the offer as it was
// when the guess is wrong, the quote is another key's, or the mark names
// another beneficiary. Reopen takes back only its own closing.
func TestFindClosingClosesOnlyAQuoteOfTheGuessedCorridor(t *testing.T) {
	t.Parallel()
	b, _, _ := newBook(t)
	ctx := context.Background()
	sepa := func(id string, exp time.Time) ([]byte, error) {
		return []byte(`{"id":"` + id + `","country":"DE","rail":"sepa_instant","expiresAt":"` + exp.Format(time.RFC3339) + `"}`), nil
	}
	o, err := b.Open(ctx, payout, "acme", 84532, "req", time.Minute, sepa)
	if err != nil {
		t.Fatal(err)
	}
	id, _ := payout.Parse(o.ID)
	closed := func() bool {
		t.Helper()
		c, err := b.Closed(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	for _, miss := range []struct {
		name, owner string
		g           Guess
		want        State
	}{
		{"another rail", "acme", Guess{Rail: "sepa", Country: "DE", By: "ada"}, Open},
		{"another country", "acme", Guess{Rail: "sepa_instant", Country: "AT", By: "ada"}, Open},
		{"no beneficiary", "acme", Guess{Rail: "sepa_instant", Country: "DE"}, Open},
		{"another key", "globex", Guess{Rail: "sepa_instant", Country: "DE", By: "ada"}, Unknown},
	} {
		f, err := b.FindClosing(ctx, id, miss.owner, miss.g)
		if err != nil || f.State != miss.want || f.Closing != NotTried {
			t.Errorf("%s: %+v %v, want %v and nothing closed", miss.name, f, err, miss.want)
		}
		if miss.want == Open && string(f.Record) != string(o.Record) {
			t.Errorf("%s: record %q, want %q", miss.name, f.Record, o.Record)
		}
		if closed() {
			t.Fatalf("%s: the offer was closed", miss.name)
		}
	}
	ada := Guess{Rail: "sepa_instant", Country: "DE", By: "ada"}
	for i := range 2 { // twice for one beneficiary is fine; the first made the mark
		if f, err := b.FindClosing(ctx, id, "acme", ada); err != nil || f.State != Open || f.Closing != ClosedForBy || f.Made != (i == 0) || string(f.Record) != string(o.Record) {
			t.Fatalf("the guessed corridor, time %d: %+v %v, want closed for ada (made the first time)", i+1, f, err)
		}
	}
	if mine, err := b.Close(ctx, id, "eve"); err != nil || mine {
		t.Fatalf("Close for another after FindClosing: %v %v, want refused", mine, err)
	}
	eve := Guess{Rail: "sepa_instant", Country: "DE", By: "eve"}
	if f, err := b.FindClosing(ctx, id, "acme", eve); err != nil || f.Closing != ClosedForOther {
		t.Fatalf("FindClosing for another: %+v %v, want ClosedForOther", f, err)
	}
	if err := b.Reopen(ctx, id, "eve"); err != nil || !closed() {
		t.Fatalf("Reopen for another took ada's mark (%v)", err)
	}
	if err := b.Reopen(ctx, id, "ada"); err != nil || closed() {
		t.Fatalf("Reopen for ada left the mark (%v)", err)
	}
	if mine, err := b.Close(ctx, id, "eve"); err != nil || !mine {
		t.Fatalf("Close for eve after ada's closing was taken back: %v %v", mine, err)
	}
}

// A quote that has expired is found as expired, and nothing is closed.
func TestFindClosingAnExpiredQuote(t *testing.T) {
	t.Parallel()
	b, c, rdb := newBook(t)
	ctx := context.Background()
	o := open(t, b, "acme", "req", 50*time.Millisecond)
	id, _ := payout.Parse(o.ID)
	for {
		if n, err := rdb.Exists(ctx, keyPrefix(payout, id.raw[:])+"q:"+o.ID).Result(); err != nil || n == 0 {
			break
		}
		time.Sleep(10 * time.Millisecond) // Redis expires the offer on its own clock
	}
	c.add(time.Second)
	f, err := b.FindClosing(ctx, id, "acme", Guess{Rail: "sepa_instant", Country: "DE", By: "ada"})
	if err != nil || f.State != Expired || f.Closing != NotTried {
		t.Fatalf("%+v %v, want expired", f, err)
	}
	if n, err := rdb.Exists(ctx, keyPrefix(payout, id.raw[:])+"x:"+o.ID).Result(); err != nil || n != 0 {
		t.Errorf("a mark for an expired quote (%v)", err)
	}
}

func TestClosingALostOfferDoesNothing(t *testing.T) {
	t.Parallel()
	b, _, rdb := newBook(t)
	id, _ := payout.Parse("bpq_84532_00000000000000000000000000000000")
	if _, err := b.Close(context.Background(), id, "ada"); err != nil {
		t.Fatal(err)
	}
	if n, err := rdb.DBSize(context.Background()).Result(); err != nil || n != 0 {
		t.Errorf("%d keys after closing an offer that is not there (%v)", n, err)
	}
}

func TestAnExpiredQuoteIsATombstoneFor24Hours(t *testing.T) {
	t.Parallel() // it waits on a clock: beside the others
	b, c, _ := newBook(t)
	o := open(t, b, "acme", "req", time.Second)
	time.Sleep(1100 * time.Millisecond) // Redis expires the quote on its own clock
	c.add(1100 * time.Millisecond)
	if f := find(t, b, o.ID, "acme"); f.State != Expired {
		t.Fatalf("after expiry: %v, want Expired", f.State)
	}
	if f := find(t, b, o.ID, "globex"); f.State != Unknown {
		t.Errorf("another key's expired quote reads as %v", f.State)
	}
	next := open(t, b, "acme", "req", time.Minute)
	if next.ID == o.ID {
		t.Fatalf("the same request after expiry got %+v: an id must never be priced twice", next)
	}
	c.add(TombstoneLife - 5*time.Second)
	if f := find(t, b, o.ID, "acme"); f.State != Expired {
		t.Errorf("23h59m55s after expiry: %v, want Expired", f.State)
	}
	c.add(10 * time.Second)
	if f := find(t, b, o.ID, "acme"); f.State != Unknown {
		t.Errorf("24h after expiry: %v, want Unknown", f.State)
	}
}

func TestUnknownIDs(t *testing.T) {
	t.Parallel()
	b, _, _ := newBook(t)
	if f := find(t, b, "bpq_84532_00000000000000000000000000000000", "acme"); f.State != Unknown {
		t.Errorf("an id never issued: %v", f.State)
	}
	for _, bad := range []string{"", "bpq_84532_", "bpq_84532_0000000000000000000000000000000", "bpq_84532_0000000000000000000000000000000G",
		"bpq_84532_0000000000000000000000000000000A", "bpq_084532_00000000000000000000000000000000", "bpq_0_00000000000000000000000000000000",
		"bpq_9007199254740992_00000000000000000000000000000000", "dq_84532_00000000000000000000000000000000", "bpq_84532_00000000000000000000000000000000x"} {
		if _, ok := payout.Parse(bad); ok {
			t.Errorf("%q parsed", bad)
		}
	}
}

func usedMemory(b testing.TB, rdb redis.UniversalClient) int64 {
	b.Helper()
	info, err := rdb.Info(context.Background(), "memory").Result()
	if err != nil {
		b.Fatal(err)
	}
	for _, line := range strings.Split(info, "\r\n") {
		if v, ok := strings.CutPrefix(line, "used_memory:"); ok {
			n, _ := strconv.ParseInt(v, 10, 64)
			return n
		}
	}
	b.Fatal("no used_memory")
	return 0
}

// BenchmarkOpen opens distinct quotes (the worst case: no instance is
// answered again) and reports what one costs in Redis while it is open,
// what its tombstone costs at the density a key quoting at 100 new quotes a
// second reaches (132 per bucket per day), and the steady-state memory of
// such a key with the default 60 s quote life:
//
//	go test -run '^$' -bench Open -benchtime 20000x ./internal/quote/
func BenchmarkOpen(b *testing.B) {
	book, _, rdb := newBook(b)
	ctx := context.Background()
	rec := func(id string, exp time.Time) ([]byte, error) {
		// a payout quote's stored record, at its real size
		return []byte(`{"id":"` + id + `","owner":"acme","chain":84532,"cryptoCurrency":"USDC","tokenCurrency":"USD","fiatCurrency":"EUR","country":"DE","cryptoAmount":"100","rail":"sepa_instant","estimatedSettlement":"PT10S","expiresAt":"` + exp.Format(time.RFC3339) + `"}`), nil
	}
	before := usedMemory(b, rdb)
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; b.Loop(); i++ {
		if _, err := book.Open(ctx, payout, "acme", 84532, "req-"+strconv.Itoa(i), time.Hour, rec); err != nil {
			b.Fatal(err)
		}
	}
	b.StopTimer()
	open := float64(usedMemory(b, rdb)-before) / float64(b.N)

	// A bucket as a key at 100/s fills it: 100 × 86400 / 65536 tags ≈ 132.
	const perBucket = 132
	tomb := make([]byte, perBucket*tombSize)
	if err := rdb.Set(ctx, "bpq:{ffff}:t:1", tomb, time.Hour).Err(); err != nil {
		b.Fatal(err)
	}
	usage, err := rdb.MemoryUsage(ctx, "bpq:{ffff}:t:1").Result()
	if err != nil {
		b.Fatal(err)
	}
	perTomb := float64(usage) / perBucket
	const rate, life = 100, 60
	steady := rate*life*(open-perTomb) + rate*(86400+life)*perTomb
	b.ReportMetric(open, "B/open-quote")
	b.ReportMetric(perTomb, "B/tombstone")
	b.ReportMetric(steady/(1<<20), "MiB@100/s")
}
