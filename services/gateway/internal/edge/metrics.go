package edge

import (
	"net/http"
	"net/url"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/partnerpay/api/pkg/obs"
	"github.com/partnerpay/api/services/gateway/internal/apikey"
	"github.com/partnerpay/api/services/gateway/internal/ratelimit"
)

// Metrics are the gateway's own series; label values are resolved once so
// the per-request path only increments.
type Metrics struct {
	refusals         *prometheus.CounterVec
	refusedMissing   prometheus.Counter
	refusedMalformed prometheus.Counter
	refusedUnknown   prometheus.Counter
	refusedProduct   prometheus.Counter
	refusedExpired   prometheus.Counter
	refusedAddress   prometheus.Counter
	refusedScope     prometheus.Counter

	decisions        *prometheus.CounterVec
	allowedRedis     prometheus.Counter
	limitedRedis     prometheus.Counter
	allowedLocal     prometheus.Counter
	limitedLocal     prometheus.Counter
	fallbackActive   prometheus.Gauge
	fallbackSwitches prometheus.Counter
	// limitedKeys counts refusals by key id: ids are issued by operators
	// and only a key that authenticated gets here, so the set is bounded by
	// the keys file (series of removed keys are deleted on reload).
	limitedKeys *prometheus.CounterVec
	limitedMu   sync.Mutex
	limitedSeen map[string]bool

	upstreamDuration *prometheus.HistogramVec
	upstreamErrors   *prometheus.CounterVec
	circuitState     *prometheus.GaugeVec
	circuitOpened    *prometheus.CounterVec
	upstreamDials    *prometheus.CounterVec
	routeUpstream    *prometheus.GaugeVec

	keysLoaded     prometheus.Gauge
	keysFileValid  prometheus.Gauge
	reloadFailures prometheus.Counter
	// live is the key set last loaded, for the expiry gauges (read at
	// each scrape, so a key's approaching end shows without a reload).
	live atomic.Pointer[apikey.Set]
}

