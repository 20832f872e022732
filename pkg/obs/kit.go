package obs

import (
	"context"
	"net/http"
	"sync/atomic"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/partnerpay/api/pkg/environment"
)

// Kit is the observability of one binary: its metrics registry, the HTTP
// server metrics, and tracing.
type Kit struct {
	service  string
	Registry *prometheus.Registry
	HTTP     *HTTPMetrics
	Tracing  *Tracing
	notReady atomic.Bool
}

// NewKit sets up metrics and tracing for service.
func NewKit(ctx context.Context, service string, env environment.Name, getenv func(string) string) (*Kit, error) {
	tr, err := NewTracing(ctx, service, env, getenv)
	if err != nil {
		return nil, err
	}
	reg := NewRegistry(service, env)
	return &Kit{service: service, Registry: reg, HTTP: NewHTTPMetrics(reg), Tracing: tr}, nil
}

// Serve wraps a binary's main handler: a server span continuing the caller's
// trace, then the request metrics.
func (k *Kit) Serve(h http.Handler) http.Handler {
	return k.Tracing.Handler(k.HTTP.Middleware(h), k.service)
}

// Admin is the admin address's handler: /metrics, /health and /ready.
func (k *Kit) Admin() http.Handler { return AdminHandler(k.Registry, &k.notReady) }

// SetReady turns the readiness check on or off (off while shutting down).
func (k *Kit) SetReady(ready bool) { k.notReady.Store(!ready) }

// Shutdown flushes what tracing has not exported yet.
func (k *Kit) Shutdown(ctx context.Context) error { return k.Tracing.Shutdown(ctx) }
