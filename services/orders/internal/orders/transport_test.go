package orders

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/partnerpay/api/pkg/idempotency"
	"github.com/partnerpay/api/pkg/kithttp"
	"github.com/partnerpay/api/pkg/obs"
	"github.com/partnerpay/api/pkg/partner"
)

// failingStore fails its next n creates after the provider has opened the
// order: a crash between the provider's answer and our commit.
type failingStore struct {
	*countingStore
	failures int
}

func (s *failingStore) Create(ctx context.Context, r Record, answer Order) error {
	if s.failures > 0 {
		s.failures--
		return errors.New("the database went away")
	}
	return s.countingStore.Create(ctx, r, answer)
}

// A create that fails after the provider opened the order is retried with
// the same Idempotency-Key: the retry makes the same order id, the provider
// answers the order it opened, and the partner gets one order, at the
// provider and here.
func TestARetryAfterAFailedSaveOpensNoSecondOrder(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	st := &failingStore{countingStore: f.store, failures: 1}
	f.svc.store = st
	log := slog.New(slog.DiscardHandler)
	idem := idempotency.NewStore(f.store.db, time.Now)
	mux := http.NewServeMux()
	Routes(mux, MakeEndpoints(f.svc, kithttp.NewObserver(log, obs.NewOperations(prometheus.NewRegistry(), "orders"))), "sandbox",
		idempotency.Middleware(idem, idempotency.Options{Budget: 10 * time.Second}, log), log)
	grants, _ := json.Marshal(card.Grants)
	send := func() *httptest.ResponseRecorder {
		r := httptest.NewRequest("POST", "/v1/orders", strings.NewReader(`{"direction":"buy","cryptoCurrency":"USDC","chain":84532,"fiatCurrency":"EUR","country":"DE","fiatAmount":"100","walletAddress":"`+wallet+`"}`))
		r.Header.Set(partner.HeaderKeyID, card.KeyID)
		r.Header.Set(partner.HeaderGrants, string(grants))
		r.Header.Set(partner.HeaderIdempotencyKey, "cart-7")
		r.Header.Set("Content-Type", "application/json")
		w := httptest.NewRecorder()
		mux.ServeHTTP(w, r)
		return w
	}
	if w := send(); w.Code != 500 {
		t.Fatalf("the failed save: %d %s", w.Code, w.Body)
	}
	w := send()
	var o Order
	if w.Code != 200 || json.Unmarshal(w.Body.Bytes(), &o) != nil {
		t.Fatalf("the retry: %d %s", w.Code, w.Body)
	}
	if len(f.provider.orders) != 1 || len(f.store.orders) != 1 || !f.store.orders[o.OrderID] {
		t.Errorf("%d orders at the provider, %d here, want one of each (%s)", len(f.provider.orders), len(f.store.orders), o.OrderID)
	}
	if again := send(); again.Code != 200 || again.Body.String() != w.Body.String() || again.Header().Get("Idempotent-Replayed") != "true" {
		t.Errorf("the replay: %d %s", again.Code, again.Body)
	}
}
