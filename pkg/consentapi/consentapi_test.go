package consentapi

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/partnerpay/api/pkg/database"
	"github.com/partnerpay/api/pkg/partner"
)

// The consent service's "not known yet" (409 idempotency_in_progress)
// reaches the caller as the same doubt, so that it answers 409 in
// progress too, not 500: a read not yet confirmed on the standby, a
// creation whose outcome is unknown. Another 409 stays an error.
func TestInProgressIsPassedOnAsDoubt(t *testing.T) {
	t.Parallel()
	code := "idempotency_in_progress"
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set(partner.HeaderErrorCode, code)
		w.WriteHeader(http.StatusConflict)
	}))
	defer srv.Close()
	c, err := NewClient(srv.URL, "internal-token-0123456789", nil)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if _, err := c.Get(ctx, "acme", "cs_1"); !errors.Is(err, database.ErrNotConfirmed) {
		t.Errorf("Get: %v, want database.ErrNotConfirmed", err)
	}
	if _, err := c.Create(ctx, CreateSession{Owner: "acme", AccountID: "acc_1", ProviderCustomerID: "cus_1"}); !errors.Is(err, database.ErrOutcomeUnknown) {
		t.Errorf("Create: %v, want database.ErrOutcomeUnknown", err)
	}
	code = "conflict"
	if _, err := c.Get(ctx, "acme", "cs_1"); err == nil || errors.Is(err, database.ErrNotConfirmed) {
		t.Errorf("another 409: %v, want a plain error", err)
	}
}
