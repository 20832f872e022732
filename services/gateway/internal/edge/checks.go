package edge

import (
	"context"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/partnerpay/api/pkg/envelope"
	"github.com/partnerpay/api/pkg/jsonbody"
	"github.com/partnerpay/api/pkg/serve"
	"github.com/partnerpay/api/services/gateway/internal/apikey"
	"github.com/partnerpay/api/services/gateway/internal/reference"
)

// serve applies the edge's checks, then forwards what passes them. It
// returns the key id once known and the wire code of a refusal.
func (g *Gateway) serve(w http.ResponseWriter, r *http.Request, requestID string, start time.Time) (keyID, code string) {
	rt, c, keyID, code := g.admit(w, r, requestID)
	if rt == nil {
		return keyID, code
	}
	g.forward(w, r, rt, c, start)
	return keyID, c.code
}

// admit applies the edge's checks in the contract's order:
//
//	framing a front proxy could read differently (Transfer-Encoding,
//	HTTP/1.0: answered, connection closed)
//	→ CORS preflight, /health, the documents and public routes (no key;
//	  an ambiguous body, 400)
//	→ not_configured → not_found → unauthorized (unknown or expired key)
//	→ ip_not_allowed (the key's allow-list) → rate_limited
//	→ permission_denied (the key's products, then its scope) → an ambiguous body (two Content-Types, a
//	  Content-Encoding: 400) → body: Content-Type, size, read in time
//	→ forward
//
// A request with an ambiguous body has its connection closed after the
// answer, whichever it is.
//
// It returns the route and call of a request to forward; with no route,
// the request was answered here (a refusal's wire code, the key id once
// known). Out of line: see logRequest.
//
//go:noinline
func (g *Gateway) admit(w http.ResponseWriter, r *http.Request, requestID string) (rt *route, c *call, keyID, code string) {
	closeAfter(w, r)
	ambiguous := ambiguity(r)
	if ambiguous != "" {
		w.Header().Set("Connection", "close")
	}
	path := r.URL.Path
	if isPreflight(r) && g.routes[path] != nil {
		preflight(w, r)
		return nil, nil, "", ""
	}
	if path == "/health" && r.Method == http.MethodGet {
		r.Pattern = "GET /health"
		serve.Health(w, r)
		return nil, nil, "", ""
	}
	if path != "/v1" && !strings.HasPrefix(path, "/v1/") {
		if g.docs != nil && g.docs.Handle(w, r) {
			return nil, nil, "", ""
		}
		if pr := g.public[r.Method+" "+path]; pr != nil {
			if ambiguous != "" {
				return nil, nil, "", g.refuse(w, envelope.InvalidRequest(ambiguous))
			}
			r.Pattern = pr.pattern
			return pr, &call{requestID: [1]string{requestID}}, "", ""
		}
		return nil, nil, "", g.refuse(w, envelope.NotFound())
	}
	keys := g.keys.Current()
	if keys.Len() == 0 {
		return nil, nil, "", g.refuse(w, envelope.New(envelope.CodeNotConfigured, "This deployment has no partner keys configured."))
	}
	rt = g.routes[path][r.Method]
	if rt == nil {
		return nil, nil, "", g.refuse(w, envelope.NotFound())
	}
	r.Pattern = rt.pattern

	entry, ok := g.authenticate(keys, r.Header.Get("Authorization"))
	if !ok {
		w.Header().Set("WWW-Authenticate", `Bearer realm="partner-api"`)
		return nil, nil, "", g.refuse(w, envelope.Unauthorized())
	}
	if entry.Allowed != nil {
		if addr, ok := origin(r, g.trusted); !ok || !entry.Allowed.Contains(addr) {
			g.count(func(m *Metrics) { m.refusedAddress.Inc() })
			return nil, nil, entry.ID, g.refuse(w, envelope.New(envelope.CodeIPNotAllowed,
				"This key may not be used from this address: it is limited to the addresses its operator listed."))
		}
	}

	d := g.limiter.Allow(r.Context(), entry.ID, entry.RatePerSecond)
	d.WriteHeaders(w.Header(), entry.PolicyValue)
	if !d.Allowed {
		g.count(func(m *Metrics) { m.limited(entry.ID) })
		return nil, nil, entry.ID, g.refuse(w, envelope.New(envelope.CodeRateLimited, "Too many requests for this key; retry after the time in Retry-After."))
	}

	if rt.Product != "" && !entry.HasProduct(rt.Product) {
		g.count(func(m *Metrics) { m.refusedProduct.Inc() })
		return nil, nil, entry.ID, g.refuse(w, envelope.New(envelope.CodePermissionDenied, "This key does not carry the "+rt.Product+" product."))
	}
	if entry.ReadOnly && rt.Scope != apikey.ScopeRead {
		g.count(func(m *Metrics) { m.refusedScope.Inc() })
		return nil, nil, entry.ID, g.refuse(w, envelope.New(envelope.CodePermissionDenied,
			"This key's scope is read: it reads, and creates or moves nothing. Use a key with the write scope."))
	}

	if ambiguous != "" {
		return nil, nil, entry.ID, g.refuse(w, envelope.InvalidRequest(ambiguous))
	}
	if r.Method == http.MethodPost {
		if !jsonbody.IsJSON(r.Header.Get("Content-Type")) {
			return nil, nil, entry.ID, g.refuse(w, jsonbody.ErrContentType)
		}
		if r.ContentLength > jsonbody.MaxBytes {
			return nil, nil, entry.ID, g.refuse(w, envelope.TooLarge())
		}
		if refusal := readBody(r); refusal != nil {
			w.Header().Set("Connection", "close") // what is left of the body is unread
			return nil, nil, entry.ID, g.refuse(w, refusal)
		}
	}
	return rt, &call{entry: entry, requestID: [1]string{requestID}}, entry.ID, ""
}

