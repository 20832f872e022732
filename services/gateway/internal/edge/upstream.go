package edge

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/url"
	"strings"
	"sync/atomic"
	"syscall"
	"time"
)

// Upstream calls are guarded three ways, under the route's own timeout:
//
//   - A refused connection is retried (twice, 25 and 50 ms later): nothing
//     was sent, so a POST is as safe to retry as a GET. The body is the
//     gateway's buffered copy (req.GetBody), so a retry sends it again.
//   - A circuit per upstream opens after five failures in a row (refused,
//     reset, or no answer in time) and then fails calls at once (500
//     internal) instead of holding every caller for the timeout. While it
//     is open, the gateway itself asks the upstream's GET /health every
//     BreakerProbeEvery (no partner request is ever the probe, so none
//     waits on a hung service); the first good answer closes it. An
//     answer, even a 5xx, is a live upstream.
//   - The reference reads (config and the lists), which every service
//     serves, go to the first service whose circuit is closed, and on to
//     the next when it fails or does not answer within
//     referenceAttemptTimeout: one service's death does not take them down.
const (
	breakerTrips            = 5
	BreakerProbeEvery       = time.Second
	refusedRetries          = 2
	referenceAttemptTimeout = time.Second
)

// errCircuitOpen is a call the breaker failed without trying it.
var errCircuitOpen = errors.New("upstream circuit open: failing fast")

type guarded struct {
	g        *Gateway
	name     string
	health   string // the upstream's GET /health
	next     http.RoundTripper
	open     atomic.Bool
	failures atomic.Int32 // in a row; a success in steady state only reads it
}

func (g *Gateway) guard(upstream string, target *url.URL, next http.RoundTripper) *guarded {
	gu := &guarded{g: g, name: upstream, next: next, health: strings.TrimSuffix(target.String(), "/") + "/health"}
	g.count(func(m *Metrics) { m.circuitChanged(upstream, false) })
	return gu
}

func (gu *guarded) RoundTrip(req *http.Request) (*http.Response, error) {
	if gu.open.Load() {
		return nil, errCircuitOpen
	}
	resp, err := gu.tryRefused(req)
	switch {
	case err == nil:
		if gu.failures.Load() != 0 { // no write (no shared cache line) per request
			gu.failures.Store(0)
		}
	case errors.Is(err, context.Canceled) && req.Context().Err() != nil:
		// The caller went away: that says nothing about the upstream.
	default:
		gu.failed()
	}
	return resp, err
}

// failed counts a failure and opens the circuit at the fifth in a row.
func (gu *guarded) failed() {
	if gu.failures.Add(1) < breakerTrips || !gu.open.CompareAndSwap(false, true) {
		return
	}
	gu.g.log.Error("upstream circuit open", "upstream", gu.name, "probe_every", BreakerProbeEvery.String())
	gu.g.count(func(m *Metrics) { m.circuitChanged(gu.name, true) })
	go gu.probe()
}

// probe asks the upstream's health until it answers, then closes the
// circuit.
func (gu *guarded) probe() {
	t := time.NewTicker(BreakerProbeEvery)
	defer t.Stop()
	for {
		select {
		case <-gu.g.stop:
			return
		case <-t.C:
		}
		if gu.healthy() {
			gu.failures.Store(0)
			gu.open.Store(false)
			gu.g.log.Info("upstream circuit closed", "upstream", gu.name)
			gu.g.count(func(m *Metrics) { m.circuitChanged(gu.name, false) })
			return
		}
	}
}

func (gu *guarded) healthy() bool {
	ctx, cancel := context.WithTimeout(context.Background(), BreakerProbeEvery)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, gu.health, nil)
	if err != nil {
		return false
	}
	resp, err := gu.next.RoundTrip(req)
	if err != nil {
		return false
	}
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 4<<10))
	resp.Body.Close()
	return resp.StatusCode == http.StatusOK
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

// failover sends a request to the first of several upstreams that answers:
// the reference reads, which every service serves. It applies the route's
// deadline itself, one context per attempt: each upstream but the last
// gets referenceAttemptTimeout within it; one whose circuit is open is
// skipped at once. The answering attempt's context lives until forward
// returns (call.release), the answer's body read.
type failover struct {
	targets []*url.URL
	rts     []http.RoundTripper
}

func (f *failover) RoundTrip(req *http.Request) (*http.Response, error) {
	c := callOf(req.Context())
	var err error
	for i, rt := range f.rts {
		deadline := c.deadline
		if i < len(f.rts)-1 {
			if d := time.Now().Add(referenceAttemptTimeout); d.Before(deadline) {
				deadline = d
			}
		}
		ctx, cancel := context.WithDeadline(req.Context(), deadline)
		var r *http.Request
		if i == 0 {
			r = req.WithContext(ctx)
		} else {
			r = req.Clone(ctx)
			t := f.targets[i]
			r.URL.Scheme, r.URL.Host, r.Host = t.Scheme, t.Host, t.Host
			r.URL.Path = strings.TrimSuffix(t.Path, "/") + strings.TrimPrefix(req.URL.Path, strings.TrimSuffix(f.targets[0].Path, "/"))
		}
		var resp *http.Response
		resp, err = rt.RoundTrip(r)
		if err == nil {
			c.release = cancel
			return resp, nil
		}
		cancel()
		if req.Context().Err() != nil || !time.Now().Before(c.deadline) {
			break
		}
	}
	return nil, err
}
