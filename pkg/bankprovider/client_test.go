package bankprovider

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

// TestEveryAttemptIsMeasured: an SRE sees each try at the provider by
// operation and outcome, a retry counted as such, a refusal apart from a
// failure.
func TestEveryAttemptIsMeasured(t *testing.T) {
	t.Parallel()
	var calls atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		switch {
		case r.URL.Path == "/v1/customers/cus_missing":
			w.WriteHeader(http.StatusNotFound)
			_, _ = w.Write([]byte(`{"error":{"type":"resource_missing","message":"no such customer"}}`))
		case strings.HasPrefix(r.URL.Path, "/v1/customers/") && calls.Add(1) == 1:
			w.WriteHeader(http.StatusServiceUnavailable)
		default:
			_, _ = w.Write([]byte(`{"id":"cus_1","status":"active"}`))
		}
	}))
	defer srv.Close()
	reg := prometheus.NewPedanticRegistry()
	c, err := New(srv.URL, "k")
	if err != nil {
		t.Fatal(err)
	}
	c.Instrument(reg)
	c.backoff = time.Millisecond

	if cus, err := c.Customer(context.Background(), "cus_1"); err != nil || cus.ID != "cus_1" {
		t.Fatalf("Customer after one 503 = %+v, %v; want cus_1 on the retry", cus, err)
	}
	if _, err := c.Customer(context.Background(), "cus_missing"); !IsType(err, TypeResourceMissing) {
		t.Fatalf("Customer(missing) = %v, want resource_missing", err)
	}

	for _, w := range []struct {
		outcome string
		want    float64
	}{{outcomeOK, 1}, {outcomeError, 1}, {outcomeRefused, 1}, {outcomeTimeout, 0}} {
		if got := testutil.ToFloat64(c.metrics.requests.WithLabelValues(opCustomer, w.outcome)); got != w.want {
			t.Errorf("requests{get_customer,%s} = %v, want %v", w.outcome, got, w.want)
		}
	}
	if got := testutil.ToFloat64(c.metrics.retries.WithLabelValues(opCustomer)); got != 1 {
		t.Errorf("retries{get_customer} = %v, want 1", got)
	}
	// Every operation and outcome is a series from the start: a quiet
	// provider reads 0, not "no data".
	if n := testutil.CollectAndCount(reg, "partnerapi_bankprovider_requests_total"); n != 72 {
		t.Errorf("requests series = %d, want 72 (18 operations x 4 outcomes)", n)
	}
	if n := testutil.CollectAndCount(reg, "partnerapi_bankprovider_request_duration_seconds"); n != 18 {
		t.Errorf("duration series = %d, want 18 (one per operation)", n)
	}
}

// TestATimedOutAttemptIsATimeout: a provider that does not answer is
// counted as a timeout, not as an error of ours.
func TestATimedOutAttemptIsATimeout(t *testing.T) {
	t.Parallel()
	release := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-release:
		case <-r.Context().Done():
		}
	}))
	defer srv.Close()
	defer close(release)
	reg := prometheus.NewPedanticRegistry()
	c, _ := New(srv.URL, "k")
	c.Instrument(reg)
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	if _, err := c.TermsSession(ctx, "ts_1"); err == nil {
		t.Fatal("TermsSession answered from a provider that never does")
	}
	if got := testutil.ToFloat64(c.metrics.requests.WithLabelValues(opTerms, outcomeTimeout)); got != 1 {
		t.Errorf("timeouts = %v, want 1", got)
	}
}
