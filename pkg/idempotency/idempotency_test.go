package idempotency

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/partnerpay/api/pkg/partner"
	"github.com/partnerpay/api/pkg/redistest"
)

type counting struct {
	calls  atomic.Int32
	status int
	gate   chan struct{} // when set, the handler waits on it
}

func (c *counting) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	n := c.calls.Add(1)
	if c.gate != nil {
		<-c.gate
	}
	body, _ := io.ReadAll(r.Body)
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(c.status)
	io.WriteString(w, `{"call":`+string(rune('0'+n))+`,"echo":`+string(body)+`}`)
}

func setup(t *testing.T, next http.Handler) http.Handler {
	h, _ := setupWithRedis(t, next)
	return h
}

func setupWithRedis(t *testing.T, next http.Handler) (http.Handler, *redis.Client) {
	srv := redistest.Start(t)
	rdb := redis.NewClient(&redis.Options{Addr: srv.Addr})
	t.Cleanup(func() { rdb.Close() })
	return Middleware(NewRedisStore(rdb), 5*time.Second, slog.New(slog.DiscardHandler))(next), rdb
}

func TestAnswersAreKeptADayPerPartnerKey(t *testing.T) {
	h, rdb := setupWithRedis(t, &counting{status: 200})
	send(h, "acme", "k", "/v1/x", `{}`)
	keys, err := rdb.Keys(context.Background(), "idem:acme:*").Result()
	if err != nil || len(keys) != 1 {
		t.Fatalf("stored under %v (%v), want one key scoped to acme", keys, err)
	}
	if ttl := rdb.TTL(context.Background(), keys[0]).Val(); ttl < 23*time.Hour || ttl > 24*time.Hour {
		t.Errorf("kept for %s, want 24h", ttl)
	}
	if strings.Contains(keys[0], ":k") {
		t.Error("the client's key is stored as is; it should be hashed")
	}
}

func send(h http.Handler, keyID, idemKey, path, body string) *httptest.ResponseRecorder {
	r := httptest.NewRequest(http.MethodPost, path, strings.NewReader(body))
	r.Header.Set("Content-Type", "application/json")
	r.Header.Set(partner.HeaderKeyID, keyID)
	if idemKey != "" {
		r.Header.Set(Header, idemKey)
	}
	w := httptest.NewRecorder()
	h.ServeHTTP(w, r)
	return w
}

func TestReplayMismatchAndScope(t *testing.T) {
	next := &counting{status: 201}
	h := setup(t, next)

	first := send(h, "acme", "k-1", "/v1/x", `{"a":1}`)
	again := send(h, "acme", "k-1", "/v1/x", `{"a":1}`)
	if first.Code != 201 || again.Code != 201 || again.Body.String() != first.Body.String() || next.calls.Load() != 1 {
		t.Fatalf("replay: %d %s then %d %s, %d calls", first.Code, first.Body, again.Code, again.Body, next.calls.Load())
	}
	if again.Header().Get(ReplayedHeader) != "true" || first.Header().Get(ReplayedHeader) != "" {
		t.Error("only the replay is marked as one")
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
	next := &counting{status: 200, gate: make(chan struct{})}
	h := setup(t, next)
	done := make(chan *httptest.ResponseRecorder)
	go func() { done <- send(h, "acme", "slow", "/v1/x", `{}`) }()
	for next.calls.Load() == 0 {
		time.Sleep(time.Millisecond)
	}
	r := send(h, "acme", "slow", "/v1/x", `{}`)
	if r.Code != 409 || !strings.Contains(r.Body.String(), `"code":"idempotency_in_progress"`) || r.Header().Get("Retry-After") != "1" {
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

func TestServerErrorsAreNotRemembered(t *testing.T) {
	next := &counting{status: 500}
	h := setup(t, next)
	send(h, "acme", "k", "/v1/x", `{}`)
	next.status = 200
	if r := send(h, "acme", "k", "/v1/x", `{}`); r.Code != 200 || next.calls.Load() != 2 {
		t.Fatalf("a retry after a 500 runs again: %d, %d calls", r.Code, next.calls.Load())
	}
}

func TestMalformedKeys(t *testing.T) {
	h := setup(t, &counting{status: 200})
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
