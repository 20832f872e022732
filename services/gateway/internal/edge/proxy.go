package edge

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httputil"
	"net/url"
	"strings"
	"time"

	"github.com/partnerpay/api/pkg/envelope"
	"github.com/partnerpay/api/pkg/obs"
	"github.com/partnerpay/api/pkg/partner"
	"github.com/partnerpay/api/pkg/upstream"
	"github.com/partnerpay/api/services/gateway/internal/apikey"
)

// The forwarding is httputil.ReverseProxy over one tuned http.Transport
// (upstream.Transport): it strips hop-by-hop headers both ways, and
// a client's Forwarded and X-Forwarded-*; re-encodes a query a parser
// could read two ways; adds no User-Agent; passes 1xx answers and
// trailers on; cuts the client's connection when an answer breaks off
// after its header (so a shortened body never looks whole). Around it the
// gateway adds its own rules:
//
//   - Rewrite: the key stops at the edge (Authorization, and every
//     X-Partner-* and X-Internal-* header a client sent, are dropped), and
//     the identity the gateway vouches for is set;
//   - ModifyResponse: an answer from another environment than the
//     gateway's is refused; the service's internal headers are taken off;
//     a keyed route's JSON object gets "environment" spliced in first (a
//     public route's page or redirect passes as the service made it);
//   - ErrorHandler: a failure is 500 internal in the envelope (logged), a
//     body over the limit 413, a client that went away only a log line.

// call is what the gateway knows of a request on its way to a service:
// its key, its request id, the wire code of a failure (for the request
// line), the route's deadline, and the headers the gateway set on the
// answer, held until the service's answer is written (ReverseProxy clears
// the answer's header after a 1xx). It is also the forwarded request's
// context: the client's, with itself as the value of callKey (one
// allocation fewer per request than a context.WithValue over it).
type call struct {
	context.Context               // the client's (without the route's deadline)
	entry           *apikey.Entry // nil on a public route
	id              [1]string     // the call id the service must answer with
	requestID       [1]string
	code            string
	deadline        time.Time   // the route's
	answer          http.Header // the client's answer's header map
	headers         [8]savedHeader
	saved           int
}

// Value is the call itself for callKey, else the client context's value.
func (c *call) Value(key any) any {
	if key == (callKey{}) {
		return c
	}
	return c.Context.Value(key)
}

// savedHeader is one header the gateway set on an answer before forwarding.
type savedHeader struct {
	name   string
	values []string
}

type callKey struct{}

func callOf(ctx context.Context) *call { return ctx.Value(callKey{}).(*call) }

// routeProxy forwards to one upstream.
type routeProxy struct {
	g        *Gateway
	upstream string
	guard    *guarded // the upstream's circuit
	public   bool
	rp       *httputil.ReverseProxy
}

func (g *Gateway) newProxy(upstream string, target *url.URL, rt http.RoundTripper, guard *guarded, public bool) *routeProxy {
	p := &routeProxy{g: g, upstream: upstream, guard: guard, public: public}
	p.rp = &httputil.ReverseProxy{
		Rewrite: func(pr *httputil.ProxyRequest) {
			pr.SetURL(target) // scheme, host, and the upstream URL's path before the request's
			g.outboundHeader(pr.Out.Header, callOf(pr.Out.Context()))
			inMemory(pr)
		},
		Transport:      rt,
		BufferPool:     copyBuffers,
		ModifyResponse: p.modify,
		ErrorHandler: func(w http.ResponseWriter, r *http.Request, err error) {
			c := callOf(r.Context())
			restoreHeaders(w.Header(), c)
			g.proxyError(w, c, upstream, err)
		},
		ErrorLog: slog.NewLogLogger(g.log.Handler(), slog.LevelWarn),
	}
	return p
}

// inMemory gives the outbound request the body the gateway read (readBody)
// in the form net/http knows is in memory. ReverseProxy wraps every body
// in a reader of its own, which makes the transport flush the header
// before the body: two writes to the service per request instead of one.
// The wrapper's purpose (a Close that cannot hang on a body still
// arriving) holds for a body already read. The reader is a fresh one
// (GetBody), not the inbound request's: the transport may still be
// writing an attempt it gave up on from the reader it had (tried, in
// review: under load a service's forged answer then cost the next client
// its answer).
func inMemory(pr *httputil.ProxyRequest) {
	if pr.Out.Body == nil || pr.In.GetBody == nil {
		return
	}
	if b, err := pr.In.GetBody(); err == nil {
		pr.Out.Body = b
	}
}

// copyBuffers are the buffers ReverseProxy copies answers through: 16
// KiB, since the services' answers are a few KiB at most.
var copyBuffers = upstream.NewBufferPool(16 << 10)

// serve forwards r, whose context carries c and the route's deadline.
func (p *routeProxy) serve(w http.ResponseWriter, r *http.Request, c *call) {
	// ReverseProxy clears the answer's header map after passing on a 1xx:
	// the headers the gateway set so far are noted, to be put back then.
	c.answer = w.Header()
	for name, values := range c.answer {
		if c.saved == len(c.headers) {
			break
		}
		c.headers[c.saved] = savedHeader{name, values}
		c.saved++
	}
	p.rp.ServeHTTP(w, r)
}

