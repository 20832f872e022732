// Command fiat serves the bank-transfer on-ramp behind the gateway:
// onboarding, virtual accounts, funding status and the sandbox simulations.
//
//	fiat              serve (configured by environment variables)
//	fiat healthcheck  exit 0 if the service on FIAT_ADDR is healthy
package main

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/partnerpay/api/pkg/bankprovider"
	"github.com/partnerpay/api/pkg/environment"
	"github.com/partnerpay/api/pkg/idempotency"
	"github.com/partnerpay/api/pkg/obs"
	"github.com/partnerpay/api/pkg/serve"
	"github.com/partnerpay/api/services/fiat/internal/fiat"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, os.Args[1:], os.Getenv, os.Stderr); err != nil {
		fmt.Fprintln(os.Stderr, "fiat:", err)
		os.Exit(1)
	}
}

const defaultAddr = "127.0.0.1:8082"

func run(ctx context.Context, args []string, getenv func(string) string, stderr io.Writer) error {
	if len(args) > 0 {
		if args[0] == "healthcheck" {
			return serve.Healthcheck(serve.Env(getenv, "FIAT_ADDR", defaultAddr))
		}
		return fmt.Errorf("unknown command %q (want healthcheck, or nothing to serve)", args[0])
	}
	env, err := environment.FromEnv(getenv)
	if err != nil {
		return err
	}
	addr := serve.Env(getenv, "FIAT_ADDR", defaultAddr)
	adminAddr := serve.Env(getenv, "FIAT_ADMIN_ADDR", "127.0.0.1:9182")
	token, err := serve.Secret(getenv, "INTERNAL_TOKEN", "services answer only requests that carry it")
	if err != nil {
		return err
	}
	kit, err := obs.NewKit(ctx, "fiat", env, getenv)
	if err != nil {
		return err
	}
	defer kit.Shutdown(context.Background())
	providerURL := serve.Env(getenv, "BANK_PROVIDER_URL", "http://127.0.0.1:8090")
	provider, err := bankprovider.New(providerURL, getenv("BANK_PROVIDER_KEY"))
	if err != nil {
		return err
	}
	provider.WrapTransport(kit.Tracing.Transport)
	consentURL := serve.Env(getenv, "CONSENT_URL", "http://127.0.0.1:8083")
	consent, err := fiat.NewConsentClient(consentURL, token, kit.Tracing.Transport(http.DefaultTransport))
	if err != nil {
		return err
	}
	ropts, err := serve.RedisOptions(getenv)
	if err != nil {
		return err
	}
	rdb := redis.NewClient(ropts)
	defer rdb.Close()

	log := serve.Logger(stderr, "fiat")
	log.Info("starting", "environment", env, "addr", addr, "admin_addr", adminAddr, "bank_provider_url", providerURL,
		"consent_url", consentURL, "internal_token", "[set]", "bank_provider_key", "[set]")

	var svc fiat.Service = fiat.NewService(env, fiat.NewRedisStore(rdb), provider, consent, time.Now)
	svc = fiat.LoggingMiddleware(log)(svc)
	svc = fiat.InstrumentingMiddleware(kit.Registry)(svc)
	idem := idempotency.Middleware(idempotency.NewRedisStore(rdb), time.Minute, log)
	h := fiat.NewHandler(fiat.MakeEndpoints(svc), env, token, idem, log)
	return serve.Run(ctx, log, 10*time.Second,
		serve.NewServer(addr, kit.Serve(h), log),
		serve.NewServer(adminAddr, kit.Admin(), log),
	)
}
