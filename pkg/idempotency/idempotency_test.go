package idempotency

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/partnerpay/api/pkg/database"
	"github.com/partnerpay/api/pkg/partner"
	"github.com/partnerpay/api/testkit/pgtest"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

// counting answers status with a body naming the call, after gate (when
// set) opens; it notes whether its context was ever cancelled.
type counting struct {
	calls     atomic.Int32
	status    int
	gate      chan struct{}
	cancelled atomic.Bool
}

func (c *counting) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	n := c.calls.Add(1)
	if c.gate != nil {
		<-c.gate
	}
	if r.Context().Err() != nil {
		c.cancelled.Store(true)
	}
	body, _ := io.ReadAll(r.Body)
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(c.status)
	io.WriteString(w, `{"call":`+strconv.Itoa(int(n))+`,"echo":`+string(body)+`}`)
}

// clock is a settable now.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *clock) add(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

type fixture struct {
	db    *database.DB
	store *Store
	clock *clock
}

// newFixture is a store on a fresh database, on a settable clock.
func newFixture(t *testing.T) fixture {
	db := pgtest.Open(t, Migrations)
	c := &clock{t: time.Date(2026, 11, 25, 12, 0, 0, 0, time.UTC)}
	return fixture{db: db, store: NewStore(db, c.now), clock: c}
}

func (fx fixture) handler(next http.Handler) http.Handler {
	return Middleware(fx.store, Options{Budget: 5 * time.Second}, slog.New(slog.DiscardHandler))(next)
}

func send(h http.Handler, keyID, idemKey, path, body string) *httptest.ResponseRecorder {
	r := httptest.NewRequest(http.MethodPost, path, strings.NewReader(body))
	r.Header.Set("Content-Type", "application/json")
	r.Header.Set(partner.HeaderKeyID, keyID)
	if idemKey != "" {
		r.Header.Set(partner.HeaderIdempotencyKey, idemKey)
	}
	w := httptest.NewRecorder()
	h.ServeHTTP(w, r)
	return w
}

func TestTheClientsKeyIsStoredHashedPerPartnerKey(t *testing.T) {
	t.Parallel()
	fx := newFixture(t)
	send(fx.handler(&counting{status: 200}), "acme", "order-7", "/v1/x", `{}`)
	var keyID, hash string
	if err := fx.db.QueryRow(context.Background(), `SELECT key_id, key_hash FROM idempotency_keys`).Scan(&keyID, &hash); err != nil {
		t.Fatal(err)
	}
	if keyID != "acme" || hash != KeyHash("order-7") || strings.Contains(hash, "order-7") {
		t.Errorf("stored as %q %q, want acme and the key's SHA-256", keyID, hash)
	}
}

func TestReplayMismatchAndScope(t *testing.T) {
	t.Parallel()
	fx := newFixture(t)
	next := &counting{status: 201}
	h := fx.handler(next)

	first := send(h, "acme", "k-1", "/v1/x", `{"a":1}`)
	again := send(h, "acme", "k-1", "/v1/x", `{"a":1}`)
	if first.Code != 201 || again.Code != 201 || again.Body.String() != first.Body.String() || next.calls.Load() != 1 {
		t.Fatalf("replay: %d %s then %d %s, %d calls", first.Code, first.Body, again.Code, again.Body, next.calls.Load())
	}
	if again.Header().Get(ReplayedHeader) != "true" || first.Header().Get(ReplayedHeader) != "" {
		t.Error("only the replay is marked as one")
	}
	if got := again.Header().Get("Content-Type"); got != "application/json" {
		t.Errorf("replay Content-Type %q", got)
	}

	other := send(h, "acme", "k-1", "/v1/x", `{"a":2}`)
	if other.Code != 422 || other.Body.String() != `{"error":{"code":"idempotency_key_reused","message":"This Idempotency-Key was used for a different request in the last 24 hours; use a new key for a new request."}}` {
		t.Fatalf("another body: %d %s", other.Code, other.Body)
	}
	if r := send(h, "acme", "k-1", "/v1/y", `{"a":1}`); r.Code != 422 {
		t.Errorf("same key on another endpoint: %d", r.Code)
	}
	if r := send(h, "globex", "k-1", "/v1/x", `{"a":1}`); r.Code != 201 || next.calls.Load() != 2 {
		t.Errorf("keys are scoped per partner key: %d, %d calls", r.Code, next.calls.Load())
	}
	if r := send(h, "acme", "", "/v1/x", `{"a":1}`); r.Code != 201 || next.calls.Load() != 3 {
		t.Errorf("without the header nothing is remembered: %d calls", next.calls.Load())
	}
}

