// Package edge is the gateway's request path: every rule of the edge in the
// order the contract gives (not_configured → not_found → unauthorized →
// rate_limited → permission_denied → forward), the forwarding itself, and
// the guarantee that every answer is a JSON object whose first field is
// "environment".
package edge

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"strings"
	"time"

	"github.com/partnerpay/api/pkg/envelope"
	"github.com/partnerpay/api/pkg/environment"
	"github.com/partnerpay/api/pkg/jsonbody"
	"github.com/partnerpay/api/pkg/obs"
	"github.com/partnerpay/api/pkg/partner"
	"github.com/partnerpay/api/pkg/serve"
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
	proxy   *httputil.ReverseProxy
}

type ctxKey struct{}

// call carries a request's key to the proxy's hooks, and the wire code of a
// failure back to the log line.
type call struct {
	entry     *apikey.Entry
	requestID string
	code      string
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
	proxies := make(map[string]*httputil.ReverseProxy)
	for _, r := range Routes {
		if r.SandboxOnly && cfg.Env != environment.Sandbox {
			continue // in production the simulation calls do not exist
		}
		target, ok := cfg.Upstreams[r.Upstream]
		if !ok || target == nil {
			return nil, fmt.Errorf("edge: upstream %q (for %s %s) is not configured", r.Upstream, r.Method, r.Path)
		}
		p, ok := proxies[r.Upstream]
		if !ok {
			p = g.newProxy(r.Upstream, target, cfg.Transport)
			proxies[r.Upstream] = p
		}
		if g.routes[r.Path] == nil {
			g.routes[r.Path] = make(map[string]*route)
		}
		g.routes[r.Path][r.Method] = &route{Route: r, pattern: r.Method + " " + r.Path, proxy: p}
	}
	for _, r := range Public {
		target, ok := cfg.Upstreams[r.Upstream]
		if !ok || target == nil {
			return nil, fmt.Errorf("edge: upstream %q (for %s %s) is not configured", r.Upstream, r.Method, r.Path)
		}
		pattern := r.Method + " " + r.Path
		g.public[pattern] = &route{Route: Route{Method: r.Method, Path: r.Path, Upstream: r.Upstream}, pattern: pattern,
			proxy: g.newPublicProxy(r.Upstream, target, cfg.Transport)}
	}
	return g, nil
}

// NewTransport is the upstream transport: keep-alive pools sized for a busy
// gateway (Go's default keeps only 2 idle connections per host) and tight
// dial and header deadlines, so a stuck service shows as an error quickly.
func NewTransport() *http.Transport {
	return &http.Transport{
		Proxy:                 nil, // services are reached directly, never through an egress proxy
		DialContext:           (&net.Dialer{Timeout: 2 * time.Second, KeepAlive: 30 * time.Second}).DialContext,
		MaxIdleConns:          1024,
		MaxIdleConnsPerHost:   256,
		IdleConnTimeout:       90 * time.Second,
		ResponseHeaderTimeout: 25 * time.Second,
		ExpectContinueTimeout: time.Second,
	}
}

func (g *Gateway) newProxy(upstream string, target *url.URL, rt http.RoundTripper) *httputil.ReverseProxy {
	if g.metrics != nil {
		rt = g.metrics.instrumentUpstream(upstream, rt)
	}
	return &httputil.ReverseProxy{
		Rewrite:    func(pr *httputil.ProxyRequest) { g.rewrite(pr, target) },
		Transport:  rt,
		BufferPool: bufferPool,
		ModifyResponse: func(resp *http.Response) error {
			g.takeInternalHeaders(resp)
			return g.splicer.stamp(resp, g.env)
		},
		ErrorHandler: func(w http.ResponseWriter, r *http.Request, err error) {
			g.proxyError(w, r, upstream, err)
		},
	}
}

// newPublicProxy forwards a browser route: no key headers, and the answer
// (HTML or a redirect) passes through unspliced, once its environment checks out.
func (g *Gateway) newPublicProxy(upstream string, target *url.URL, rt http.RoundTripper) *httputil.ReverseProxy {
	if g.metrics != nil {
		rt = g.metrics.instrumentUpstream(upstream, rt)
	}
	return &httputil.ReverseProxy{
		Rewrite:    func(pr *httputil.ProxyRequest) { g.rewrite(pr, target) },
		Transport:  rt,
		BufferPool: bufferPool,
		ModifyResponse: func(resp *http.Response) error {
			if got := resp.Header.Get(environment.Header); got != string(g.env) {
				return fmt.Errorf("%w: environment %q, gateway is %q", errUpstreamAnswer, got, g.env)
			}
			resp.Header.Del(environment.Header)
			g.takeInternalHeaders(resp)
			return nil
		},
		ErrorHandler: func(w http.ResponseWriter, r *http.Request, err error) {
			g.proxyError(w, r, upstream, err)
		},
	}
}