// NewMetrics registers the gateway's series on reg.
func NewMetrics(reg prometheus.Registerer) *Metrics {
	const sub = "gateway"
	m := &Metrics{
		limitedSeen: map[string]bool{},
		refusals: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: obs.Namespace, Subsystem: sub, Name: "auth_refusals_total",
			Help: "Requests refused by key checks, by reason: missing, malformed, unknown or expired key (401); a key used from an address it is not allowed (ip_not_allowed), a product it does not carry (permission_denied) or a call its read scope forbids (scope) (403).",
		}, []string{"reason"}),
		decisions: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: obs.Namespace, Subsystem: sub, Name: "ratelimit_decisions_total",
			Help: "Rate limit decisions, by decision (allowed, limited) and store (redis, local fallback).",
		}, []string{"decision", "store"}),
		limitedKeys: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: obs.Namespace, Subsystem: sub, Name: "ratelimit_limited_total",
			Help: "Requests refused with 429 rate_limited, by key id (a key of the keys file).",
		}, []string{"key_id"}),
		fallbackActive: prometheus.NewGauge(prometheus.GaugeOpts{
			Namespace: obs.Namespace, Subsystem: sub, Name: "ratelimit_fallback_active",
			Help: "1 while Redis is unavailable and the gateway limits in-process.",
		}),
		fallbackSwitches: prometheus.NewCounter(prometheus.CounterOpts{
			Namespace: obs.Namespace, Subsystem: sub, Name: "ratelimit_fallback_activations_total",
			Help: "Times the gateway switched to in-process limiting because Redis failed.",
		}),
		upstreamDuration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Namespace: obs.Namespace, Subsystem: sub, Name: "upstream_request_duration_seconds",
			Help:    "Time for an upstream service to answer, by upstream and status code.",
			Buckets: []float64{.001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5},
		}, []string{"upstream", "code"}),
		upstreamErrors: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: obs.Namespace, Subsystem: sub, Name: "upstream_errors_total",
			Help: "Upstream calls that failed (unreachable, timed out, an answer the gateway refused to pass on or one that broke off), by upstream.",
		}, []string{"upstream"}),
		routeUpstream: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Namespace: obs.Namespace, Subsystem: sub, Name: "route_upstream_info",
			Help: "1 for each route of the gateway and the service that answers it (\"gateway\": the reference reads, which the gateway answers itself). The alert rules join it to name a failing route's service.",
		}, []string{"route", "upstream"}),
		circuitState: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Namespace: obs.Namespace, Subsystem: sub, Name: "upstream_circuit_state",
			Help: "The circuit breaker of each upstream: 0 closed (calls go through), 2 open (calls fail at once while the gateway probes its /health every second).",
		}, []string{"upstream"}),
		circuitOpened: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: obs.Namespace, Subsystem: sub, Name: "upstream_circuit_opened_total",
			Help: "Times the circuit breaker of an upstream opened: five calls in a row failed, or two health probes in a row got no answer while no call got one either.",
		}, []string{"upstream"}),
		upstreamDials: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: obs.Namespace, Subsystem: sub, Name: "upstream_connections_opened_total",
			Help: "Connections the gateway opened to an upstream. Pooled connections carry request after request: a rate near the request rate means they are not reused.",
		}, []string{"upstream"}),
		keysLoaded: prometheus.NewGauge(prometheus.GaugeOpts{
			Namespace: obs.Namespace, Subsystem: sub, Name: "keys_loaded",
			Help: "Partner keys in the live set.",
		}),
		keysFileValid: prometheus.NewGauge(prometheus.GaugeOpts{
			Namespace: obs.Namespace, Subsystem: sub, Name: "keys_file_valid",
			Help: "1 when the keys file on disk is the live set; 0 while it fails to parse (the last good set stays live).",
		}),
		reloadFailures: prometheus.NewCounter(prometheus.CounterOpts{
			Namespace: obs.Namespace, Subsystem: sub, Name: "keys_reload_failures_total",
			Help: "Keys file reloads that failed; the last good set stayed live.",
		}),
	}
	expiring := func(ended bool) func() float64 {
		return func() float64 {
			set := m.live.Load()
			if set == nil {
				return 0
			}
			soon, gone := set.Expiring(time.Now())
			if ended {
				return float64(gone)
			}
			return float64(soon)
		}
	}
	reg.MustRegister(
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Namespace: obs.Namespace, Subsystem: sub, Name: "keys_expiring_soon",
			Help: "Partner keys whose expiresAt falls within the next 14 days: rotate or extend them (gateway keys narrow --expires-at) before their partner is refused.",
		}, expiring(false)),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Namespace: obs.Namespace, Subsystem: sub, Name: "keys_expired",
			Help: "Partner keys past their expiresAt: refused with 401 like unknown keys, still in the keys file.",
		}, expiring(true)),
	)
	reg.MustRegister(m.refusals, m.decisions, m.limitedKeys, m.fallbackActive, m.fallbackSwitches,
		m.upstreamDuration, m.upstreamErrors, m.circuitState, m.circuitOpened, m.upstreamDials, m.routeUpstream, m.keysLoaded, m.keysFileValid, m.reloadFailures)
	m.refusedMissing = m.refusals.WithLabelValues("missing")
	m.refusedMalformed = m.refusals.WithLabelValues("malformed")
	m.refusedUnknown = m.refusals.WithLabelValues("unknown")
	m.refusedProduct = m.refusals.WithLabelValues("permission_denied")
	m.refusedExpired = m.refusals.WithLabelValues("expired")
	m.refusedAddress = m.refusals.WithLabelValues("ip_not_allowed")
	m.refusedScope = m.refusals.WithLabelValues("scope")
	m.allowedRedis = m.decisions.WithLabelValues("allowed", "redis")
	m.limitedRedis = m.decisions.WithLabelValues("limited", "redis")
	m.allowedLocal = m.decisions.WithLabelValues("allowed", "local")
	m.limitedLocal = m.decisions.WithLabelValues("limited", "local")
	return m
}

// Decided counts a rate limit decision (ratelimit.Observer).
func (m *Metrics) Decided(d ratelimit.Decision) {
	switch {
	case d.Allowed && !d.Local:
		m.allowedRedis.Inc()
	case !d.Allowed && !d.Local:
		m.limitedRedis.Inc()
	case d.Allowed:
		m.allowedLocal.Inc()
	default:
		m.limitedLocal.Inc()
	}
}

// FallbackChanged tracks the in-process fallback (ratelimit.Observer).
func (m *Metrics) FallbackChanged(active bool) {
	if active {
		m.fallbackActive.Set(1)
		m.fallbackSwitches.Inc()
		return
	}
	m.fallbackActive.Set(0)
}

