// Package upstream is the HTTP client side a proxy reaches its services
// with: the one tuned http.Transport (the gateway's, fiat's to consent, and
// make loadtest's bare reference proxy, so they are tuned alike) and the
// buffers httputil.ReverseProxy copies answers through.
package upstream

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"sync"
	"time"
)

// Options tune Transport.
type Options struct {
	// CAFile, when set, is the PEM bundle that signs the services'
	// certificates (https:// upstreams); the system's pool otherwise.
	CAFile string
	// HeaderTimeout bounds the wait for an answer's header.
	HeaderTimeout time.Duration
	// Dialed, when set, hears of every connection opened, by host:port.
	Dialed func(addr string)
}

// Transport is the one http.Transport a proxy reaches its
// services with (the gateway's, and make loadtest's bare reference, so the
// two are tuned alike): many idle connections per service (Go keeps 2 by
// default, so a busy proxy would dial for most requests), closed before
// the services' own 120 s idle timeout, no transparent compression (a
// body passes as the service wrote it), short dials, HTTP/1.1.
func Transport(o Options) (*http.Transport, error) {
	dialer := &net.Dialer{Timeout: 2 * time.Second, KeepAlive: 30 * time.Second}
	t := &http.Transport{
		Proxy:                 nil,
		DialContext:           dialer.DialContext,
		MaxIdleConns:          1024,
		MaxIdleConnsPerHost:   256,
		IdleConnTimeout:       90 * time.Second,
		ResponseHeaderTimeout: o.HeaderTimeout,
		TLSHandshakeTimeout:   2 * time.Second,
		ExpectContinueTimeout: 0,
		DisableCompression:    true,
		ForceAttemptHTTP2:     false,
	}
	if o.Dialed != nil {
		t.DialContext = func(ctx context.Context, network, addr string) (net.Conn, error) {
			c, err := dialer.DialContext(ctx, network, addr)
			if err == nil {
				o.Dialed(addr)
			}
			return c, err
		}
	}
	if o.CAFile != "" {
		pem, err := os.ReadFile(o.CAFile)
		if err != nil {
			return nil, fmt.Errorf("upstream CA file: %w", err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, errors.New("upstream CA file: no PEM certificate in " + o.CAFile)
		}
		t.TLSClientConfig = &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}
	}
	return t, nil
}

// BufferPool lends httputil.ReverseProxy the buffers it copies answers
// through (it would allocate 32 KiB per request without one).
type BufferPool struct{ pool sync.Pool }

// NewBufferPool returns a pool of size-byte buffers.
func NewBufferPool(size int) *BufferPool {
	return &BufferPool{pool: sync.Pool{New: func() any { b := make([]byte, size); return &b }}}
}

// Get lends a buffer.
func (p *BufferPool) Get() []byte { return *p.pool.Get().(*[]byte) }

// Put takes one back.
func (p *BufferPool) Put(b []byte) { p.pool.Put(&b) }