// rewrite points the outbound request at target and replaces every identity
// header a client may have sent with the gateway's own.
func (g *Gateway) rewrite(pr *httputil.ProxyRequest, target *url.URL) {
	pr.SetURL(target)
	c := pr.In.Context().Value(ctxKey{}).(*call)
	h := pr.Out.Header
	for name := range h {
		if strings.HasPrefix(name, "X-Partner-") || strings.HasPrefix(name, "X-Internal-") {
			delete(h, name)
		}
	}
	h.Del("Authorization") // the key stops at the edge
	if c.entry != nil {
		h[partner.HeaderKeyID] = c.entry.IDValue
		h[partner.HeaderGrants] = c.entry.GrantsValue
	}
	h[partner.HeaderInternalToken] = g.token
	h[partner.HeaderRequestID] = []string{c.requestID}
}

// takeInternalHeaders records a service's error code for the log line and
// removes every X-Internal-* header, and the service's X-Request-Id (the
// gateway set its own).
func (g *Gateway) takeInternalHeaders(resp *http.Response) {
	if code := resp.Header.Get(partner.HeaderErrorCode); code != "" {
		resp.Request.Context().Value(ctxKey{}).(*call).code = code
	}
	for name := range resp.Header {
		if strings.HasPrefix(name, "X-Internal-") {
			delete(resp.Header, name)
		}
	}
	resp.Header.Del(partner.HeaderRequestID)
}

func (g *Gateway) proxyError(w http.ResponseWriter, r *http.Request, upstream string, err error) {
	c := r.Context().Value(ctxKey{}).(*call)
	var tooLarge *http.MaxBytesError
	if errors.As(err, &tooLarge) {
		c.code = g.refuse(w, jsonbody.TooLarge())
		return
	}
	if r.Context().Err() != nil { // the client went away; nobody to answer
		c.code = "client_gone"
		w.WriteHeader(499)
		return
	}
	g.count(func(m *Metrics) { m.upstreamErrors.WithLabelValues(upstream).Inc() })
	g.log.Error("upstream failed", "upstream", upstream, "err", err, "request_id", c.requestID)
	c.code = g.refuse(w, envelope.Internal())
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
	// The calling origin is not checked (the spec): any web page may call
	// with a key, and read the rate-limit and request-id headers.
	h["Access-Control-Allow-Origin"] = corsAnyOrigin
	h["Access-Control-Expose-Headers"] = corsExposed
	sw := &obs.StatusWriter{ResponseWriter: w}
	keyID, code := g.serve(sw, r, requestID)
	if r.URL.Path == "/health" {
		return // probes every few seconds would drown the log
	}
	g.log.LogAttrs(r.Context(), slog.LevelInfo, "request",
		slog.String("method", r.Method),
		slog.String("route", r.Pattern),
		slog.Int("status", sw.Status()),
		slog.String("code", code),
		slog.Float64("duration_ms", float64(time.Since(start).Microseconds())/1000),
		slog.String("key_id", keyID),
		slog.String("request_id", requestID),
		slog.String("trace_id", obs.TraceID(r.Context())),
	)
}

