package edge

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"sync"

	"github.com/partnerpay/api/pkg/envelope"
	"github.com/partnerpay/api/pkg/partner"
)

// relay forwards a request to one upstream and writes its answer. It is
// httputil.ReverseProxy cut to the gateway's one case — HTTP/1.1 to one of
// our services, an answer with no trailers and no protocol switch — without
// its per-request copies: a cloned request and header map, a client trace,
// every answer header added value by value (about 5 % of the gateway's CPU
// under load). It keeps ReverseProxy's rules: hop-by-hop headers (and those
// Connection names) go neither way, nor do a client's Forwarded and
// X-Forwarded-* headers; a query that could be read two ways is
// re-encoded; no User-Agent is added; an answer that breaks off after its
// header aborts the client's connection, so a cut body never looks whole.
//
// The upstream URL's path, if it has one, goes before the request's.
//
// A keyed route's answer gets "environment" spliced in first; a public
// (browser) route's answer — a page or a redirect — passes through as the
// service made it. Both are refused unless the service says it is in the
// gateway's environment.
type relay struct {
	g            *Gateway
	upstream     string
	scheme, host string
	prefix       string // the upstream URL's path, before the request's
	rt           http.RoundTripper
	public       bool
}

func (g *Gateway) newRelay(upstream string, target *url.URL, rt http.RoundTripper, public bool) *relay {
	if g.metrics != nil {
		rt = g.metrics.instrumentUpstream(upstream, rt)
	}
	return &relay{g: g, upstream: upstream, scheme: target.Scheme, host: target.Host,
		prefix: strings.TrimSuffix(target.Path, "/"), rt: rt, public: public}
}

// serve forwards in, with c its call, under ctx: in's context with the
// route's deadline.
func (p *relay) serve(ctx context.Context, w http.ResponseWriter, in *http.Request, c *call) {
	resp, err := p.rt.RoundTrip(p.outbound(ctx, in, c))
	p.answer(w, c, resp, err)
}

// outbound is the request to the service. Out of line: see logRequest.
//
//go:noinline
func (p *relay) outbound(ctx context.Context, in *http.Request, c *call) *http.Request {
	out := (&http.Request{
		Method:     in.Method,
		URL:        &url.URL{Scheme: p.scheme, Host: p.host, Path: p.prefix + in.URL.Path, RawQuery: cleanQuery(in.URL.RawQuery)},
		Proto:      "HTTP/1.1",
		ProtoMajor: 1,
		ProtoMinor: 1,
		Header:     p.g.outboundHeader(in.Header, c),
		Host:       p.host,
	}).WithContext(ctx)
	if in.ContentLength != 0 { // a GET's http.NoBody is no body at all
		out.Body, out.GetBody, out.ContentLength = in.Body, in.GetBody, in.ContentLength
	}
	return out
}

// answer writes the service's answer, or the gateway's refusal of it.
// Out of line: see logRequest.
//
//go:noinline
func (p *relay) answer(w http.ResponseWriter, c *call, resp *http.Response, err error) {
	if err == nil {
		if err = p.check(resp, c); err != nil {
			resp.Body.Close()
		}
	}
	if err != nil {
		p.g.proxyError(w, c, p.upstream, err)
		return
	}
	dropListed(resp.Header, resp.Header["Connection"])
	h := w.Header()
	for name, values := range resp.Header {
		if hopByHop(name) {
			continue
		}
		if prev, ok := h[name]; ok {
			h[name] = append(prev, values...)
		} else {
			h[name] = values // the answer's own slice: nothing else holds it
		}
	}
	w.WriteHeader(resp.StatusCode)
	c.out.w = w
	if code := copyAnswer(&c.out, resp.Body); code != "" {
		c.code = code
		if code == codeAnswerCut {
			p.g.count(func(m *Metrics) { m.upstreamErrors.WithLabelValues(p.upstream).Inc() })
			p.g.log.Error("upstream answer broke off", "upstream", p.upstream, "request_id", c.requestID)
		}
	}
	resp.Body.Close()
}

// Log codes of an answer that broke off after its header was written.
const (
	codeAnswerCut  = "answer_cut"  // the service's answer ended early; the client's connection is cut
	codeClientGone = "client_gone" // the client went away
)

// copyAnswer writes an answer's body to the client (copyBuffered) and says
// which side broke off, if one did.
func copyAnswer(w *clientWriter, body io.Reader) string {
	_, err := copyBuffered(w, body)
	switch {
	case w.err != nil:
		return codeClientGone
	case err != nil:
		return codeAnswerCut
	}
	return ""
}

// clientWriter is the client's side of a copy: it keeps the client's write
// error, so a copy's error can be told apart from the service's.
type clientWriter struct {
	w   io.Writer
	err error
}

func (c *clientWriter) Write(p []byte) (int, error) {
	n, err := c.w.Write(p)
	if err != nil && c.err == nil {
		c.err = err
	}
	return n, err
}

func (c *clientWriter) WriteString(s string) (int, error) {
	n, err := io.WriteString(c.w, s)
	if err != nil && c.err == nil {
		c.err = err
	}
	return n, err
}