// KeysLoaded records the live key set, read from a valid file: its size,
// and the limited_total series of keys it no longer holds are dropped.
func (m *Metrics) KeysLoaded(keys *apikey.Set) {
	m.keysLoaded.Set(float64(keys.Len()))
	m.live.Store(keys)
	m.keysFileValid.Set(1)
	live := make(map[string]bool, keys.Len())
	for _, id := range keys.IDs() {
		live[id] = true
	}
	m.limitedMu.Lock()
	defer m.limitedMu.Unlock()
	for id := range m.limitedSeen {
		if !live[id] {
			m.limitedKeys.DeleteLabelValues(id)
			delete(m.limitedSeen, id)
		}
	}
	for id := range live { // every key reads 0 until it is limited
		m.limitedKeys.WithLabelValues(id)
		m.limitedSeen[id] = true
	}
}

// limited counts a 429 for the key id.
func (m *Metrics) limited(keyID string) {
	m.limitedMu.Lock()
	m.limitedSeen[keyID] = true
	m.limitedMu.Unlock()
	m.limitedKeys.WithLabelValues(keyID).Inc()
}

// KeysReloadFailed counts a failed reload; the file is invalid until the next load.
func (m *Metrics) KeysReloadFailed() {
	m.reloadFailures.Inc()
	m.keysFileValid.Set(0)
}

// circuitChanged records an upstream's breaker state.
// circuitChanged: the state gauge reads 0 closed, 2 open (1, half-open, is
// no longer a state: recovery is probed in the background).
func (m *Metrics) circuitChanged(upstream string, open bool) {
	if open {
		m.circuitState.WithLabelValues(upstream).Set(2)
		m.circuitOpened.WithLabelValues(upstream).Inc()
		return
	}
	m.circuitState.WithLabelValues(upstream).Set(0)
}

// UpstreamDialed counts the connections a Transport opens, by upstream
// (Transport.Dialed); each upstream reads 0 from the start. A host that is
// no upstream's is not counted.
func (m *Metrics) UpstreamDialed(upstreams map[string]*url.URL) func(host string) {
	byHost := make(map[string]prometheus.Counter, len(upstreams))
	for name, u := range upstreams {
		byHost[hostPort(u)] = m.upstreamDials.WithLabelValues(name)
	}
	return func(host string) {
		if c := byHost[host]; c != nil {
			c.Inc()
		}
	}
}

// hostPort is u's host with its port, as a Transport dials it.
func hostPort(u *url.URL) string {
	if u.Port() != "" {
		return u.Host
	}
	if u.Scheme == "https" {
		return u.Host + ":443"
	}
	return u.Host + ":80"
}

// instrumentUpstream times every call to one upstream; its error and
// circuit series exist from the start (0, not "no data").
func (m *Metrics) instrumentUpstream(upstream string, rt http.RoundTripper) http.RoundTripper {
	m.upstreamErrors.WithLabelValues(upstream)
	m.circuitOpened.WithLabelValues(upstream)
	return &timed{next: rt, byCode: m.upstreamDuration.MustCurryWith(prometheus.Labels{"upstream": upstream})}
}

// timed observes how long an upstream took to answer (its header), by
// status code, as promhttp.InstrumentRoundTripperDuration does, without a
// label map per call: each code's series is looked up once (a 404 of a
// status read, say, costs no label hashing and no allocation per call); a
// call that failed is not observed (the error counter has it).
type timed struct {
	next   http.RoundTripper
	byCode prometheus.ObserverVec
	codes  [600]atomic.Pointer[prometheus.Observer] // by status code, once looked up
}

func (t *timed) RoundTrip(r *http.Request) (*http.Response, error) {
	start := time.Now()
	resp, err := t.next.RoundTrip(r)
	if err == nil {
		t.observe(resp.StatusCode, time.Since(start))
	}
	return resp, err
}

func (t *timed) observe(code int, d time.Duration) {
	t.observer(code).Observe(d.Seconds())
}

// observer is code's series. net/http reads a status of three digits
// only, so each is kept; anything else is looked up each time.
func (t *timed) observer(code int) prometheus.Observer {
	if code < 100 || code >= len(t.codes) {
		return t.byCode.WithLabelValues(strconv.Itoa(code))
	}
	if o := t.codes[code].Load(); o != nil {
		return *o
	}
	o := t.byCode.WithLabelValues(strconv.Itoa(code))
	t.codes[code].Store(&o)
	return o
}
