package serve

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/partnerpay/api/pkg/environment"
	"github.com/partnerpay/api/pkg/obs"
)

// Binary describes a service binary to Main.
type Binary struct {
	Name      string // "payout": its variables are PAYOUT_ADDR, PAYOUT_ADMIN_ADDR
	Addr      string // default main address
	AdminAddr string // default admin address (/metrics)
	// Internal: the service answers only the gateway (INTERNAL_TOKEN required).
	Internal bool
	// Environment, when set, is fixed rather than derived (the sandbox bank
	// is a sandbox by definition).
	Environment environment.Name
}

// Setup is what a service binary starts from.
type Setup struct {
	Getenv        func(string) string
	Log           *slog.Logger
	Env           environment.Name
	Addr          string
	AdminAddr     string
	InternalToken string
	Kit           *obs.Kit
	name          string
}

// Main runs a service binary: `<name> healthcheck` probes <NAME>_ADDR and
// exits; with no argument, run serves until SIGINT or SIGTERM. An error is
// printed and exits 1.
func Main(b Binary, run func(ctx context.Context, s *Setup) error) {
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
		if args[0] == "healthcheck" {
			return Healthcheck(addr)
		}
		return fmt.Errorf("unknown command %q (want healthcheck, or nothing to serve)", args[0])
	}
	s := &Setup{Getenv: getenv, Addr: addr, AdminAddr: Env(getenv, prefix+"_ADMIN_ADDR", b.AdminAddr), name: b.Name, Env: b.Environment}
	var err error
	if s.Env == "" {
		if s.Env, err = environment.FromEnv(getenv); err != nil {
			return err
		}
	}
	if b.Internal {
		if s.InternalToken, err = Secret(getenv, "INTERNAL_TOKEN", "services answer only requests that carry it"); err != nil {
			return err
		}
	}
	if s.Kit, err = obs.NewKit(ctx, b.Name, s.Env, getenv); err != nil {
		return err
	}
	defer s.Kit.Shutdown(context.Background())
	s.Log = Logger(stderr, b.Name)
	return run(ctx, s)
}

// Serve serves h on the main address (traced and measured) and the metrics
// on the admin address, until ctx ends.
func (s *Setup) Serve(ctx context.Context, h http.Handler) error {
	return Run(ctx, s.Log, 10*time.Second,
		NewServer(s.Addr, s.Kit.Serve(h), s.Log),
		NewServer(s.AdminAddr, s.Kit.Admin(), s.Log),
	)
}
