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
//   - A circuit per upstream fails calls at once (500 internal) while it
//     is open, instead of holding every caller for the route's timeout.
//     The gateway itself asks the upstream's GET /health every
//     BreakerProbeEvery, all the time (no partner request is ever the
//     probe, so none waits on a hung service). The circuit opens after
//     five failed calls in a row (refused, reset, or no answer in time),
//     or when probeMisses probes in a row got no answer within
//     BreakerProbeEvery while no call got one either: a hung service then
//     fails fast for everyone within seconds, not after five callers
//     have each waited out a timeout. The first good answer to a probe
//     closes it. An answer, even a 5xx, is a live upstream.
const (
	breakerTrips      = 5
	probeMisses       = 2
	BreakerProbeEvery = time.Second
	refusedRetries    = 2
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
	// answered: a call got an answer since the last probe (set once per
	// probe period, read by the prober): a slow /health on a service that
	// answers calls does not open its circuit.
	answered atomic.Bool
	// closed is done when the circuit opens: the calls waiting on the
	// upstream then end at once, as later ones do. A new one comes with
	// each closing.
	closed atomic.Pointer[context.Context]
	reopen context.CancelFunc // of closed; the prober's and trip's, under open's CAS
}

func (g *Gateway) guard(upstream string, target *url.URL, next http.RoundTripper) *guarded {
	gu := &guarded{g: g, name: upstream, next: next, health: strings.TrimSuffix(target.String(), "/") + "/health"}
	gu.newPeriod()
	g.count(func(m *Metrics) { m.circuitChanged(upstream, false) })
	go gu.watch()
	return gu
}

// newPeriod starts a closed period of the circuit.
func (gu *guarded) newPeriod() {
	ctx, cancel := context.WithCancel(context.Background())
	gu.closed.Store(&ctx)
	gu.reopen = cancel
}

// release cancels a call (cancel is its context's) when the circuit opens
// on a hung upstream while it waits: the caller gets 500 internal at once,
// as every later caller does. The returned stop ends the watch; callers
// defer it.
func (gu *guarded) release(cancel context.CancelFunc) (stop func() bool) {
	if gu == nil { // a source without a circuit (tests)
		return noRelease
	}
	return context.AfterFunc(*gu.closed.Load(), cancel)
}

func noRelease() bool { return true }

// RoundTrip sends req unless the circuit is open. Its caller has tied
// req's context to the circuit (release): a call the circuit released
// fails as errCircuitOpen.
func (gu *guarded) RoundTrip(req *http.Request) (*http.Response, error) {
	if gu.open.Load() {
		return nil, errCircuitOpen
	}
	period := *gu.closed.Load()
	resp, err := gu.tryRefused(req)
	if err != nil && period.Err() != nil {
		err = errCircuitOpen
	}
	switch {
	case err == nil:
		if gu.failures.Load() != 0 { // no write (no shared cache line) per request
			gu.failures.Store(0)
		}
		if !gu.answered.Load() {
			gu.answered.Store(true)
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
	if gu.failures.Add(1) >= breakerTrips {
		gu.trip("five calls in a row failed", false)
	}
}

// trip opens the circuit (once, whoever sees it first); the prober closes
// it. With hung, the upstream was found hung (its health did not answer in
// time): the calls waiting on it end at once too. A refused or reset one
// is not hung: a dead process's calls end by themselves, and one shutting
// down gracefully still answers the calls it has.
func (gu *guarded) trip(why string, hung bool) {
	if !gu.open.CompareAndSwap(false, true) {
		return
	}
	if hung {
		gu.reopen()
	}
	gu.g.log.Error("upstream circuit open", "upstream", gu.name, "why", why, "probe_every", BreakerProbeEvery.String())
	gu.g.count(func(m *Metrics) { m.circuitChanged(gu.name, true) })
}

// watch asks the upstream's health every BreakerProbeEvery until the
// gateway closes: it closes an open circuit at the first good answer, and
// opens a closed one when probeMisses probes in a row got no answer while
// no call did either.
func (gu *guarded) watch() {
	t := time.NewTicker(BreakerProbeEvery)
	defer t.Stop()
	misses, hung := 0, true
	for {
		select {
		case <-gu.g.stop:
			return
		case <-t.C:
		}
		status, answered, timedOut := gu.probe()
		if gu.open.Load() {
			if status == http.StatusOK {
				gu.failures.Store(0)
				gu.newPeriod()
				gu.open.Store(false)
				gu.g.log.Info("upstream circuit closed", "upstream", gu.name)
				gu.g.count(func(m *Metrics) { m.circuitChanged(gu.name, false) })
			}
			misses = 0
			continue
		}
		if callsAnswered := gu.answered.Swap(false); answered || callsAnswered {
			misses, hung = 0, true
			continue
		}
		misses, hung = misses+1, hung && timedOut
		if misses >= probeMisses {
			if hung {
				gu.trip("its health stopped answering", true)
			} else {
				gu.trip("its health refused the probe", false)
			}
			misses, hung = 0, true
		}
	}
}

// probe asks the upstream's health once, within BreakerProbeEvery: its
// status, whether it answered at all, and whether it ran out of time (a
// hung upstream) rather than being refused or reset.
func (gu *guarded) probe() (status int, answered, timedOut bool) {
	ctx, cancel := context.WithTimeout(context.Background(), BreakerProbeEvery)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, gu.health, nil)
	if err != nil {
		return 0, false, false
	}
	resp, err := gu.next.RoundTrip(req)
	if err != nil {
		return 0, false, ctx.Err() != nil
	}
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 4<<10))
	resp.Body.Close()
	return resp.StatusCode, true, false
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