// serve applies the checks in the contract's order and forwards. It returns
// the key id once known and the wire code of a refusal.
func (g *Gateway) serve(w http.ResponseWriter, r *http.Request, requestID string) (keyID, code string) {
	path := r.URL.Path
	if r.Method == http.MethodOptions && r.Header.Get("Access-Control-Request-Method") != "" && g.routes[path] != nil {
		// A browser's CORS preflight for an endpoint: no key is sent with it.
		r.Pattern = "OPTIONS (preflight)"
		h := w.Header()
		h["Access-Control-Allow-Methods"] = corsMethods
		h["Access-Control-Allow-Headers"] = corsHeaders
		h["Access-Control-Max-Age"] = corsMaxAge
		w.WriteHeader(http.StatusNoContent)
		return "", ""
	}
	if path == "/health" && r.Method == http.MethodGet {
		r.Pattern = "GET /health"
		serve.Health(w, r)
		return "", ""
	}
	if path != "/v1" && !strings.HasPrefix(path, "/v1/") {
		if g.docs != nil && g.docs.Handle(w, r) {
			return "", ""
		}
		if pr := g.public[r.Method+" "+path]; pr != nil {
			r.Pattern = pr.pattern
			c := &call{requestID: requestID}
			pr.proxy.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), ctxKey{}, c)))
			return "", c.code
		}
		return "", g.refuse(w, envelope.NotFound())
	}
	keys := g.keys.Current()
	if keys.Len() == 0 {
		return "", g.refuse(w, envelope.New(http.StatusNotFound, envelope.CodeNotConfigured, "This deployment has no partner keys configured."))
	}
	rt := g.routes[path][r.Method]
	if rt == nil {
		return "", g.refuse(w, envelope.NotFound())
	}
	r.Pattern = rt.pattern

	entry, ok := g.authenticate(keys, r.Header.Get("Authorization"))
	if !ok {
		w.Header().Set("WWW-Authenticate", `Bearer realm="partner-api"`)
		return "", g.refuse(w, envelope.Unauthorized())
	}

	d := g.limiter.Allow(r.Context(), entry.ID, entry.RatePerSecond)
	h := w.Header()
	h["Ratelimit-Policy"] = entry.PolicyValue
	h["Ratelimit"] = []string{d.RateLimitHeader()}
	if !d.Allowed {
		h["Retry-After"] = []string{d.RetryAfterHeader()}
		return entry.ID, g.refuse(w, envelope.New(http.StatusTooManyRequests, envelope.CodeRateLimited, "Too many requests for this key; retry after the time in Retry-After."))
	}

	if rt.Product != "" && !entry.HasProduct(rt.Product) {
		g.count(func(m *Metrics) { m.refusedProduct.Inc() })
		return entry.ID, g.refuse(w, envelope.New(http.StatusForbidden, envelope.CodePermissionDenied, "This key does not carry the "+rt.Product+" product."))
	}

	if r.Method == http.MethodPost {
		if !jsonbody.IsJSON(r.Header.Get("Content-Type")) {
			return entry.ID, g.refuse(w, jsonbody.ErrContentType)
		}
		if r.ContentLength > jsonbody.MaxBytes {
			return entry.ID, g.refuse(w, jsonbody.TooLarge())
		}
		if r.ContentLength < 0 { // chunked: cap it as it streams
			r.Body = http.MaxBytesReader(w, r.Body, jsonbody.MaxBytes)
		}
	}

	c := &call{entry: entry, requestID: requestID}
	rt.proxy.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), ctxKey{}, c)))
	return entry.ID, c.code
}

// authenticate finds the key of an Authorization header. Every failure looks
// the same on the wire; only the metric knows the reason.
func (g *Gateway) authenticate(keys *apikey.Set, header string) (*apikey.Entry, bool) {
	if header == "" {
		g.count(func(m *Metrics) { m.refusedMissing.Inc() })
		return nil, false
	}
	key, ok := apikey.FromAuthorization(header)
	if !ok {
		g.count(func(m *Metrics) { m.refusedMalformed.Inc() })
		return nil, false
	}
	entry, ok := keys.Lookup(key)
	if !ok {
		g.count(func(m *Metrics) { m.refusedUnknown.Inc() })
		return nil, false
	}
	return entry, true
}

func (g *Gateway) count(f func(*Metrics)) {
	if g.metrics != nil {
		f(g.metrics)
	}
}

// refuse answers with the envelope, environment first, and returns the code.
func (g *Gateway) refuse(w http.ResponseWriter, e *envelope.Error) string {
	envelope.Write(w, string(g.env), e)
	return e.Code
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

// CORS header values, shared by every answer (never modified).
var (
	corsAnyOrigin = []string{"*"}
	corsExposed   = []string{"RateLimit, RateLimit-Policy, Retry-After, X-Request-Id, Idempotent-Replayed"}
	corsMethods   = []string{"GET, POST"}
	corsHeaders   = []string{"Authorization, Content-Type, Idempotency-Key, X-Request-Id, traceparent"}
	corsMaxAge    = []string{"600"}
)

// bufferPool recycles the proxy's 32 KiB copy buffers through a channel:
// unlike sync.Pool, putting a []byte back costs no allocation.
var bufferPool = &chanPool{ch: make(chan []byte, 512)}

type chanPool struct{ ch chan []byte }

func (p *chanPool) Get() []byte {
	select {
	case b := <-p.ch:
		return b
	default:
		return make([]byte, 32<<10)
	}
}

func (p *chanPool) Put(b []byte) {
	select {
	case p.ch <- b:
	default:
	}
}