// forward answers r, which arrived at start: a reference read from the
// gateway's own catalogue, anything else proxied to its route's upstream
// within the route's timeout.
func (g *Gateway) forward(w http.ResponseWriter, r *http.Request, rt *route, c *call, start time.Time) {
	switch rt.Upstream {
	case UpstreamGateway:
		if r.URL.Path == "/v1/keys/me" {
			k := &c.entry.Key
			g.reads.ServeMe(w, reference.Me{
				KeyID: k.ID, Scope: k.EffectiveScope(), Products: k.Products, Chains: k.Chains, Tokens: k.Tokens,
				RatePerSecond: k.RatePerSecond, MaxExecutionUSD: k.MaxExecutionUSD, AllowedIPs: k.AllowedIPs, ExpiresAt: k.ExpiresAt,
			})
			return
		}
		g.reads.Serve(w, r.URL.Path, c.entry.Key.Grants)
		return
	case UpstreamFeed:
		c.Context = r.Context()
		c.id[0] = strconv.FormatUint(g.calls.Add(1), 36)
		ctx, cancel := context.WithDeadline(r.Context(), start.Add(rt.Timeout))
		defer cancel()
		g.feed.serve(w, r.WithContext(ctx), c)
		return
	}
	c.Context = r.Context()
	c.id[0] = strconv.FormatUint(g.calls.Add(1), 36)
	c.deadline = start.Add(rt.Timeout)
	ctx, cancel := context.WithDeadline(c, c.deadline)
	defer cancel()
	// The call's wait ends at once if the upstream's circuit opens on a
	// hung service meanwhile: on the deadline context the route has anyway,
	// not on a context of its own per call.
	defer rt.proxy.guard.release(cancel)()
	rt.proxy.serve(w, r.WithContext(ctx), c)
}

// closeAfter marks r's connection to be closed once r is answered when a
// front proxy could have framed r differently from net/http (DESIGN §2,
// RFC 9112 §6.1): r carried Transfer-Encoding (net/http frames by it and
// drops a Content-Length sent with it), so nothing framed by a
// Content-Length can ride behind it; or r is HTTP/1.0, whose
// Transfer-Encoding net/http ignores, so a chunked body would be read as
// the next request.
func closeAfter(w http.ResponseWriter, r *http.Request) {
	if len(r.TransferEncoding) > 0 || !r.ProtoAtLeast(1, 1) {
		w.Header().Set("Connection", "close")
	}
}

// ambiguity says what in a request with a body a front proxy could read
// differently from us, or "": two Content-Type headers, or an encoded
// body. Each is refused and the connection closed. A request without a
// body has nothing to misread (GET /health with a Content-Encoding is
// served).
func ambiguity(r *http.Request) string {
	if r.ContentLength == 0 && len(r.TransferEncoding) == 0 {
		return ""
	}
	switch {
	case len(r.Header["Content-Type"]) > 1:
		return "Send one Content-Type header, not several."
	case len(r.Header["Content-Encoding"]) > 0 && !(len(r.Header["Content-Encoding"]) == 1 && r.Header.Get("Content-Encoding") == "identity"):
		return "Request bodies must not be encoded: send them without Content-Encoding."
	}
	return ""
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
	// Refused like an unknown key; only the metric knows. The clock is read
	// only for a key that has an end.
	if !entry.Expires.IsZero() && entry.Expired(time.Now()) {
		g.count(func(m *Metrics) { m.refusedExpired.Inc() })
		return nil, false
	}
	return entry, true
}
