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
	"unicode/utf8"
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

// MaxLogLine is the longest log line a binary writes; MaxLogValue the
// longest string value in one. Whatever a client sends cannot make a log
// line larger: ids are checked before they are logged, errors and values
// are cut, and a line that would still be too long is replaced.
const (
	MaxLogLine  = 4 << 10
	MaxLogValue = 512
	// LogBuffer bounds the log lines a binary holds before they are
	// written (a few thousand request lines).
	LogBuffer = 1 << 20
)

// Logger returns the JSON logger every binary uses: slog's JSONHandler,
// with every string value and error cut to MaxLogValue and every line to
// MaxLogLine, tagged with the service.
func Logger(w io.Writer, service string) *slog.Logger {
	h := slog.NewJSONHandler(&lineCap{w: w}, &slog.HandlerOptions{Level: slog.LevelInfo})
	return slog.New(capped{h}).With("service", service)
}

// capped cuts what a client could make long (a string, an error's text)
// to MaxLogValue before the JSONHandler writes it. It looks at each value
// and copies a record only when one needs cutting, which a request line
// never does: cheaper than a ReplaceAttr, which slog calls for every
// attribute of every line.
type capped struct{ slog.Handler }

func (c capped) Handle(ctx context.Context, r slog.Record) error {
	long := false
	r.Attrs(func(a slog.Attr) bool {
		long = needsCut(a.Value)
		return !long
	})
	if !long {
		return c.Handler.Handle(ctx, r)
	}
	out := slog.NewRecord(r.Time, r.Level, r.Message, r.PC)
	r.Attrs(func(a slog.Attr) bool {
		out.AddAttrs(capAttr(a))
		return true
	})
	return c.Handler.Handle(ctx, out)
}

func (c capped) WithAttrs(as []slog.Attr) slog.Handler {
	out := make([]slog.Attr, len(as))
	for i, a := range as {
		out[i] = capAttr(a)
	}
	return capped{c.Handler.WithAttrs(out)}
}

func (c capped) WithGroup(name string) slog.Handler { return capped{c.Handler.WithGroup(name)} }

func needsCut(v slog.Value) bool {
	switch v.Kind() {
	case slog.KindString:
		return len(v.String()) > MaxLogValue
	case slog.KindAny, slog.KindLogValuer, slog.KindGroup:
		return true // resolved and looked at by capAttr
	}
	return false
}

func capAttr(a slog.Attr) slog.Attr {
	v := a.Value.Resolve()
	switch v.Kind() {
	case slog.KindString:
		if len(v.String()) > MaxLogValue {
			v = slog.StringValue(cut(v.String()))
		}
	case slog.KindAny:
		if err, ok := v.Any().(error); ok {
			v = slog.StringValue(cut(err.Error()))
		}
	case slog.KindGroup:
		g := v.Group()
		out := make([]slog.Attr, len(g))
		for i, ga := range g {
			out[i] = capAttr(ga)
		}
		v = slog.GroupValue(out...)
	}
	return slog.Attr{Key: a.Key, Value: v}
}

func cut(s string) string {
	if len(s) <= MaxLogValue {
		return s
	}
	s = s[:MaxLogValue]
	for len(s) > 0 && !utf8.ValidString(s) {
		s = s[:len(s)-1]
	}
	return s + "…[cut]"
}

// lineCap writes whole log lines, and replaces one over MaxLogLine with a
// line that says so.
type lineCap struct{ w io.Writer }

func (l *lineCap) Write(p []byte) (int, error) {
	if len(p) <= MaxLogLine {
		return l.w.Write(p)
	}
	_, err := fmt.Fprintf(l.w, `{"time":%q,"level":"ERROR","msg":"log line over %d bytes replaced","bytes":%d}`+"\n",
		time.Now().UTC().Format(time.RFC3339Nano), MaxLogLine, len(p))
	return len(p), err
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

// Env reads one variable with a default.
func Env(getenv func(string) string, name, def string) string {
	if v := getenv(name); v != "" {
		return v
	}
	return def
}
