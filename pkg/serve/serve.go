// Package serve runs the HTTP servers of a binary: sensible timeouts, JSON
// logs, graceful shutdown when the context ends (SIGTERM, SIGINT).
package serve

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"time"
)

// NewServer returns an http.Server with timeouts suited to a JSON API: a slow
// or stalled client cannot hold a connection for long.
func NewServer(addr string, h http.Handler, log *slog.Logger) *http.Server {
	return &http.Server{
		Addr:              addr,
		Handler:           h,
		ReadHeaderTimeout: 5 * time.Second,
		ReadTimeout:       15 * time.Second,
		WriteTimeout:      30 * time.Second,
		IdleTimeout:       120 * time.Second,
		MaxHeaderBytes:    64 << 10,
		ErrorLog:          slog.NewLogLogger(log.Handler(), slog.LevelWarn),
		// OPTIONS * reaches the handler, which answers it in the envelope,
		// instead of net/http's bare 200.
		DisableGeneralOptionsHandler: true,
	}
}

// Shutdown is how a binary stops on SIGTERM: its readiness check turns off
// (load balancers stop sending), it keeps serving for Drain, then it stops
// accepting and waits up to Grace for the requests in flight. Grace is
// longer than the binary's longest upstream timeout, so no request in
// flight is cut.
type Shutdown struct {
	Drain, Grace time.Duration
	// NotReady is called when draining starts.
	NotReady func()
}

// Served is a server and, when it serves TLS, its certificate and key.
type Served struct {
	*http.Server
	CertFile, KeyFile string
}

// Run listens on every server's address, serves until ctx is done or one of
// them fails, then shuts them all down (see Shutdown). The listeners are
// bound before serving starts, so a port that is taken is reported at once.
func Run(ctx context.Context, log *slog.Logger, sd Shutdown, servers ...Served) error {
	listeners := make([]net.Listener, 0, len(servers))
	for _, s := range servers {
		ln, err := net.Listen("tcp", s.Addr)
		if err != nil {
			for _, l := range listeners {
				l.Close()
			}
			return fmt.Errorf("listen %s: %w", s.Addr, err)
		}
		listeners = append(listeners, ln)
	}
	errc := make(chan error, len(servers))
	for i, s := range servers {
		log.Info("listening", "addr", listeners[i].Addr().String())
		go func(s Served, ln net.Listener) {
			var err error
			if s.CertFile != "" {
				err = s.ServeTLS(ln, s.CertFile, s.KeyFile)
			} else {
				err = s.Serve(ln)
			}
			if err != nil && !errors.Is(err, http.ErrServerClosed) {
				errc <- fmt.Errorf("serve %s: %w", s.Addr, err)
				return
			}
			errc <- nil
		}(s, listeners[i])
	}
	var first error
	select {
	case <-ctx.Done():
		if sd.NotReady != nil {
			sd.NotReady()
		}
		log.Info("draining: not ready, still serving", "drain", sd.Drain.String(), "grace", sd.Grace.String())
		select {
		case <-time.After(sd.Drain):
		case first = <-errc:
		}
	case first = <-errc:
	}
	log.Info("shutting down: waiting for requests in flight", "grace", sd.Grace.String())
	sctx, cancel := context.WithTimeout(context.Background(), sd.Grace)
	defer cancel()
	for _, s := range servers {
		if err := s.Shutdown(sctx); err != nil && first == nil {
			first = fmt.Errorf("shutdown %s: %w", s.Addr, err)
		}
	}
	log.Info("stopped")
	return first
}

// Health answers GET /health with exactly {"ok":true}.
func Health(w http.ResponseWriter, _ *http.Request) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	_, _ = io.WriteString(w, `{"ok":true}`)
}

// Healthcheck asks http://addr/health and fails unless it answers 200: the
// `healthcheck` subcommand of every binary, so container probes need no curl.
func Healthcheck(addr string) error {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return fmt.Errorf("healthcheck: address %q: %w", addr, err)
	}
	if host == "" || host == "0.0.0.0" || host == "::" {
		host = "127.0.0.1"
	}
	c := &http.Client{Timeout: 2 * time.Second}
	resp, err := c.Get("http://" + net.JoinHostPort(host, port) + "/health")
	if err != nil {
		return fmt.Errorf("healthcheck: %w", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("healthcheck: status %d", resp.StatusCode)
	}
	return nil
}

// Probe GETs url and fails unless it answers 2xx: the healthcheck of a
// container that has no shell or HTTP client of its own (the OTel
// collector's image), run as this binary copied into it (InstallProbe).
func Probe(url string) error {
	c := &http.Client{Timeout: 2 * time.Second}
	resp, err := c.Get(url)
	if err != nil {
		return fmt.Errorf("probe: %w", err)
	}
	resp.Body.Close()
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		return fmt.Errorf("probe: status %d", resp.StatusCode)
	}
	return nil
}

// InstallProbe copies this binary to path (a volume another container
// mounts), so that container can run `<path> probe URL` as its healthcheck.
func InstallProbe(path string) error {
	self, err := os.Executable()
	if err != nil {
		return err
	}
	b, err := os.ReadFile(self)
	if err != nil {
		return err
	}
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, b, 0o755); err != nil {
		return err
	}
	return os.Rename(tmp, path)
}
