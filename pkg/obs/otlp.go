package obs

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	// It links google.golang.org/grpc into every binary, for its retry's
	// status codes, though it speaks HTTP: open-telemetry/opentelemetry-go#2579.
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
)

// otlpExporter is the official OTLP/HTTP trace exporter (otlptracehttp),
// configured from the OTEL_EXPORTER_OTLP_* variables of the binary's
// configuration (Config), with our count of the spans it sent and those it gave up on.
//
// It takes the exporter variables a deployment sets:
// OTEL_EXPORTER_OTLP_[TRACES_]ENDPOINT, _HEADERS, _TIMEOUT, _COMPRESSION
// (gzip or none), _PROTOCOL (http/protobuf only: a grpc or http/json
// setting is refused at boot rather than exported to in the wrong form),
// _CERTIFICATE, _CLIENT_CERTIFICATE and _CLIENT_KEY (a collector behind
// its own CA, or one that asks for our certificate),
// and checks them at boot (a header's value is never repeated in an
// error: it may be a credential). A batch the collector refuses for the
// moment (429, 502, 503, 504, or no connection) is sent again by the
// exporter's own retry, with backoff and Retry-After, within the timeout.
type otlpExporter struct {
	sdktrace.SpanExporter
	url    string      // the endpoint, for errors (redacted)
	secret string      // the endpoint's password, never in an error
	counts *spanCounts // nil: not counted
}

// spanCounts are the spans this process sent to the collector and those it
// gave up on (the collector unreachable or refusing past the export's
// retries): traces with holes, which an operator should see.
type spanCounts struct{ exported, dropped prometheus.Counter }

func newSpanCounts(reg prometheus.Registerer) *spanCounts {
	c := &spanCounts{
		exported: prometheus.NewCounter(prometheus.CounterOpts{Namespace: Namespace, Subsystem: "trace", Name: "spans_exported_total",
			Help: "Spans sent to the OTLP collector."}),
		dropped: prometheus.NewCounter(prometheus.CounterOpts{Namespace: Namespace, Subsystem: "trace", Name: "spans_dropped_total",
			Help: "Spans given up on: their export failed after its retries (the collector unreachable, refusing or too slow)."}),
	}
	reg.MustRegister(c.exported, c.dropped)
	return c
}

const otlpDefaultTimeout = 10 * time.Second

func newOTLPExporter(cfg Config) (*otlpExporter, error) {
	if p := pick(cfg.TracesProtocol, cfg.Protocol); p != "" && p != "http/protobuf" {
		return nil, fmt.Errorf("OTEL_EXPORTER_OTLP_PROTOCOL: only http/protobuf is spoken, not %q", p)
	}
	// The traces endpoint is used as it is; the general one is a base to
	// which /v1/traces is added.
	endpoint := cfg.TracesEndpoint
	if endpoint == "" {
		endpoint = strings.TrimSuffix(cfg.Endpoint, "/") + "/v1/traces"
	}
	u, err := url.Parse(endpoint)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, errors.New("OTLP endpoint: want an http:// or https:// URL with a host")
	}
	headers := map[string]string{}
	if v := pick(cfg.TracesHeaders, cfg.Headers); v != "" {
		for _, pair := range strings.Split(string(v), ",") {
			k, val, ok := strings.Cut(pair, "=")
			k = strings.TrimSpace(k)
			val, uerr := url.PathUnescape(strings.TrimSpace(val))
			if !ok || k == "" || uerr != nil {
				// The value may be a credential: name neither.
				return nil, errors.New("OTEL_EXPORTER_OTLP_HEADERS: want key=value pairs, comma-separated, values URL-encoded")
			}
			headers[http.CanonicalHeaderKey(k)] = val
		}
	}
	timeout := otlpDefaultTimeout
	if v := pick(cfg.TracesTimeout, cfg.Timeout); v != "" {
		ms, err := strconv.Atoi(v)
		if err != nil || ms <= 0 {
			return nil, fmt.Errorf("OTEL_EXPORTER_OTLP_TIMEOUT: want milliseconds, not %q", v)
		}
		timeout = time.Duration(ms) * time.Millisecond
	}
	compression := otlptracehttp.NoCompression
	switch v := pick(cfg.TracesCompression, cfg.Compression); v {
	case "", "none":
	case "gzip":
		compression = otlptracehttp.GzipCompression
	default:
		return nil, fmt.Errorf("OTEL_EXPORTER_OTLP_COMPRESSION: want gzip or none, not %q", v)
	}
	tlsConfig, err := otlpTLS(cfg)
	if err != nil {
		return nil, err
	}
	// Our own client (the exporter then reads none of the TLS variables
	// itself: otlpTLS does): no redirects, a bounded pool.
	client := &http.Client{
		Transport: &http.Transport{Proxy: http.ProxyFromEnvironment, MaxIdleConnsPerHost: 2, IdleConnTimeout: time.Minute, ForceAttemptHTTP2: true,
			TLSClientConfig: tlsConfig},
		// A collector that redirects is misconfigured; following could send
		// the headers somewhere else.
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}
	exp, err := otlptracehttp.New(context.Background(),
		otlptracehttp.WithEndpointURL(endpoint),
		otlptracehttp.WithHeaders(headers),
		otlptracehttp.WithTimeout(timeout),
		otlptracehttp.WithCompression(compression),
		otlptracehttp.WithHTTPClient(client),
		otlptracehttp.WithRetry(otlptracehttp.RetryConfig{Enabled: true, InitialInterval: 100 * time.Millisecond, MaxInterval: 5 * time.Second, MaxElapsedTime: timeout}),
	)
	if err != nil {
		return nil, errors.New("OTLP exporter: " + redactedError(err, u))
	}
	secret, _ := u.User.Password()
	return &otlpExporter{SpanExporter: exp, url: u.Redacted(), secret: secret}, nil
}

