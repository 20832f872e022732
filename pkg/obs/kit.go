package obs

import (
	"context"
	"errors"
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
	checks   []ReadinessCheck
}

// ReadinessCheck is one condition of a binary's readiness (a writable
// database); its error says what is missing.
type ReadinessCheck func(context.Context) error

// NewKit sets up metrics and tracing for service.
func NewKit(ctx context.Context, service string, env environment.Name, cfg Config) (*Kit, error) {
	reg := NewRegistry(service, env)
	tr, err := NewTracing(ctx, service, env, cfg, reg)
	if err != nil {
		return nil, err
	}
	return &Kit{service: service, Registry: reg, HTTP: NewHTTPMetrics(reg), Tracing: tr}, nil
}

// Serve wraps a binary's main handler: a server span continuing the caller's
// trace, then the request metrics.
func (k *Kit) Serve(h http.Handler) http.Handler {
	return k.Tracing.Handler(k.HTTP.Middleware(h), k.service)
}

// Admin is the admin address's handler: /metrics, /health and /ready.
func (k *Kit) Admin() http.Handler { return AdminHandler(k.Registry, k.ready) }

// ReadyWhen adds a condition to the readiness check; call it before Admin
// serves.
func (k *Kit) ReadyWhen(c ReadinessCheck) { k.checks = append(k.checks, c) }

func (k *Kit) ready(ctx context.Context) error {
	if k.notReady.Load() {
		return errDraining
	}
	for _, c := range k.checks {
		if err := c(ctx); err != nil {
			return err
		}
	}
	return nil
}

var errDraining = errors.New("draining before shutdown")

// SetReady turns the readiness check on or off (off while shutting down).
func (k *Kit) SetReady(ready bool) { k.notReady.Store(!ready) }

// Shutdown flushes what tracing has not exported yet.
func (k *Kit) Shutdown(ctx context.Context) error { return k.Tracing.Shutdown(ctx) }
