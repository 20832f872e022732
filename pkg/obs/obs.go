// Package obs is the observability every binary shares: a Prometheus registry
// with build and environment info, HTTP server metrics by route template, and
// the admin handler that serves them.
package obs

import (
	"context"
	"errors"
	"net/http"
	"net/http/pprof"
	"runtime/debug"
	"strconv"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/partnerpay/api/pkg/environment"
)

// Namespace prefixes every metric of the product.
const Namespace = "partnerapi"

// NewRegistry returns a registry with Go and process collectors, plus
// partnerapi_build_info and partnerapi_environment_info for service.
func NewRegistry(service string, env environment.Name) *prometheus.Registry {
	reg := prometheus.NewRegistry()
	reg.MustRegister(
		collectors.NewGoCollector(),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
	)
	version, revision := buildVersion()
	build := prometheus.NewGauge(prometheus.GaugeOpts{
		Namespace:   Namespace,
		Name:        "build_info",
		Help:        "Build of the running binary; always 1.",
		ConstLabels: prometheus.Labels{"service": service, "version": version, "revision": revision, "goversion": goVersion()},
	})
	build.Set(1)
	envInfo := prometheus.NewGauge(prometheus.GaugeOpts{
		Namespace:   Namespace,
		Name:        "environment_info",
		Help:        "Environment derived at boot from the money upstreams; always 1.",
		ConstLabels: prometheus.Labels{"service": service, "environment": string(env)},
	})
	envInfo.Set(1)
	reg.MustRegister(build, envInfo)
	return reg
}

// Version and Revision are stamped at build time (make build, the
// Dockerfile): -ldflags "-X github.com/partnerpay/api/pkg/obs.Version=…
// -X github.com/partnerpay/api/pkg/obs.Revision=…". Unstamped, the Go build
// info's module version and VCS revision are used when there are any.
var Version, Revision string

// BuildVersion is the binary's version and revision, as build_info and the
// start line report them.
func BuildVersion() (version, revision string) { return buildVersion() }

func buildVersion() (version, revision string) {
	version, revision = "devel", "unknown"
	if Version != "" {
		version = Version
	}
	if Revision != "" {
		revision = Revision
	}
	bi, ok := debug.ReadBuildInfo()
	if !ok || (Version != "" && Revision != "") {
		return
	}
	if v := bi.Main.Version; Version == "" && v != "" && v != "(devel)" {
		version = v
	}
	for _, s := range bi.Settings {
		if s.Key == "vcs.revision" && Revision == "" {
			revision = s.Value
		}
	}
	return
}

func goVersion() string {
	if bi, ok := debug.ReadBuildInfo(); ok {
		return bi.GoVersion
	}
	return "unknown"
}

// HTTPMetrics counts and times a server's requests by route template (the
// ServeMux pattern, never the raw path), method and status code.
type HTTPMetrics struct {
	requests *prometheus.CounterVec
	duration *prometheus.HistogramVec
	inFlight prometheus.Gauge
	series   sync.Map // seriesKey → *series: each series' label values resolved once
}

// seriesKey names one series of the request metrics; its values come from
// closed sets (Middleware), so the cache is bounded.
type seriesKey struct {
	route, method string
	code          int
}

type series struct {
	requests prometheus.Counter
	duration prometheus.Observer
}

// seriesOf is k's counter and histogram, found by label values once and
// then by a map lookup: the vectors hash and compare every label value on
// each WithLabelValues.
func (m *HTTPMetrics) seriesOf(k seriesKey) *series {
	if s, ok := m.series.Load(k); ok {
		return s.(*series)
	}
	code := strconv.Itoa(k.code)
	s, _ := m.series.LoadOrStore(k, &series{
		requests: m.requests.WithLabelValues(k.route, k.method, code),
		duration: m.duration.WithLabelValues(k.route, k.method, code),
	})
	return s.(*series)
}

// NewHTTPMetrics registers the HTTP server metrics on reg.
func NewHTTPMetrics(reg prometheus.Registerer) *HTTPMetrics {
	m := &HTTPMetrics{
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: Namespace, Subsystem: "http", Name: "requests_total",
			Help: "HTTP requests answered, by route template, method and status code.",
		}, []string{"route", "method", "code"}),
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Namespace: Namespace, Subsystem: "http", Name: "request_duration_seconds",
			Help:    "Time to answer an HTTP request, by route template, method and status code.",
			Buckets: []float64{.001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5},
		}, []string{"route", "method", "code"}),
		inFlight: prometheus.NewGauge(prometheus.GaugeOpts{
			Namespace: Namespace, Subsystem: "http", Name: "requests_in_flight",
			Help: "HTTP requests being answered.",
		}),
	}
	reg.MustRegister(m.requests, m.duration, m.inFlight)
	return m
}

