// Package edge is the gateway's request path: every rule of the edge in the
// order the contract gives (checks.go), the forwarding to the services
// (proxy.go: httputil.ReverseProxy; splice.go), CORS for web pages
// (cors.go), and the guarantee that every answer is a JSON object whose
// first field is "environment". HTTP itself, both ways, is net/http's.
package edge

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/partnerpay/api/pkg/envelope"
	"github.com/partnerpay/api/pkg/environment"
	"github.com/partnerpay/api/pkg/obs"
	"github.com/partnerpay/api/pkg/partner"
	"github.com/partnerpay/api/services/gateway/internal/apidocs"
	"github.com/partnerpay/api/services/gateway/internal/apikey"
	"github.com/partnerpay/api/services/gateway/internal/ratelimit"
	"github.com/partnerpay/api/services/gateway/internal/reference"
)

// Keys is the live key set.
type Keys interface{ Current() *apikey.Set }

// Limiter decides whether a key may make one more request now.
type Limiter interface {
	Allow(ctx context.Context, key string, rate int) ratelimit.Decision
}

// Config is what the edge needs.
type Config struct {
	Env           environment.Name
	Keys          Keys
	Limiter       Limiter
	Upstreams     map[string]*url.URL // by upstream name
	Transport     http.RoundTripper   // shared by every proxy (upstream.Transport)
	InternalToken string
	Docs          *apidocs.Docs // the OpenAPI document and reference page; nil: not served
	Log           *slog.Logger
	Metrics       *Metrics // nil: not measured
	// TrustedProxies are the proxies in front of the gateway whose
	// X-Forwarded-For hops name a call's origin (GATEWAY_TRUSTED_PROXIES);
	// none: the connection's address is the origin.
	TrustedProxies apikey.Allowed
}

// Gateway is the edge handler.
type Gateway struct {
	env      environment.Name
	keys     Keys
	docs     *apidocs.Docs
	limiter  Limiter
	log      *slog.Logger
	metrics  *Metrics
	splicer  splicer
	token    []string                     // the X-Internal-Token value
	calls    atomic.Uint64                // numbers requests and calls to services (partner.HeaderCallID)
	idPrefix string                       // the gateway's request ids start with it
	stop     chan struct{}                // closed by Close: the circuits' probes end
	routes   map[string]map[string]*route // path → method → route
	public   map[string]*route            // "METHOD /path" → public route
	reads    *reference.Reads             // the routes of UpstreamGateway
	feed     *feed                        // GET /v1/events (UpstreamFeed)
	trusted  apikey.Allowed               // the proxies whose X-Forwarded-For counts
}

type route struct {
	Route
	pattern string
	proxy   *routeProxy
}

// New builds the edge. Every route's upstream must be configured.
func New(cfg Config) (*Gateway, error) {
	if cfg.Transport == nil {
		return nil, errors.New("edge: no transport")
	}
	g := &Gateway{
		idPrefix: rand.Text()[:12] + "-",
		stop:     make(chan struct{}),
		env:      cfg.Env, keys: cfg.Keys, docs: cfg.Docs, limiter: cfg.Limiter, log: cfg.Log, metrics: cfg.Metrics,
		splicer: newSplicer(cfg.Env), token: []string{cfg.InternalToken},
		routes:  make(map[string]map[string]*route),
		public:  make(map[string]*route),
		reads:   reference.New(cfg.Env),
		trusted: cfg.TrustedProxies,
	}
	keyed := make(map[string]*routeProxy)
	upstreams := make(map[string]http.RoundTripper) // each upstream's guarded, measured transport
	guards := make(map[string]*guarded)             // and its circuit
	upstream := func(name string) (*url.URL, http.RoundTripper, error) {
		target, ok := cfg.Upstreams[name]
		if !ok || target == nil {
			return nil, nil, fmt.Errorf("edge: upstream %q is not configured", name)
		}
		if (target.Scheme != "http" && target.Scheme != "https") || target.RawQuery != "" || target.Fragment != "" {
			// A query would be the request's, not the upstream's.
			return nil, nil, fmt.Errorf("edge: upstream %q must be an http:// or https:// URL without a query, not %s", name, target.Redacted())
		}
		if upstreams[name] == nil {
			guards[name] = g.guard(name, target, cfg.Transport) // one circuit per upstream
			var rt http.RoundTripper = guards[name]
			if g.metrics != nil {
				rt = g.metrics.instrumentUpstream(name, rt)
			}
			upstreams[name] = rt
		}
		return target, upstreams[name], nil
	}
	proxy := func(r Route, public bool) (*routeProxy, error) {
		switch r.Upstream {
		case UpstreamGateway:
			return nil, nil // answered by the gateway (g.reads)
		case UpstreamFeed:
			var sources []feedSource
			for _, name := range feedSources {
				target, rt, err := upstream(name)
				if err != nil {
					return nil, fmt.Errorf("%w (for %s %s)", err, r.Method, r.Path)
				}
				sources = append(sources, feedSource{name: name, target: target, rt: rt, guard: guards[name]})
			}
			g.feed = newFeed(g, sources, cfg.InternalToken)
			return nil, nil // answered by the gateway, from every service (g.feed)
		}
		target, rt, err := upstream(r.Upstream)
		if err != nil {
			return nil, fmt.Errorf("%w (for %s %s)", err, r.Method, r.Path)
		}
		if public {
			return g.newProxy(r.Upstream, target, rt, guards[r.Upstream], true), nil
		}
		if keyed[r.Upstream] == nil {
			keyed[r.Upstream] = g.newProxy(r.Upstream, target, rt, guards[r.Upstream], false)
		}
		return keyed[r.Upstream], nil
	}
	for _, r := range Routes {
		if r.SandboxOnly && cfg.Env != environment.Sandbox {
			continue // in production the simulation calls do not exist
		}
		p, err := proxy(r, false)
		if err != nil {
			return nil, err
		}
		if g.routes[r.Path] == nil {
			g.routes[r.Path] = make(map[string]*route)
		}
		g.routes[r.Path][r.Method] = &route{Route: r, pattern: r.Method + " " + r.Path, proxy: p}
		g.count(func(m *Metrics) { m.routeUpstream.WithLabelValues(r.Method+" "+r.Path, r.Upstream).Set(1) })
	}
	for _, pr := range Public {
		r := Route{Method: pr.Method, Path: pr.Path, Upstream: pr.Upstream, Timeout: publicTimeout}
		p, err := proxy(r, true)
		if err != nil {
			return nil, err
		}
		g.public[r.Method+" "+r.Path] = &route{Route: r, pattern: r.Method + " " + r.Path, proxy: p}
		g.count(func(m *Metrics) { m.routeUpstream.WithLabelValues(r.Method+" "+r.Path, r.Upstream).Set(1) })
	}
	return g, nil
}

