package edge

import (
	"context"
	"net/http"
	"strings"

	"github.com/partnerpay/api/pkg/envelope"
	"github.com/partnerpay/api/pkg/jsonbody"
	"github.com/partnerpay/api/pkg/serve"
	"github.com/partnerpay/api/services/gateway/internal/apikey"
)

// serve applies the edge's checks, then forwards what passes them. It
// returns the key id once known and the wire code of a refusal.
func (g *Gateway) serve(w http.ResponseWriter, r *http.Request, requestID string) (keyID, code string) {
	rt, c, keyID, code := g.admit(w, r, requestID)
	if rt == nil {
		return keyID, code
	}
	g.forward(w, r, rt, c)
	return keyID, c.code
}

// admit applies the edge's checks in the contract's order:
//
//	framing a front proxy could read differently (400, connection closed)
//	→ CORS preflight, /health, the documents and public routes (no key)
//	→ not_configured → not_found → unauthorized → rate_limited
//	→ permission_denied → body: Content-Type, size, read in time → forward
//
// It returns the route and call of a request to forward; with no route,
// the request was answered here (a refusal's wire code, the key id once
// known). Out of line: see logRequest.
//
//go:noinline
func (g *Gateway) admit(w http.ResponseWriter, r *http.Request, requestID string) (rt *route, c *call, keyID, code string) {
	if msg := ambiguity(r); msg != "" {
		w.Header().Set("Connection", "close")
		return nil, nil, "", g.refuse(w, envelope.InvalidRequest(msg))
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
			r.Pattern = pr.pattern
			return pr, &call{requestID: requestID}, "", ""
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
	return rt, &call{entry: entry, requestID: requestID}, entry.ID, ""
}

// forward proxies r to its route's upstream within the route's timeout.
func (g *Gateway) forward(w http.ResponseWriter, r *http.Request, rt *route, c *call) {
	ctx, cancel := bound(r, rt, c)
	defer cancel()
	rt.proxy.serve(ctx, w, r, c)
}

// bound is r's context with the route's deadline: the outbound request's.
// c goes to the relay as it is, not in a context, and r is not copied.
// Out of line: see logRequest.
//
//go:noinline
func bound(r *http.Request, rt *route, c *call) (context.Context, context.CancelFunc) {
	c.client = r.Context()
	return context.WithTimeout(c.client, rt.Timeout)
}

// ambiguity says what in r a front proxy could read differently from us,
// or "": both Content-Length and Transfer-Encoding (seen by Framing, since
// Go hides it), two Content-Type headers, or an encoded body. Each is
// refused and the connection closed.
func ambiguity(r *http.Request) string {
	switch {
	case ambiguousFraming(r):
		return "Send Content-Length or Transfer-Encoding, not both."
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
	return entry, true
}