// copyBuffered writes r to w: by r's WriteTo when it has one (an upstream
// body writes from its connection's buffer: no copy buffer), else through
// a pooled buffer. 8 KiB, not ReverseProxy's 32: an answer that needs one
// (a chunked one, over 2 KiB) is a few KiB.
func copyBuffered(w io.Writer, r io.Reader) (int64, error) {
	if wt, ok := r.(io.WriterTo); ok {
		return wt.WriteTo(w)
	}
	buf := copyBuffers.Get().(*[]byte)
	defer copyBuffers.Put(buf)
	return io.CopyBuffer(w, r, *buf)
}

var copyBuffers = sync.Pool{New: func() any { b := make([]byte, 8<<10); return &b }}

// check refuses an answer the gateway cannot vouch for, and makes the
// partner's answer of the service's.
func (p *relay) check(resp *http.Response, c *call) error {
	if resp.StatusCode == http.StatusSwitchingProtocols {
		return fmt.Errorf("%w: it switched protocols", errUpstreamAnswer)
	}
	if err := checkEnvironment(resp, p.g.env); err != nil {
		return err
	}
	takeInternalHeaders(resp, c)
	if p.public {
		return nil
	}
	return p.g.splicer.stamp(resp)
}

// outboundHeader is in's header for the upstream: hop-by-hop headers,
// Forwarded and X-Forwarded-*, Authorization (the key stops at the edge)
// and every X-Partner-* and X-Internal-* header a client sent are dropped;
// the gateway's identity headers are set. The values are in's own slices:
// nothing changes them.
func (g *Gateway) outboundHeader(in http.Header, c *call) http.Header {
	h := make(http.Header, len(in)+5)
	for name, values := range in {
		if hopByHop(name) || clientMustNotSet(name) {
			continue
		}
		h[name] = values
	}
	dropListed(h, in["Connection"])
	if c.entry != nil {
		h[partner.HeaderKeyID] = c.entry.IDValue
		h[partner.HeaderGrants] = c.entry.GrantsValue
	}
	h[partner.HeaderInternalToken] = g.token
	h[partner.HeaderRequestID] = []string{c.requestID}
	if _, ok := h["User-Agent"]; !ok {
		h["User-Agent"] = noUserAgent // net/http would add its own
	}
	return h
}

var noUserAgent = []string{""}

// hopByHop: a header about one connection, never forwarded (RFC 9110 §7.6.1).
func hopByHop(name string) bool {
	switch name {
	case "Connection", "Proxy-Connection", "Keep-Alive", "Proxy-Authenticate", "Proxy-Authorization",
		"Te", "Trailer", "Transfer-Encoding", "Upgrade":
		return true
	}
	return false
}

// dropListed removes from h the headers a Connection header (its values)
// names as hop-by-hop. Most requests have none: nothing to do.
func dropListed(h http.Header, connection []string) {
	for _, v := range connection {
		for token := range strings.SplitSeq(v, ",") {
			delete(h, http.CanonicalHeaderKey(strings.TrimSpace(token)))
		}
	}
}

// clientMustNotSet: identity the gateway vouches for, or the key itself.
func clientMustNotSet(name string) bool {
	switch name {
	case "Authorization", "Forwarded", "X-Forwarded-For", "X-Forwarded-Host", "X-Forwarded-Proto":
		return true
	}
	return strings.HasPrefix(name, "X-Partner-") || strings.HasPrefix(name, "X-Internal-")
}

// cleanQuery re-encodes a query that parsers could split differently (a
// ';', a bad escape), as ReverseProxy does; the usual one passes as it is.
func cleanQuery(q string) string {
	for i := 0; i < len(q); i++ {
		switch q[i] {
		case ';':
			return reencode(q)
		case '%':
			if i+2 >= len(q) || !isHex(q[i+1]) || !isHex(q[i+2]) {
				return reencode(q)
			}
			i += 2
		}
	}
	return q
}

func reencode(q string) string {
	v, _ := url.ParseQuery(q)
	return v.Encode()
}

func isHex(c byte) bool {
	return '0' <= c && c <= '9' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F'
}

// takeInternalHeaders records a service's error code for the log line and
// removes every X-Internal-* header, the service's X-Request-Id (the
// gateway set its own) and its Date: net/http writes the gateway's own
// (the same second, from the edge's clock) outside the header map, so a
// usual answer's header stays within a small map's 8 slots, and neither
// that map nor net/http's copy of it at WriteHeader grows to a table.
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

func (g *Gateway) proxyError(w http.ResponseWriter, c *call, upstream string, err error) {
	var tooLarge *http.MaxBytesError
	if errors.As(err, &tooLarge) {
		c.code = g.refuse(w, envelope.TooLarge())
		return
	}
	if c.client.Err() != nil { // the client went away: nobody reads this, but the log line and metrics count it
		c.code = codeClientGone
		w.WriteHeader(499)
		return
	}
	g.count(func(m *Metrics) { m.upstreamErrors.WithLabelValues(upstream).Inc() })
	switch {
	case errors.Is(err, errCircuitOpen):
		// Said once, when the circuit opened; every call is not news.
	case errors.Is(err, context.DeadlineExceeded):
		g.log.Error("upstream failed: no answer within the route's timeout", "upstream", upstream, "request_id", c.requestID)
	default:
		g.log.Error("upstream failed", "upstream", upstream, "err", err, "request_id", c.requestID)
	}
	c.code = g.refuse(w, envelope.Internal())
}
