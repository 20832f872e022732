package serve

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log"
	"log/slog"
	"net/http"
	"os"
	"os/signal"
	"reflect"
	"strings"
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.opentelemetry.io/otel"

	"github.com/partnerpay/api/pkg/config"
	"github.com/partnerpay/api/pkg/environment"
	"github.com/partnerpay/api/pkg/obs"
)

// Binary is what a service binary says of itself.
type Binary struct {
	Name string
	// Addr and AdminAddr are where it listens unless <NAME>_ADDR and
	// <NAME>_ADMIN_ADDR say otherwise (/metrics, /health and /ready are on
	// the admin address).
	Addr, AdminAddr string
	// Environment, when set, is fixed rather than derived (the sandbox bank
	// is a sandbox by definition).
	Environment environment.Name
	// Grace is how long a stopping binary waits for requests in flight
	// (SHUTDOWN_GRACE overrides it): above its longest upstream timeout.
	Grace time.Duration
}

// Config is the serving part of every binary's configuration, the field
// Serve of its config struct.
type Config struct {
	// Draining: how long a stopping binary keeps serving, not ready.
	Drain time.Duration `env:"SHUTDOWN_DRAIN, default=5s"`
	// How long a stopping binary waits for requests in flight (the
	// binary's Grace when unset).
	Grace time.Duration `env:"SHUTDOWN_GRACE"`
	// How long a client has to send a whole request, body included.
	ReadTimeout time.Duration `env:"HTTP_READ_TIMEOUT, default=15s"`
	// The main address's certificate and key (PEM): the gateway then
	// reaches the service over https.
	CertFile string `env:"TLS_CERT_FILE"`
	KeyFile  string `env:"TLS_KEY_FILE"`
	// The money upstreams the environment is derived from.
	Upstreams environment.Config
	Tracing   obs.Config
}

// Validate checks the serving settings.
func (c Config) Validate() error {
	var errs []error
	if (c.CertFile == "") != (c.KeyFile == "") {
		errs = append(errs, errors.New("set both TLS_CERT_FILE and TLS_KEY_FILE, or neither"))
	}
	return errors.Join(append(errs, config.NotNegative("SHUTDOWN_DRAIN", c.Drain), config.NotNegative("SHUTDOWN_GRACE", c.Grace),
		config.Positive("HTTP_READ_TIMEOUT", c.ReadTimeout))...)
}

// Settings is a binary's config struct: Serving is its serving part,
// Listening where it listens.
type Settings interface {
	Serving() *Config
	Listening() *Listen
}

// Listen is where a binary listens: <NAME>_ADDR and <NAME>_ADMIN_ADDR, the
// Binary's Addr and AdminAddr by default. A binary's config struct has it
// as a field prefixed with its name, which Start checks:
//
//	Listen serve.Listen `env:", prefix=PAYOUT_"`
type Listen struct {
	Addr      string `env:"ADDR"`
	AdminAddr string `env:"ADMIN_ADDR"`
}

// Setup is what a service binary's run starts from, made from its config.
type Setup struct {
	Log  *slog.Logger
	Env  environment.Name
	Kit  *obs.Kit
	addr string
	// admin is the admin address (/metrics, /health, /ready).
	admin  string
	serve  Config
	binary Binary
}

// Main runs binary b: `<name> healthcheck` probes the binary's address and
// exits; with no argument, it loads cfg (the binary's config struct) from
// the environment, once, and run serves until SIGINT or SIGTERM. An error
// is printed and exits 1.
func Main[S Settings](b Binary, cfg S, run func(ctx context.Context, s *Setup, cfg S) error) {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := Start(ctx, b, os.Args[1:], os.Getenv, os.Stderr, cfg, run); err != nil {
		fmt.Fprintln(os.Stderr, b.Name+":", err)
		stop()
		os.Exit(1)
	}
}

