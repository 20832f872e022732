package edge

import (
	"context"
	"errors"
	"net/http"
	"net/http/httputil"
	"net/url"
	"strings"

	"github.com/partnerpay/api/pkg/envelope"
	"github.com/partnerpay/api/pkg/partner"
)

// newProxy forwards to one upstream. A keyed route's answer gets
// "environment" spliced in first; a public (browser) route's answer — a
// page or a redirect — passes through as the service made it. Both are
// refused unless the service says it is in the gateway's environment.
func (g *Gateway) newProxy(upstream string, target *url.URL, rt http.RoundTripper, public bool) *httputil.ReverseProxy {
	if g.metrics != nil {
		rt = g.metrics.instrumentUpstream(upstream, rt)
	}
	return &httputil.ReverseProxy{
		Rewrite:    func(pr *httputil.ProxyRequest) { g.rewrite(pr, target) },
		Transport:  rt,
		BufferPool: bufferPool,
		ModifyResponse: func(resp *http.Response) error {
			if err := checkEnvironment(resp, g.env); err != nil {
				return err
			}
			g.takeInternalHeaders(resp)
			if public {
				return nil
			}
			return g.splicer.stamp(resp)
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
	inMemoryBody(pr)
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
		c.code = g.refuse(w, envelope.TooLarge())
		return
	}
	if c.client.Err() != nil { // the client went away: nobody reads this, but the log line and metrics count it
		c.code = "client_gone"
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

// bufferPool recycles the proxy's copy buffers through a channel: unlike
// sync.Pool, putting a []byte back costs no allocation. 8 KiB, not
// ReverseProxy's 32: a service's answer is a few hundred bytes to a few KiB
// (a longer one takes more reads), and at 256 connections the difference is
// 6 MiB of the gateway's memory.
var bufferPool = &chanPool{ch: make(chan []byte, 512)}

const copyBuffer = 8 << 10

type chanPool struct{ ch chan []byte }

func (p *chanPool) Get() []byte {
	select {
	case b := <-p.ch:
		return b
	default:
		return make([]byte, copyBuffer)
	}
}

func (p *chanPool) Put(b []byte) {
	select {
	case p.ch <- b:
	default:
	}
}