// Close ends the background work of the edge (the probes of open
// circuits).
func (g *Gateway) Close() { close(g.stop) }

// ServeHTTP answers one request and logs one line for it: method, route,
// status, wire code, duration, key id, request id, trace id. Never the key,
// the Authorization header or a body.
func (g *Gateway) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	start := time.Now()
	requestID := r.Header.Get(partner.HeaderRequestID)
	if !validRequestID(requestID) {
		requestID = g.newRequestID()
	}
	h := w.Header()
	h[partner.HeaderRequestID] = []string{requestID}
	allowAnyOrigin(h)
	sw, ok := w.(*obs.StatusWriter) // obs.Kit's request metrics already keep the status
	if !ok {
		sw = &obs.StatusWriter{ResponseWriter: w}
	}
	var keyID, code string
	defer func() {
		if v := recover(); v != nil {
			// ReverseProxy aborts the client's connection when an answer
			// breaks off after its header: a cut body never looks whole.
			if v == http.ErrAbortHandler {
				code = codeAnswerCut
				if r.Context().Err() != nil {
					code = codeClientGone
				} else {
					upstream := g.upstreamOf(r)
					g.count(func(m *Metrics) { m.upstreamErrors.WithLabelValues(upstream).Inc() })
					g.log.Error("upstream answer broke off", "upstream", upstream, "request_id", requestID, "trace_id", obs.TraceID(r.Context()))
				}
				g.logRequest(r, sw.Status(), code, keyID, requestID, start)
			}
			panic(v)
		}
	}()
	keyID, code = g.serve(sw, r, requestID, start)
	if r.URL.Path == "/health" {
		return // probes every few seconds would drown the log
	}
	g.logRequest(r, sw.Status(), code, keyID, requestID, start)
}

// upstreamOf is the upstream r was forwarded to.
func (g *Gateway) upstreamOf(r *http.Request) string {
	if rt := g.routes[r.URL.Path][r.Method]; rt != nil {
		return rt.Upstream
	}
	if rt := g.public[r.Method+" "+r.URL.Path]; rt != nil {
		return rt.Upstream
	}
	return "unknown"
}

// logRequest writes the request line.
func (g *Gateway) logRequest(r *http.Request, status int, code, keyID, requestID string, start time.Time) {
	obs.LogLine(r.Context(), g.log, slog.LevelInfo, "request",
		slog.String("method", obs.Method(r.Method)),
		slog.String("route", r.Pattern),
		slog.Int("status", status),
		slog.String("code", code),
		slog.Int64("duration_us", time.Since(start).Microseconds()),
		slog.String("key_id", keyID),
		slog.String("request_id", requestID),
		slog.String("trace_id", obs.TraceID(r.Context())),
	)
}

func (g *Gateway) count(f func(*Metrics)) {
	if g.metrics != nil {
		f(g.metrics)
	}
}

// refuse answers with the envelope, environment first, and returns the code.
func (g *Gateway) refuse(w http.ResponseWriter, e *envelope.Error) string {
	envelope.Write(w, string(g.env), e)
	return string(e.Code)
}

// newRequestID is a request id of the gateway's own: a random prefix made
// at start, then a counter. Unique across gateways and restarts, without a
// read of crypto/rand per request (an id names a request; it guards
// nothing).
func (g *Gateway) newRequestID() string {
	return g.idPrefix + strconv.FormatUint(g.calls.Add(1), 36)
}

// validRequestID accepts a client's X-Request-Id of 1–128 characters from
// [A-Za-z0-9._:-]; anything else is replaced, so logs stay clean.
func validRequestID(s string) bool {
	if len(s) == 0 || len(s) > 128 {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '.' || c == '_' || c == ':' || c == '-') {
			return false
		}
	}
	return true
}