// Start is Main with its inputs injected.
func Start[S Settings](ctx context.Context, b Binary, args []string, getenv func(string) string, stderr io.Writer, cfg S, run func(ctx context.Context, s *Setup, cfg S) error) error {
	if len(args) > 0 {
		switch {
		case args[0] == "probe" && len(args) == 2:
			return Probe(args[1])
		case args[0] == "install-probe" && len(args) == 2:
			return InstallProbe(args[1])
		case args[0] != "healthcheck" || len(args) != 1:
			return fmt.Errorf("unknown command %q (want healthcheck, probe URL, install-probe PATH, or nothing to serve)", strings.Join(args, " "))
		}
	}
	if err := listenPrefixed(cfg, strings.ToUpper(b.Name)+"_"); err != nil {
		return err
	}
	l := cfg.Listening()
	l.Addr, l.AdminAddr = b.Addr, b.AdminAddr
	if err := config.Load(getenv, cfg); err != nil {
		return err
	}
	if len(args) > 0 {
		return Healthcheck(l.Addr)
	}
	sc := cfg.Serving()
	s := &Setup{addr: l.Addr, admin: l.AdminAddr, serve: *sc, binary: b, Env: b.Environment}
	var err error
	if s.Env == "" {
		if s.Env, err = sc.Upstreams.Derive(); err != nil {
			return err
		}
	}
	if s.Env == environment.Production {
		if name, ok := config.KnownDefaultIn(cfg); ok {
			return fmt.Errorf("%s is a known public default; production needs a secret of its own (openssl rand -hex 32)", name)
		}
	}
	if s.Kit, err = obs.NewKit(ctx, b.Name, s.Env, sc.Tracing); err != nil {
		return err
	}
	defer s.Kit.Shutdown(context.Background())
	// Log lines leave through a buffer, so a slow pipe never slows a
	// request; what it must drop is counted.
	lw := obs.NewLogWriter(stderr, obs.LogBuffer)
	defer lw.Close()
	s.Kit.Registry.MustRegister(prometheus.NewCounterFunc(prometheus.CounterOpts{
		Namespace: obs.Namespace, Name: "log_lines_dropped_total",
		Help: "Log lines dropped because the log's buffer was full (its reader too slow or stuck).",
	}, func() float64 { return float64(lw.Dropped()) }))
	s.Log = obs.NewLogger(lw, b.Name)
	// What the standard library says on its own (net/http's Transport
	// dropping a connection that spoke out of turn) goes to the JSON log.
	log.SetFlags(0)
	log.SetOutput(stdlibLog{s.Log})
	// Likewise OpenTelemetry's (a collector that cannot be reached: one
	// line per failed export batch, not a plain line on stderr).
	otel.SetErrorHandler(otel.ErrorHandlerFunc(func(err error) {
		s.Log.Warn("tracing error", "error", err)
	}))
	version, revision := obs.BuildVersion()
	s.Log.Info("starting", "version", version, "revision", revision, "environment", s.Env,
		"addr", s.addr, "admin_addr", s.admin, "grace", s.grace().String(), "config", config.Masked(cfg))
	return run(ctx, s, cfg)
}

// listenPrefixed checks that cfg's Listen field reads the binary's own
// variables (prefix: <NAME>_), as its Binary names it.
func listenPrefixed(cfg any, prefix string) error {
	t := reflect.TypeOf(cfg)
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	for i := range t.NumField() {
		f := t.Field(i)
		if f.Type != reflect.TypeFor[Listen]() {
			continue
		}
		if got := f.Tag.Get("env"); got != ", prefix="+prefix {
			return fmt.Errorf("config field %s: tag env:%q, want env:\", prefix=%s\"", f.Name, got, prefix)
		}
		return nil
	}
	return fmt.Errorf("config struct %s has no serve.Listen field (env:\", prefix=%s\")", t, prefix)
}

// stdlibLog writes the standard logger's lines as warnings of the log.
type stdlibLog struct{ log *slog.Logger }

func (l stdlibLog) Write(p []byte) (int, error) {
	l.log.Warn(strings.TrimSpace(string(p)))
	return len(p), nil
}

// Serve serves h on the main address (traced and measured; over TLS when
// TLS_CERT_FILE and TLS_KEY_FILE are set) and the metrics and readiness on
// the admin address, until ctx ends; then it shuts down gracefully:
// readiness off, SHUTDOWN_DRAIN of serving, and up to SHUTDOWN_GRACE (the
// binary's Grace by default) for requests in flight.
func (s *Setup) Serve(ctx context.Context, h http.Handler) error {
	grace := s.grace()
	main := Served{Server: NewServer(s.addr, s.Kit.Serve(h), s.Log), CertFile: s.serve.CertFile, KeyFile: s.serve.KeyFile}
	main.ReadTimeout = s.serve.ReadTimeout
	return Run(ctx, s.Log, Shutdown{Drain: s.serve.Drain, Grace: grace, NotReady: func() { s.Kit.SetReady(false) }},
		main, Served{Server: NewServer(s.admin, s.Kit.Admin(), s.Log)})
}

// grace is how long the binary waits for requests in flight when it
// stops: SHUTDOWN_GRACE, else the binary's own.
func (s *Setup) grace() time.Duration {
	if s.serve.Grace != 0 {
		return s.serve.Grace
	}
	return s.binary.Grace
}

// Addr is the main address the binary listens on.
func (s *Setup) Addr() string { return s.addr }
