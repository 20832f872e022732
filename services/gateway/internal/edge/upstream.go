package edge

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
	"syscall"
	"time"

	"github.com/sony/gobreaker/v2"
)

// Upstream calls are guarded two ways, under the route's own timeout:
//
//   - A refused connection is retried (twice, 25 and 50 ms later): nothing
//     was sent, so a POST is as safe to retry as a GET. The body is the
//     gateway's buffered copy (req.GetBody), so a retry sends it again.
//   - A circuit breaker (github.com/sony/gobreaker) per upstream opens after
//     five failures in a row — refused, reset, or no answer within the
//     route's timeout — and then fails calls at once (500 internal) for
//     BreakerCooldown, instead of holding every caller for the timeout. One
//     call then probes the upstream; its success closes the breaker. An
//     answer, even a 5xx, is a live upstream.
const (
	breakerTrips    = 5
	BreakerCooldown = 5 * time.Second
	refusedRetries  = 2
)

// errCircuitOpen is a call the breaker failed without trying it.
var errCircuitOpen = errors.New("upstream circuit open: failing fast")

type guarded struct {
	name    string
	next    http.RoundTripper
	breaker *gobreaker.CircuitBreaker[*http.Response]
}

func (g *Gateway) guard(upstream string, next http.RoundTripper) http.RoundTripper {
	gu := &guarded{name: upstream, next: next}
	gu.breaker = gobreaker.NewCircuitBreaker[*http.Response](gobreaker.Settings{
		Name:        upstream,
		MaxRequests: 1,
		Interval:    30 * time.Second,
		Timeout:     BreakerCooldown,
		ReadyToTrip: func(c gobreaker.Counts) bool { return c.ConsecutiveFailures >= breakerTrips },
		// A caller that went away says nothing about the upstream.
		IsExcluded: func(err error) bool { return errors.Is(err, context.Canceled) },
		OnStateChange: func(name string, from, to gobreaker.State) {
			level := slog.LevelInfo
			if to == gobreaker.StateOpen {
				level = slog.LevelError
			}
			g.log.Log(context.Background(), level, "upstream circuit "+to.String(), "upstream", name, "from", from.String(),
				"cooldown", BreakerCooldown.String())
			g.count(func(m *Metrics) { m.circuitChanged(name, to) })
		},
	})
	g.count(func(m *Metrics) { m.circuitChanged(upstream, gobreaker.StateClosed) })
	return gu
}

func (gu *guarded) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := gu.breaker.Execute(func() (*http.Response, error) { return gu.tryRefused(req) })
	if errors.Is(err, gobreaker.ErrOpenState) || errors.Is(err, gobreaker.ErrTooManyRequests) {
		return nil, errCircuitOpen
	}
	return resp, err
}

// tryRefused sends req, again on a refused connection while the request's
// context allows.
func (gu *guarded) tryRefused(req *http.Request) (*http.Response, error) {
	for attempt := 0; ; attempt++ {
		resp, err := gu.next.RoundTrip(req)
		if err == nil || attempt == refusedRetries || !errors.Is(err, syscall.ECONNREFUSED) || (req.Body != nil && req.GetBody == nil) {
			return resp, err
		}
		select {
		case <-req.Context().Done():
			return nil, err
		case <-time.After(25 * time.Millisecond << attempt):
		}
		retry := req.Clone(req.Context())
		if req.GetBody != nil {
			if retry.Body, err = req.GetBody(); err != nil {
				return nil, err
			}
		}
		req = retry
	}
}
