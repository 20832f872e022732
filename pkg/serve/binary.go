package serve

import (
	"context"
	"errors"
	"fmt"
	"github.com/partnerpay/api/pkg/config"
	"io"
	"log"
	"log/slog"
	"net/http"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"
	"go.opentelemetry.io/otel"

	"github.com/partnerpay/api/pkg/environment"
	"github.com/partnerpay/api/pkg/obs"
)

// Setup is what a service binary starts from.
type Setup struct {
	Getenv        func(string) string
	Log           *slog.Logger
	Env           environment.Name
	Addr          string
	AdminAddr     string
	InternalToken string
	Kit           *obs.Kit
	binary        Binary
}

// Main runs the binary called name (one of Binaries): `<name> healthcheck`
// probes <NAME>_ADDR and exits; with no argument, run serves until SIGINT
// or SIGTERM. An error is printed and exits 1.
func Main(name string, run func(ctx context.Context, s *Setup) error) {
	b, ok := Lookup(name)
	if !ok {
		panic("serve: no binary " + name + " in serve.Binaries")
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := Start(ctx, b, os.Args[1:], os.Getenv, os.Stderr, run); err != nil {
		fmt.Fprintln(os.Stderr, b.Name+":", err)
		stop()
		os.Exit(1)
	}
}

// Start is Main with its inputs injected.
func Start(ctx context.Context, b Binary, args []string, getenv func(string) string, stderr io.Writer, run func(ctx context.Context, s *Setup) error) error {
	prefix := strings.ToUpper(b.Name)
	addr := Env(getenv, prefix+"_ADDR", b.Addr)
	if len(args) > 0 {
		switch {
		case args[0] == "healthcheck":
			return Healthcheck(addr)
		case args[0] == "probe" && len(args) == 2:
			return Probe(args[1])
		case args[0] == "install-probe" && len(args) == 2:
			return InstallProbe(args[1])
		}
		return fmt.Errorf("unknown command %q (want healthcheck, probe URL, install-probe PATH, or nothing to serve)", strings.Join(args, " "))
	}
	s := &Setup{Getenv: getenv, Addr: addr, AdminAddr: Env(getenv, prefix+"_ADMIN_ADDR", b.AdminAddr), binary: b, Env: b.Environment}
	var err error
	if s.Env == "" {
		if s.Env, err = environment.FromEnv(getenv); err != nil {
			return err
		}
	}
	if b.Internal {
		var c struct {
			Token config.Secret `env:"INTERNAL_TOKEN" doc:"services answer only requests that carry it"`
		}
		if err := config.Load(getenv, &c); err != nil {
			return err
		}
		if s.Env == environment.Production && config.KnownDefault(string(c.Token)) {
			return errors.New("INTERNAL_TOKEN is a known public default; production needs a secret of its own (openssl rand -hex 32)")
		}
		s.InternalToken = string(c.Token)
	}
	if s.Kit, err = obs.NewKit(ctx, b.Name, s.Env, getenv); err != nil {
		return err
	}
	defer s.Kit.Shutdown(context.Background())
	// Log lines leave through a buffer, so a slow pipe never slows a
	// request; what it must drop is counted.
	lw := NewLogWriter(stderr, LogBuffer)
	defer lw.Close()
	s.Kit.Registry.MustRegister(prometheus.NewCounterFunc(prometheus.CounterOpts{
		Namespace: obs.Namespace, Name: "log_lines_dropped_total",
		Help: "Log lines dropped because the log's buffer was full (its reader too slow or stuck).",
	}, func() float64 { return float64(lw.Dropped()) }))
	s.Log = Logger(lw, b.Name)
	redis.SetLogger(redisLogger{log: s.Log})
	// What the standard library says on its own (net/http's Transport
	// dropping a connection that spoke out of turn) goes to the JSON log.
	log.SetFlags(0)
	log.SetOutput(stdlibLog{s.Log})
	// Likewise OpenTelemetry's (a collector that cannot be reached: one
	// line per failed export batch, not a plain line on stderr).
	otel.SetErrorHandler(otel.ErrorHandlerFunc(func(err error) {
		s.Log.Warn("tracing error", "error", err)
	}))
	return run(ctx, s)
}

// stdlibLog writes the standard logger's lines as warnings of the log.
type stdlibLog struct{ log *slog.Logger }

func (l stdlibLog) Write(p []byte) (int, error) {
	l.log.Warn(strings.TrimSpace(string(p)))
	return len(p), nil
}

// Config fills the binary's config struct from the environment (see
// config.Load), and logs the start: environment, addresses and the config,
// secrets masked. In production a secret that is a known public default
// (an example from the docs, a "change-me") is refused.
func (s *Setup) Config(cfg any) error {
	if err := config.Load(s.Getenv, cfg); err != nil {
		return err
	}
	if s.Env == environment.Production {
		if name, ok := config.KnownDefaultIn(cfg); ok {
			return fmt.Errorf("%s is a known public default; production needs a secret of its own (openssl rand -hex 32)", name)
		}
	}
	s.starting(cfg)
	return nil
}

func (s *Setup) starting(cfg any) {
	version, revision := obs.BuildVersion()
	attrs := []any{"version", version, "revision", revision, "environment", s.Env, "addr", s.Addr, "admin_addr", s.AdminAddr}
	if s.binary.Internal {
		attrs = append(attrs, "INTERNAL_TOKEN", config.Secret(s.InternalToken))
	}
	if cfg != nil {
		attrs = append(attrs, "config", config.Masked(cfg))
	}
	s.Log.Info("starting", attrs...)
}

// Serve serves h on the main address (traced and measured; over TLS when
// TLS_CERT_FILE and TLS_KEY_FILE are set) and the metrics and readiness on
// the admin address, until ctx ends; then it shuts down gracefully:
// readiness off, SHUTDOWN_DRAIN (default 5s) of serving, and up to
// SHUTDOWN_GRACE (the binary's default) for requests in flight.
func (s *Setup) Serve(ctx context.Context, h http.Handler) error {
	var sd struct {
		Drain time.Duration `env:"SHUTDOWN_DRAIN" default:"5s" zero:"allowed"`
		Grace time.Duration `env:"SHUTDOWN_GRACE" optional:"true" zero:"allowed"`
		// How long a client has to send a whole request, body included.
		Read time.Duration `env:"HTTP_READ_TIMEOUT" default:"15s"`
		// The main address's certificate and key (PEM): the gateway then
		// reaches the service over https.
		CertFile string `env:"TLS_CERT_FILE" optional:"true"`
		KeyFile  string `env:"TLS_KEY_FILE" optional:"true"`
	}
	if err := config.Load(s.Getenv, &sd); err != nil {
		return err
	}
	if sd.Grace == 0 {
		sd.Grace = s.binary.Grace
	}
	if (sd.CertFile == "") != (sd.KeyFile == "") {
		return errors.New("set both TLS_CERT_FILE and TLS_KEY_FILE, or neither")
	}
	main := Served{Server: NewServer(s.Addr, s.Kit.Serve(h), s.Log), CertFile: sd.CertFile, KeyFile: sd.KeyFile}
	main.ReadTimeout = sd.Read
	return Run(ctx, s.Log, Shutdown{Drain: sd.Drain, Grace: sd.Grace, NotReady: func() { s.Kit.SetReady(false) }},
		main, Served{Server: NewServer(s.AdminAddr, s.Kit.Admin(), s.Log)})
}