// otlpTLS is the TLS configuration of OTEL_EXPORTER_OTLP_[TRACES_]CERTIFICATE
// (the collector's CA), _CLIENT_CERTIFICATE and _CLIENT_KEY (ours, for
// mutual TLS), as the exporter specification defines them; nil when none
// is set (the system's roots, no client certificate).
func otlpTLS(cfg Config) (*tls.Config, error) {
	ca := pick(cfg.TracesCertificate, cfg.Certificate)
	cert, key := pick(cfg.TracesClientCertificate, cfg.ClientCertificate), pick(cfg.TracesClientKey, cfg.ClientKey)
	if ca == "" && cert == "" && key == "" {
		return nil, nil
	}
	c := &tls.Config{MinVersion: tls.VersionTLS12}
	if ca != "" {
		pem, err := os.ReadFile(ca)
		if err != nil {
			return nil, fmt.Errorf("OTEL_EXPORTER_OTLP_CERTIFICATE: %w", err)
		}
		c.RootCAs = x509.NewCertPool()
		if !c.RootCAs.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("OTEL_EXPORTER_OTLP_CERTIFICATE: %s holds no PEM certificate", ca)
		}
	}
	if (cert == "") != (key == "") {
		return nil, errors.New("OTEL_EXPORTER_OTLP_CLIENT_CERTIFICATE and OTEL_EXPORTER_OTLP_CLIENT_KEY: set both, or neither")
	}
	if cert != "" {
		pair, err := tls.LoadX509KeyPair(cert, key)
		if err != nil {
			// The key file's content never reaches the message.
			return nil, fmt.Errorf("OTEL_EXPORTER_OTLP_CLIENT_CERTIFICATE and _CLIENT_KEY (%s, %s) do not load as a key pair", cert, key)
		}
		c.Certificates = []tls.Certificate{pair}
	}
	return c, nil
}

// ExportSpans sends one batch (the batch span processor calls it, one batch
// at a time) and counts its spans as sent or given up on.
func (e *otlpExporter) ExportSpans(ctx context.Context, spans []sdktrace.ReadOnlySpan) error {
	if len(spans) == 0 {
		return nil
	}
	err := e.SpanExporter.ExportSpans(ctx, spans)
	if e.counts != nil {
		if err != nil {
			e.counts.dropped.Add(float64(len(spans)))
		} else {
			e.counts.exported.Add(float64(len(spans)))
		}
	}
	if err != nil {
		msg := err.Error()
		if e.secret != "" {
			msg = strings.ReplaceAll(msg, e.secret, "xxxxx")
		}
		return fmt.Errorf("traces export to %s: %s", e.url, msg)
	}
	return nil
}

// redactedError is err's text without u's password.
func redactedError(err error, u *url.URL) string {
	msg := err.Error()
	if p, ok := u.User.Password(); ok && p != "" {
		msg = strings.ReplaceAll(msg, p, "xxxxx")
	}
	return msg
}
