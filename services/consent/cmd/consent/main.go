// Command consent serves consent sessions behind the gateway: fresh hosted
// consent links, session state, and the browser's return.
//
//	consent              serve (configured by environment variables)
//	consent healthcheck  exit 0 if the service on CONSENT_ADDR is healthy
package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/partnerpay/api/pkg/bankprovider"
	"github.com/partnerpay/api/pkg/environment"
	"github.com/partnerpay/api/pkg/obs"
	"github.com/partnerpay/api/pkg/serve"
	"github.com/partnerpay/api/services/consent/internal/consent"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, os.Args[1:], os.Getenv, os.Stderr); err != nil {
		fmt.Fprintln(os.Stderr, "consent:", err)
		os.Exit(1)
	}
}

const defaultAddr = "127.0.0.1:8083"

func run(ctx context.Context, args []string, getenv func(string) string, stderr io.Writer) error {
	if len(args) > 0 {
		if args[0] == "healthcheck" {
			return serve.Healthcheck(serve.Env(getenv, "CONSENT_ADDR", defaultAddr))
		}
		return fmt.Errorf("unknown command %q (want healthcheck, or nothing to serve)", args[0])
	}
	env, err := environment.FromEnv(getenv)
	if err != nil {
		return err
	}
	addr := serve.Env(getenv, "CONSENT_ADDR", defaultAddr)
	adminAddr := serve.Env(getenv, "CONSENT_ADMIN_ADDR", "127.0.0.1:9183")
	token, err := serve.Secret(getenv, "INTERNAL_TOKEN", "services answer only requests that carry it")
	if err != nil {
		return err
	}
	secret, err := serve.Secret(getenv, "CONSENT_SECRET", "it signs the return state")
	if err != nil {
		return err
	}
	kit, err := obs.NewKit(ctx, "consent", env, getenv)
	if err != nil {
		return err
	}
	defer kit.Shutdown(context.Background())
	returnURL := serve.Env(getenv, "CONSENT_RETURN_URL", "http://127.0.0.1:8080/consent/return")
	providerURL := serve.Env(getenv, "BANK_PROVIDER_URL", "http://127.0.0.1:8090")
	provider, err := bankprovider.New(providerURL, getenv("BANK_PROVIDER_KEY"))
	if err != nil {
		return err
	}
	provider.WrapTransport(kit.Tracing.Transport)
	ropts, err := serve.RedisOptions(getenv)
	if err != nil {
		return err
	}
	rdb := redis.NewClient(ropts)
	defer rdb.Close()

	log := serve.Logger(stderr, "consent")
	log.Info("starting", "environment", env, "addr", addr, "admin_addr", adminAddr, "return_url", returnURL,
		"bank_provider_url", providerURL, "internal_token", "[set]", "consent_secret", "[set]", "bank_provider_key", "[set]")

	var svc consent.Service = consent.NewService(consent.NewRedisStore(rdb), provider, []byte(secret), returnURL, time.Now)
	svc = consent.LoggingMiddleware(log)(svc)
	svc = consent.InstrumentingMiddleware(kit.Registry)(svc)
	h := consent.NewHandler(svc, consent.MakeEndpoints(svc), env, token, log)
	return serve.Run(ctx, log, 10*time.Second,
		serve.NewServer(addr, kit.Serve(h), log),
		serve.NewServer(adminAddr, kit.Admin(), log),
	)
}
