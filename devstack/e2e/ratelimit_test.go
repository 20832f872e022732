package e2e

import (
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

var rateLimitField = regexp.MustCompile(`^"default";r=(\d+);t=(\d+)$`)

// burst sends n concurrent requests with key and returns the answers.
func (s *stack) burst(n int, key string) []response {
	out := make([]response, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			out[i] = s.get("/v1/limits", key)
		}()
	}
	wg.Wait()
	return out
}

func checkLimited(t *testing.T, answers []response) (ok, limited int) {
	t.Helper()
	want := errorBody("rate_limited", "Too many requests for this key; retry after the time in Retry-After.")
	for _, r := range answers {
		if got := r.Header.Get("RateLimit-Policy"); got != `"default";q=2;w=1` {
			t.Errorf("RateLimit-Policy %q", got)
		}
		if !rateLimitField.MatchString(r.Header.Get("RateLimit")) {
			t.Errorf("RateLimit %q", r.Header.Get("RateLimit"))
		}
		switch r.Status {
		case http.StatusOK:
			ok++
		case http.StatusTooManyRequests:
			limited++
			if r.Body != want {
				t.Errorf("429 body %s", r.Body)
			}
			if n, err := strconv.Atoi(r.Header.Get("Retry-After")); err != nil || n < 1 {
				t.Errorf("Retry-After %q, want whole seconds ≥ 1", r.Header.Get("Retry-After"))
			}
			if m := rateLimitField.FindStringSubmatch(r.Header.Get("RateLimit")); m == nil || m[1] != "0" {
				t.Errorf("a 429 must say r=0: %q", r.Header.Get("RateLimit"))
			}
		default:
			t.Errorf("unexpected %d %s", r.Status, r.Body)
		}
	}
	return ok, limited
}

func TestRateLimitPerKey(t *testing.T) {
	// Not parallel: a stack of its own, timed against bounds (package e2e).
	s := startStack(t)
	slow := s.issue("slow", "--products", "bank", "--source-chains", "84532", "--rate", "2")
	other := s.issue("other", "--products", "bank", "--source-chains", "84532", "--rate", "2")
	time.Sleep(1100 * time.Millisecond) // let issue()'s probes drain from the buckets

	ok, limited := checkLimited(t, s.burst(16, slow))
	if ok < 1 || limited < 12 {
		t.Fatalf("16 concurrent requests at 2/s: %d passed, %d limited; want mostly 429s", ok, limited)
	}
	if r := s.get("/v1/limits", other); r.Status != 200 {
		t.Fatalf("another key shares no bucket: got %d", r.Status)
	}
	if m := s.metrics("gateway"); !strings.Contains(m, `partnerapi_gateway_ratelimit_decisions_total{decision="limited",store="redis"}`) {
		t.Error("limited decisions are not counted")
	}

	t.Run("with Redis down, requests still pass and are still limited", func(t *testing.T) {
		// On a busy machine Redis may already have been slower than the
		// limiter's deadline (a fallback, as designed): Redis down adds
		// an activation to what was counted before, unless the fallback
		// was still on.
		m := s.metrics("gateway")
		before, _ := metricValue(m, "partnerapi_gateway_ratelimit_fallback_activations_total", nil)
		if active, _ := metricValue(m, "partnerapi_gateway_ratelimit_fallback_active", nil); active == 0 {
			before++
		}
		s.redis.Stop()
		time.Sleep(1100 * time.Millisecond)
		ok, limited := checkLimited(t, s.burst(16, slow))
		if ok < 1 || limited < 12 {
			t.Fatalf("in-process fallback: %d passed, %d limited; want some passing and mostly 429s", ok, limited)
		}
		m = s.metrics("gateway")
		if after, _ := metricValue(m, "partnerapi_gateway_ratelimit_fallback_activations_total", nil); after != before {
			t.Errorf("fallback activations: %v after Redis stopped, want %v", after, before)
		}
		for _, want := range []string{
			"partnerapi_gateway_ratelimit_fallback_active 1",
			`partnerapi_gateway_ratelimit_decisions_total{decision="limited",store="local"}`,
			`partnerapi_gateway_ratelimit_decisions_total{decision="allowed",store="local"}`,
		} {
			if !strings.Contains(m, want) {
				t.Errorf("metrics lack %s", want)
			}
		}
		if !s.logged(`"level":"WARN","msg":"rate limit store slow or unavailable; limiting in-process"`) {
			t.Error("the fallback is not logged")
		}
	})

	t.Run("when Redis is back, limiting returns to it", func(t *testing.T) {
		s.redis.Restart()
		time.Sleep(1100 * time.Millisecond)
		s.waitFor(func() bool {
			s.get("/v1/limits", other)
			return strings.Contains(s.metrics("gateway"), "partnerapi_gateway_ratelimit_fallback_active 0")
		})
		if !s.logged(`"msg":"rate limit store answers again; limiting in Redis"`) {
			t.Error("the recovery is not logged")
		}
	})
}
