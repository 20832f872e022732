// Package edge is the gateway's request path: every rule of the edge in the
// order the contract gives (checks.go), the forwarding to the services
// (proxy.go, splice.go), CORS for web pages (cors.go), and the guarantee
// that every answer is a JSON object whose first field is "environment".
package edge

import (
	"context"
	"crypto/rand"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"time"

	"github.com/partnerpay/api/pkg/envelope"
	"github.com/partnerpay/api/pkg/environment"
	"github.com/partnerpay/api/pkg/obs"
	"github.com/partnerpay/api/pkg/partner"
	"github.com/partnerpay/api/services/gateway/internal/apidocs"
	"github.com/partnerpay/api/services/gateway/internal/apikey"
	"github.com/partnerpay/api/services/gateway/internal/ratelimit"
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
	Transport     http.RoundTripper   // shared by every proxy; NewTransport when nil
	InternalToken string
	Docs          *apidocs.Docs // the OpenAPI document and reference page; nil: not served
	Log           *slog.Logger
	Metrics       *Metrics // nil: not measured
}

// Gateway is the edge handler.
type Gateway struct {
	env     environment.Name
	keys    Keys
	docs    *apidocs.Docs
	limiter Limiter
	log     *slog.Logger
	metrics *Metrics
	splicer splicer
	token   []string                     // the X-Internal-Token value
	routes  map[string]map[string]*route // path → method → route
	public  map[string]*route            // "METHOD /path" → public route
}

type route struct {
	Route
	pattern string
	proxy   *relay
}

// call carries a request's key to the relay, and the wire code of a
// failure back to the log line.
type call struct {
	entry     *apikey.Entry
	requestID string
	code      string
	client    context.Context // the client's request context, without the route's deadline
	out       clientWriter    // the answer's body goes to the client through it
}

// New builds the edge. Every route's upstream must be configured.
func New(cfg Config) (*Gateway, error) {
	if cfg.Transport == nil {
		cfg.Transport = NewTransport()
	}
	g := &Gateway{
		env: cfg.Env, keys: cfg.Keys, docs: cfg.Docs, limiter: cfg.Limiter, log: cfg.Log, metrics: cfg.Metrics,
		splicer: newSplicer(cfg.Env), token: []string{cfg.InternalToken},
		routes: make(map[string]map[string]*route),
		public: make(map[string]*route),
	}
	keyed := make(map[string]*relay)
	guarded := make(map[string]http.RoundTripper)
	proxy := func(r Route, public bool) (*relay, error) {
		target, ok := cfg.Upstreams[r.Upstream]
		if !ok || target == nil {
			return nil, fmt.Errorf("edge: upstream %q (for %s %s) is not configured", r.Upstream, r.Method, r.Path)
		}
		if target.Scheme != "http" || target.RawQuery != "" || target.Fragment != "" {
			// The transport speaks plain HTTP/1.1 to services inside the
			// deployment; a query would be the request's, not the upstream's.
			return nil, fmt.Errorf("edge: upstream %q must be an http:// URL without a query, not %s", r.Upstream, target.Redacted())
		}
		rt := guarded[r.Upstream]
		if rt == nil {
			rt = g.guard(r.Upstream, cfg.Transport) // one breaker per upstream
			guarded[r.Upstream] = rt
		}
		if public {
			return g.newRelay(r.Upstream, target, rt, true), nil
		}
		if keyed[r.Upstream] == nil {
			keyed[r.Upstream] = g.newRelay(r.Upstream, target, rt, false)
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
	}
	for _, pr := range Public {
		r := Route{Method: pr.Method, Path: pr.Path, Upstream: pr.Upstream, Timeout: publicTimeout}
		p, err := proxy(r, true)
		if err != nil {
			return nil, err
		}
		g.public[r.Method+" "+r.Path] = &route{Route: r, pattern: r.Method + " " + r.Path, proxy: p}
	}
	return g, nil
}

// ServeHTTP answers one request and logs one line for it: method, route,
// status, wire code, duration, key id, request id, trace id. Never the key,
// the Authorization header or a body.
func (g *Gateway) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	start := time.Now()
	requestID := r.Header.Get(partner.HeaderRequestID)
	if !validRequestID(requestID) {
		requestID = rand.Text()
	}
	h := w.Header()
	h[partner.HeaderRequestID] = []string{requestID}
	allowAnyOrigin(h)
	sw := &obs.StatusWriter{ResponseWriter: w}
	keyID, code := g.serve(sw, r, requestID)
	if r.URL.Path == "/health" {
		return // probes every few seconds would drown the log
	}
	g.logRequest(r, sw.Status(), code, keyID, requestID, start)
	if code == codeAnswerCut {
		// What the client has looks whole unless its connection is cut.
		panic(http.ErrAbortHandler)
	}
}

// logRequest writes the request line.
//
// It and the other steps of a request that are not on the way to the
// service (admit, relay.outbound, relay.answer) are kept out of line: their
// locals would otherwise sit in the frames of the goroutine that waits for
// the service, and a deeper wait means bigger stacks for every connection
// (the runtime starts goroutines at the average depth; make loadtest shows
// the resident memory).
//
//go:noinline
func (g *Gateway) logRequest(r *http.Request, status int, code, keyID, requestID string, start time.Time) {
	obs.LogLine(r.Context(), g.log, slog.LevelInfo, "request",
		slog.String("method", obs.Method(r.Method)),
		slog.String("route", r.Pattern),
		slog.Int("status", status),
		slog.String("code", code),
		slog.Float64("duration_ms", float64(time.Since(start).Microseconds())/1000),
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