func TestInFlight(t *testing.T) {
	t.Parallel()
	fx := newFixture(t)
	next := &counting{status: 200, gate: make(chan struct{})}
	h := fx.handler(next)
	done := make(chan *httptest.ResponseRecorder)
	go func() { done <- send(h, "acme", "slow", "/v1/x", `{}`) }()
	for next.calls.Load() == 0 {
		time.Sleep(time.Millisecond)
	}
	r := send(h, "acme", "slow", "/v1/x", `{}`)
	if r.Code != 409 || r.Body.String() != `{"error":{"code":"idempotency_in_progress","message":"A request with this Idempotency-Key is still in progress; retry shortly."}}` || r.Header().Get("Retry-After") != "1" {
		t.Fatalf("while in flight: %d %s", r.Code, r.Body)
	}
	close(next.gate)
	if first := <-done; first.Code != 200 {
		t.Fatalf("first: %d", first.Code)
	}
	if r := send(h, "acme", "slow", "/v1/x", `{}`); r.Code != 200 || next.calls.Load() != 1 {
		t.Errorf("after completion: %d, %d calls", r.Code, next.calls.Load())
	}
}

// An answer that made nothing is not remembered: a server error, and a
// refusal of the request as sent. The retry with the same key runs again.
func TestAnswersThatMadeNothingAreNotRemembered(t *testing.T) {
	t.Parallel()
	fx := newFixture(t)
	for _, status := range []int{500, 502, 400, 403, 404, 409, 410, 413} {
		next := &counting{status: status}
		h := fx.handler(next)
		key := "k-" + strconv.Itoa(status)
		if r := send(h, "acme", key, "/v1/x", `{"typo":1}`); r.Code != status {
			t.Fatalf("first: %d", r.Code)
		}
		next.status = 200
		r := send(h, "acme", key, "/v1/x", `{"fixed":1}`)
		if r.Code != 200 || r.Body.String() != `{"call":2,"echo":{"fixed":1}}` {
			t.Errorf("after a %d, the fixed retry with the same key: %d %s", status, r.Code, r.Body)
		}
	}
}

// A server error may follow an effect its request could not record (a
// provider call made, then the commit failed): the same request retried
// makes the same ids, so the provider call keyed by them finds what it
// made. A fixed request with the key starts afresh, with ids of its own.
func TestAReleasedKeyKeepsItsIDsForTheSameRequest(t *testing.T) {
	t.Parallel()
	fx := newFixture(t)
	status := 500
	var ids []string
	h := fx.handler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ids = append(ids, NewID(r.Context(), "ord_"))
		w.WriteHeader(status)
	}))
	send(h, "acme", "k", "/v1/x", `{"a":1}`)
	send(h, "acme", "k", "/v1/x", `{"a":1}`)
	status = 200
	send(h, "acme", "k", "/v1/x", `{"a":1}`)
	if len(ids) != 3 || ids[0] != ids[1] || ids[1] != ids[2] {
		t.Errorf("the same request after server errors made ids %v, want one id", ids)
	}
	status, ids = 500, nil
	send(h, "acme", "k2", "/v1/x", `{"typo":1}`)
	status = 200
	if r := send(h, "acme", "k2", "/v1/x", `{"fixed":1}`); r.Code != 200 || len(ids) != 2 || ids[0] == ids[1] {
		t.Errorf("the fixed request: %d, ids %v, want ids of its own", r.Code, ids)
	}
	if r := send(h, "acme", "k2", "/v1/x", `{"typo":1}`); r.Code != 422 {
		t.Errorf("the first body again, once the fixed one was answered: %d", r.Code)
	}
}

// The caller going away (a client timeout, the gateway giving up) does not
// cut the request short, and its answer is there for the retry.
func TestARequestRunsToItsEndWhenItsCallerLeaves(t *testing.T) {
	t.Parallel()
	fx := newFixture(t)
	next := &counting{status: 200, gate: make(chan struct{})}
	h := fx.handler(next)
	ctx, cancel := context.WithCancel(context.Background())
	r := httptest.NewRequest(http.MethodPost, "/v1/x", strings.NewReader(`{}`)).WithContext(ctx)
	r.Header.Set(partner.HeaderKeyID, "acme")
	r.Header.Set(partner.HeaderIdempotencyKey, "timeout-1")
	done := make(chan struct{})
	go func() { h.ServeHTTP(httptest.NewRecorder(), r); close(done) }()
	for next.calls.Load() == 0 {
		time.Sleep(time.Millisecond)
	}
	cancel() // the caller gives up
	if got := send(h, "acme", "timeout-1", "/v1/x", `{}`); got.Code != 409 {
		t.Fatalf("retry while the first still runs: %d %s", got.Code, got.Body)
	}
	close(next.gate)
	<-done
	if next.cancelled.Load() {
		t.Error("the request's work saw its caller's cancellation")
	}
	got := send(h, "acme", "timeout-1", "/v1/x", `{}`)
	if got.Code != 200 || got.Body.String() != `{"call":1,"echo":{}}` || got.Header().Get(ReplayedHeader) != "true" {
		t.Errorf("retry after the first finished: %d %s", got.Code, got.Body)
	}
}