// modify checks the service's answer and makes it the partner's.
func (p *routeProxy) modify(resp *http.Response) error {
	c := callOf(resp.Request.Context())
	if resp.StatusCode == http.StatusSwitchingProtocols {
		return fmt.Errorf("%w: it switched protocols", errUpstreamAnswer)
	}
	// http.Transport reads answers off a pooled connection in order: a
	// service that sent bytes beyond an answer (a forged second answer, a
	// body after a 204) would have them read as the next request's answer.
	// The call id tells; refusing closes the body unread, and with it the
	// connection.
	if got := resp.Header[partner.HeaderCallID]; len(got) != 1 || got[0] != c.id[0] {
		return fmt.Errorf("%w: it answers another request (call %q, want %q): the connection lost its framing", errUpstreamAnswer, got, c.id[0])
	}
	if err := checkEnvironment(resp, p.g.env); err != nil {
		return err
	}
	takeInternalHeaders(resp, c)
	if !p.public {
		if err := p.g.splicer.stamp(resp); err != nil {
			return err
		}
	}
	restoreHeaders(c.answer, c)
	return nil
}

// restoreHeaders puts back on h, after a 1xx cleared it, the headers the
// gateway set before forwarding.
func restoreHeaders(h http.Header, c *call) {
	if _, ok := h[partner.HeaderRequestID]; ok {
		return // no 1xx came: nothing was cleared
	}
	for _, s := range c.headers[:c.saved] {
		h[s.name] = s.values
	}
}

// outboundHeader makes h, a copy of the client's header already without
// hop-by-hop and forwarding headers, the service's: Authorization (the key
// stops at the edge) and every X-Partner-* and X-Internal-* header a
// client sent are dropped; the gateway's identity headers are set; the
// Idempotency-Key travels as X-Partner-Idempotency-Key, so that the
// transport never resends a POST on its own (partner.HeaderIdempotencyKey).
func (g *Gateway) outboundHeader(h http.Header, c *call) {
	for name := range h {
		if clientMustNotSet(name) {
			delete(h, name)
		}
	}
	if v, ok := h["Idempotency-Key"]; ok {
		delete(h, "Idempotency-Key")
		h[partner.HeaderIdempotencyKey] = v
	}
	if c.entry != nil {
		h[partner.HeaderKeyID] = c.entry.IDValue
		h[partner.HeaderGrants] = c.entry.GrantsValue
	}
	h[partner.HeaderInternalToken] = g.token
	h[partner.HeaderRequestID] = c.requestID[:]
	h[partner.HeaderCallID] = c.id[:]
}

// clientMustNotSet: identity the gateway vouches for, or the key itself.
func clientMustNotSet(name string) bool {
	return name == "Authorization" || strings.HasPrefix(name, "X-Partner-") || strings.HasPrefix(name, "X-Internal-")
}

// takeInternalHeaders records a service's error code for the log line and
// removes every X-Internal-* header, the service's X-Request-Id (the
// gateway set its own) and its Date (net/http writes the gateway's).
func takeInternalHeaders(resp *http.Response, c *call) {
	if code := resp.Header.Get(partner.HeaderErrorCode); code != "" {
		c.code = code
	}
	for name := range resp.Header {
		if strings.HasPrefix(name, "X-Internal-") {
			delete(resp.Header, name)
		}
	}
	delete(resp.Header, partner.HeaderRequestID)
	delete(resp.Header, "Date")
}

// Log codes of an answer that broke off after its header was written.
const (
	codeAnswerCut  = "answer_cut"  // the service's answer ended early; the client's connection is cut
	codeClientGone = "client_gone" // the client went away
)

func (g *Gateway) proxyError(w http.ResponseWriter, c *call, upstream string, err error) {
	var tooLarge *http.MaxBytesError
	if errors.As(err, &tooLarge) {
		c.code = g.refuse(w, envelope.TooLarge())
		return
	}
	if c.Context.Err() != nil { // the client went away: nobody reads this, but the log line and metrics count it
		c.code = codeClientGone
		w.WriteHeader(499)
		return
	}
	g.count(func(m *Metrics) { m.upstreamErrors.WithLabelValues(upstream).Inc() })
	switch {
	case errors.Is(err, errCircuitOpen):
		// Said once, when the circuit opened; every call is not news.
	case errors.Is(err, context.DeadlineExceeded):
		g.log.Error("upstream failed: no answer within the route's timeout", "upstream", upstream, "request_id", c.requestID[0],
			"trace_id", obs.TraceID(c))
	default:
		g.log.Error("upstream failed", "upstream", upstream, "err", err, "request_id", c.requestID[0], "trace_id", obs.TraceID(c))
	}
	c.code = g.refuse(w, envelope.Internal())
}