// Middleware measures next. The route label is the pattern the ServeMux
// matched ("unmatched" when none did), so ids in paths never become labels.
//
// A call whose caller went away before it was answered (its connection
// closed: the caller's timeout, or the gateway's) is code 499 whatever
// the handler wrote below 500, and its server span an error: nobody got
// the answer, so the service's own error rate agrees with its caller's.
// (A creating call still ran to its end and committed its answer for the
// retry; DESIGN §4.)
func (m *HTTPMetrics) Middleware(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		m.inFlight.Inc()
		sw := &StatusWriter{ResponseWriter: w}
		defer func() {
			m.inFlight.Dec()
			route := r.Pattern
			if route == "" {
				route = "unmatched"
			}
			code := sw.Status()
			if code < 500 && errors.Is(r.Context().Err(), context.Canceled) {
				code = StatusCallerGone
				trace.SpanFromContext(r.Context()).SetStatus(codes.Error, "the caller went away before the answer")
			}
			s := m.seriesOf(seriesKey{route, Method(r.Method), code})
			s.requests.Inc()
			s.duration.Observe(time.Since(start).Seconds())
		}()
		next.ServeHTTP(sw, r)
	})
}

// StatusCallerGone is the code a call is counted with when its caller
// went away before it was answered (nginx's 499).
const StatusCallerGone = 499

// Method is the label (and log) form of a request method: one of the
// standard methods, or "other". A client cannot make a series with it.
func Method(m string) string {
	switch m {
	case http.MethodGet, http.MethodHead, http.MethodPost, http.MethodPut, http.MethodPatch,
		http.MethodDelete, http.MethodOptions, http.MethodConnect, http.MethodTrace:
		return m
	}
	return "other"
}

// StatusWriter remembers the status code written through it.
type StatusWriter struct {
	http.ResponseWriter
	status int
}

// WriteHeader records the status: the final one, not an informational
// 1xx a proxied service sent before it (101, a protocol switch, is final).
func (w *StatusWriter) WriteHeader(code int) {
	if w.status == 0 && (code >= 200 || code == http.StatusSwitchingProtocols) {
		w.status = code
	}
	w.ResponseWriter.WriteHeader(code)
}

// Write records an implicit 200.
func (w *StatusWriter) Write(b []byte) (int, error) {
	if w.status == 0 {
		w.status = http.StatusOK
	}
	return w.ResponseWriter.Write(b)
}

// Status is the status written, 200 if none was.
func (w *StatusWriter) Status() int {
	if w.status == 0 {
		return http.StatusOK
	}
	return w.status
}

// Unwrap lets http.ResponseController reach the underlying writer.
func (w *StatusWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// AdminHandler serves, for the admin address, /metrics from reg, /health
// (alive) and /ready (ready for traffic: 503 while ready says otherwise, as
// when the binary drains before it stops or has no writable database).
func AdminHandler(reg *prometheus.Registry, ready func(context.Context) error) http.Handler {
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{Registry: reg}))
	mux.HandleFunc("GET /health", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"ok":true}`))
	})
	// Go's profiler, for SREs, on the admin address only (never the public
	// one): go tool pprof http://<admin>/debug/pprof/profile?seconds=30
	mux.HandleFunc("GET /debug/pprof/", pprof.Index)
	mux.HandleFunc("GET /debug/pprof/cmdline", pprof.Cmdline)
	mux.HandleFunc("GET /debug/pprof/profile", pprof.Profile)
	mux.HandleFunc("GET /debug/pprof/symbol", pprof.Symbol)
	mux.HandleFunc("GET /debug/pprof/trace", pprof.Trace)
	mux.HandleFunc("GET /ready", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		ctx, cancel := context.WithTimeout(r.Context(), 2*time.Second)
		defer cancel()
		if err := ready(ctx); err != nil {
			w.WriteHeader(http.StatusServiceUnavailable)
			_, _ = w.Write([]byte(`{"ready":false,"reason":` + strconv.Quote(err.Error()) + `}`))
			return
		}
		_, _ = w.Write([]byte(`{"ready":true}`))
	})
	return mux
}