// recordMaker writes a row and its answer in one transaction, as a
// service's store does; fail makes the transaction fail after Answer.
type recordMaker struct {
	db   *database.DB
	fail bool
}

func (m *recordMaker) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	answer := map[string]string{"id": NewID(ctx, "rec_")}
	err := m.db.Tx(ctx, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `INSERT INTO made (id) VALUES ($1) ON CONFLICT (id) DO NOTHING`, answer["id"]); err != nil {
			return err
		}
		if err := Answer(ctx, tx, answer); err != nil {
			return err
		}
		if m.fail {
			return errors.New("the commit failed")
		}
		return nil
	})
	if err != nil {
		w.WriteHeader(500)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	io.WriteString(w, `{"id":"`+answer["id"]+`"}`)
}

func TestTheAnswerCommitsWithTheRecordItAnswersFor(t *testing.T) {
	t.Parallel()
	fx := newFixture(t)
	ctx := context.Background()
	if _, err := fx.db.Exec(ctx, `CREATE TABLE made (id text PRIMARY KEY)`); err != nil {
		t.Fatal(err)
	}
	made := func() (n int) {
		if err := fx.db.QueryRow(ctx, `SELECT count(*) FROM made`).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	m := &recordMaker{db: fx.db, fail: true}
	h := fx.handler(m)
	if r := send(h, "acme", "rec-1", "/v1/x", `{}`); r.Code != 500 {
		t.Fatalf("failed commit: %d", r.Code)
	}
	if made() != 0 {
		t.Fatal("a row was made by a transaction that failed")
	}
	m.fail = false
	first := send(h, "acme", "rec-1", "/v1/x", `{}`)
	if first.Code != 200 || made() != 1 {
		t.Fatalf("after the fix: %d %s, %d rows", first.Code, first.Body, made())
	}
	var body []byte
	if err := fx.db.QueryRow(ctx, `SELECT body FROM idempotency_keys`).Scan(&body); err != nil || string(body) != first.Body.String() {
		t.Fatalf("kept %q (%v), sent %q", body, err, first.Body)
	}
	again := send(h, "acme", "rec-1", "/v1/x", `{}`)
	if again.Body.String() != first.Body.String() || made() != 1 {
		t.Errorf("replay %s, %d rows", again.Body, made())
	}
}

// A claim whose process died lapses; the retry takes it over and makes the
// same ids, so a provider call keyed by them is not made twice.
func TestALapsedClaimIsTakenOverWithItsIDs(t *testing.T) {
	t.Parallel()
	fx := newFixture(t)
	ctx := context.Background()
	lock := 10 * time.Second
	dead, _, err := fx.store.claim(ctx, "acme", KeyHash("crash"), "fp", "fp", lock)
	if err != nil || dead == nil {
		t.Fatalf("claim: %v", err)
	}
	firstID := NewID(withClaim(ctx, dead), "acc_")
	if _, rec, _ := fx.store.claim(ctx, "acme", KeyHash("crash"), "fp", "fp", lock); rec == nil || rec.Finished {
		t.Fatal("a live claim was taken over")
	}
	fx.clock.add(lock + time.Second)
	again, _, err := fx.store.claim(ctx, "acme", KeyHash("crash"), "fp", "fp", lock)
	if err != nil || again == nil {
		t.Fatalf("take over: %v %v", again, err)
	}
	if id := NewID(withClaim(ctx, again), "acc_"); id != firstID || !strings.HasPrefix(id, "acc_") || len(id) != len("acc_")+24 {
		t.Errorf("ids %s then %s: a retry must make the same ids", firstID, id)
	}
	if NewID(ctx, "acc_") == firstID {
		t.Error("a request without a key got a claim's id")
	}
	if err := fx.store.finish(ctx, fx.db, dead, 200, []byte(`{}`)); !errors.Is(err, errClaimLost) {
		t.Errorf("the lapsed holder finished the record: %v", err)
	}
	if err := fx.store.finish(ctx, fx.db, again, 200, []byte(`{"ok":1}`)); err != nil {
		t.Fatal(err)
	}
	if _, err := fx.db.Exec(ctx, `UPDATE idempotency_keys SET body = $1`, []byte(`{}`)); !database.IsRuleViolation(err) {
		t.Errorf("a finished answer was changed: %v", err)
	}
}

func TestAnswersAreKeptADay(t *testing.T) {
	t.Parallel()
	fx := newFixture(t)
	next := &counting{status: 200}
	h := fx.handler(next)
	send(h, "acme", "day", "/v1/x", `{}`)
	fx.clock.add(Retention - time.Second)
	if r := send(h, "acme", "day", "/v1/x", `{"other":1}`); r.Code != 422 {
		t.Fatalf("within the day: %d", r.Code)
	}
	fx.clock.add(2 * time.Second)
	if r := send(h, "acme", "day", "/v1/x", `{"other":1}`); r.Code != 200 || next.calls.Load() != 2 {
		t.Fatalf("after the day the key is free: %d, %d calls", r.Code, next.calls.Load())
	}
	send(h, "acme", "other", "/v1/x", `{}`)
	fx.clock.add(Retention + time.Second)
	n, err := fx.store.Sweep(context.Background())
	if err != nil || n != 2 {
		t.Errorf("sweep deleted %d (%v), want both records", n, err)
	}
}

func TestMalformedKeys(t *testing.T) {
	t.Parallel()
	fx := newFixture(t)
	h := fx.handler(&counting{status: 200})
	for _, k := range []string{strings.Repeat("a", 256), "tab\there", "é"} {
		r := send(h, "acme", k, "/v1/x", `{}`)
		if r.Code != 400 || r.Body.String() != `{"error":{"code":"invalid_request","message":"Idempotency-Key must be 1 to 255 printable ASCII characters."}}` {
			t.Errorf("key %q: %d %s", k, r.Code, r.Body)
		}
	}
	if !ValidKey(strings.Repeat("a", 255)) || !ValidKey("order 42: retry #1") {
		t.Error("valid keys refused")
	}
}

// Of concurrent requests with one key, one runs; the others are told it is
// in progress or get its answer.
func TestConcurrentRequestsWithOneKeyRunOnce(t *testing.T) {
	t.Parallel()
	fx := newFixture(t)
	next := &counting{status: 200}
	h := fx.handler(next)
	var wg sync.WaitGroup
	codes := make([]int, 16)
	for i := range codes {
		wg.Add(1)
		go func() { defer wg.Done(); codes[i] = send(h, "acme", "race", "/v1/x", `{}`).Code }()
	}
	wg.Wait()
	if next.calls.Load() != 1 {
		t.Errorf("%d runs, want 1 (codes %v)", next.calls.Load(), codes)
	}
	for _, c := range codes {
		if c != 200 && c != 409 {
			t.Errorf("codes %v", codes)
			break
		}
	}
}

// holding is a Holder route: Hold notes the body it was given and whether
// the request's claim existed yet, and passes on what it held (the body)
// in the context it returns; the route notes what it found there.
type holding struct {
	*counting
	store   *Store
	held    []string
	claimed []bool
	found   []any // what the route's context carried from Hold
	nothing bool  // Hold returns nil: it learned nothing to pass on
}

type heldKey struct{}

func (h *holding) Hold(r *http.Request) context.Context {
	body, _ := io.ReadAll(r.Body)
	_, _, err := h.store.read(r.Context(), r.Header.Get(partner.HeaderKeyID), KeyHash(r.Header.Get(partner.HeaderIdempotencyKey)))
	h.held = append(h.held, string(body))
	h.claimed = append(h.claimed, err == nil)
	if h.nothing {
		return nil
	}
	return context.WithValue(r.Context(), heldKey{}, string(body))
}

func (h *holding) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	h.found = append(h.found, r.Context().Value(heldKey{}))
	h.counting.ServeHTTP(w, r)
}

