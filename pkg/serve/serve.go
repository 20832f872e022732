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
	}
}

// Logger returns the JSON logger every binary uses.
func Logger(w io.Writer, service string) *slog.Logger {
	return slog.New(slog.NewJSONHandler(w, &slog.HandlerOptions{Level: slog.LevelInfo})).With("service", service)
}

// Run listens on every server's address, serves until ctx is done or one of
// them fails, then shuts them all down, waiting up to grace for requests in
// flight. The listeners are bound before Run returns control to serving, so a
// port that is taken is reported at once.
func Run(ctx context.Context, log *slog.Logger, grace time.Duration, servers ...*http.Server) error {
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
		go func(s *http.Server, ln net.Listener) {
			if err := s.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
				errc <- fmt.Errorf("serve %s: %w", s.Addr, err)
				return
			}
			errc <- nil
		}(s, listeners[i])
	}
	var first error
	select {
	case <-ctx.Done():
	case first = <-errc:
	}
	log.Info("shutting down")
	sctx, cancel := context.WithTimeout(context.Background(), grace)
	defer cancel()
	for _, s := range servers {
		if err := s.Shutdown(sctx); err != nil && first == nil {
			first = fmt.Errorf("shutdown %s: %w", s.Addr, err)
		}
	}
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

// Env reads one variable with a default.
func Env(getenv func(string) string, name, def string) string {
	if v := getenv(name); v != "" {
		return v
	}
	return def
}