// A route that holds (a payout's quote bound to its beneficiary) holds
// before its request claims its key, as a request without a key holds
// before its first write: the claim may leave the request in doubt, and
// nobody else may take what it holds meanwhile. The route still reads the
// whole body, and its context carries what Hold passed on. A key that
// answers another request (422) holds nothing.
func TestAHolderHoldsBeforeTheClaim(t *testing.T) {
	t.Parallel()
	fx := newFixture(t)
	route := &holding{counting: &counting{status: 200}, store: fx.store}
	h := fx.handler(route)
	if r := send(h, "acme", "k-1", "/v1/x", `{"a":1}`); r.Code != 200 || r.Body.String() != `{"call":1,"echo":{"a":1}}` {
		t.Fatalf("first: %d %s", r.Code, r.Body)
	}
	if len(route.held) != 1 || route.held[0] != `{"a":1}` || route.claimed[0] {
		t.Fatalf("held %q (claimed first: %v), want the body, held before its claim", route.held, route.claimed)
	}
	if len(route.found) != 1 || route.found[0] != `{"a":1}` {
		t.Errorf("the route found %q in its context, want what Hold returned", route.found)
	}
	if r := send(h, "acme", "k-1", "/v1/x", `{"a":2}`); r.Code != 422 {
		t.Fatalf("another request under the key: %d %s", r.Code, r.Body)
	}
	if len(route.held) != 1 {
		t.Errorf("a request refused as idempotency_key_reused held %q", route.held[1:])
	}
	if r := send(h, "acme", "", "/v1/x", `{"a":3}`); r.Code != 200 || len(route.held) != 1 {
		t.Errorf("without a key the route holds for itself: %d, held %d times", r.Code, len(route.held))
	}
	if len(route.found) != 2 || route.found[1] != nil {
		t.Errorf("the route found %q in its contexts, want nothing held for the request without a key", route.found)
	}
}

// A Holder that learned nothing to pass on returns nil: the request goes
// on with its own context, its claim and its route as without a hold.
func TestAHolderThatLearnedNothingLeavesTheRequestsContext(t *testing.T) {
	t.Parallel()
	fx := newFixture(t)
	route := &holding{counting: &counting{status: 200}, store: fx.store, nothing: true}
	h := fx.handler(route)
	if r := send(h, "acme", "k-1", "/v1/x", `{"a":1}`); r.Code != 200 || r.Body.String() != `{"call":1,"echo":{"a":1}}` {
		t.Fatalf("first: %d %s", r.Code, r.Body)
	}
	if r := send(h, "acme", "k-1", "/v1/x", `{"a":1}`); r.Code != 200 || r.Header().Get(ReplayedHeader) != "true" || r.Body.String() != `{"call":1,"echo":{"a":1}}` {
		t.Fatalf("the same request again: %d %s, want the first answer replayed", r.Code, r.Body)
	}
	if len(route.found) != 1 || route.found[0] != nil {
		t.Errorf("the route ran with %q in its contexts; want one run, nothing passed on", route.found)
	}
}

// The same request is the same JSON, not the same bytes (as Stripe compares
// parameters): its keys in another order, other spacing, or escapes
// written otherwise are the same request under a key, replayed byte for
// byte as first answered; another value is another request (422). A
// record made before fingerprints were by meaning (its exact bytes) still
// answers the same bytes.
func TestTheSameJSONIsTheSameRequest(t *testing.T) {
	t.Parallel()
	fx := newFixture(t)
	next := &counting{status: 200}
	h := fx.handler(next)
	first := send(h, "acme", "k-1", "/v1/x", `{"a":"1","b":{"c":[1,2]}}`)
	for _, same := range []string{` { "b" : { "c" : [ 1, 2 ] }, "a" : "1" } `, `{"a":"\u0031","b":{"c":[1,2]}}`} {
		if r := send(h, "acme", "k-1", "/v1/x", same); r.Code != 200 || r.Body.String() != first.Body.String() || r.Header().Get(ReplayedHeader) != "true" {
			t.Errorf("%s: %d %s, want the first answer replayed", same, r.Code, r.Body)
		}
	}
	for _, other := range []string{`{"a":"2","b":{"c":[1,2]}}`, `{"a":"1","b":{"c":[2,1]}}`, `{"a":"1"}`} {
		if r := send(h, "acme", "k-1", "/v1/x", other); r.Code != 422 {
			t.Errorf("%s: %d, want 422", other, r.Code)
		}
	}
	if next.calls.Load() != 1 {
		t.Errorf("%d runs, want 1", next.calls.Load())
	}
	// A record of the bytes, from before.
	ctx := context.Background()
	legacy := rawFingerprint(http.MethodPost, "/v1/x", []byte(`{"b":1, "a":2}`))
	if _, err := fx.db.Exec(ctx, `INSERT INTO idempotency_keys (key_id, key_hash, fingerprint, seed, created_at, finished_at, status, body)
		VALUES ('acme', $1, $2, 's', $3, $3, 200, '{"old":true}')`, KeyHash("k-old"), legacy, fx.clock.now()); err != nil {
		t.Fatal(err)
	}
	if r := send(h, "acme", "k-old", "/v1/x", `{"b":1, "a":2}`); r.Code != 200 || r.Body.String() != `{"old":true}` {
		t.Errorf("the bytes of a record from before: %d %s, want its answer", r.Code, r.Body)
	}
}
