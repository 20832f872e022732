// Command payout serves bank payout quotes and the reference lists behind
// the gateway.
//
//	payout              serve (configured by environment variables)
//	payout healthcheck  exit 0 if the service on PAYOUT_ADDR is healthy
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

	"github.com/partnerpay/api/pkg/environment"
	"github.com/partnerpay/api/pkg/idempotency"
	"github.com/partnerpay/api/pkg/obs"
	"github.com/partnerpay/api/pkg/serve"
	"github.com/partnerpay/api/services/payout/internal/payout"
	"github.com/partnerpay/api/services/payout/internal/quotestore"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, os.Args[1:], os.Getenv, os.Stderr); err != nil {
		fmt.Fprintln(os.Stderr, "payout:", err)
		os.Exit(1)
	}
}

const defaultAddr = "127.0.0.1:8081"

func run(ctx context.Context, args []string, getenv func(string) string, stderr io.Writer) error {
	if len(args) > 0 {
		if args[0] == "healthcheck" {
			return serve.Healthcheck(serve.Env(getenv, "PAYOUT_ADDR", defaultAddr))
		}
		return fmt.Errorf("unknown command %q (want healthcheck, or nothing to serve)", args[0])
	}
	env, err := environment.FromEnv(getenv)
	if err != nil {
		return err
	}
	addr := serve.Env(getenv, "PAYOUT_ADDR", defaultAddr)
	adminAddr := serve.Env(getenv, "PAYOUT_ADMIN_ADDR", "127.0.0.1:9181")
	token, err := serve.Secret(getenv, "INTERNAL_TOKEN", "services answer only requests that carry it")
	if err != nil {
		return err
	}
	secret, err := serve.Secret(getenv, "QUOTE_SECRET", "it keys the quote ids")
	if err != nil {
		return err
	}
	ttl, err := serve.EnvDuration(getenv, "QUOTE_TTL", 60*time.Second)
	if err != nil {
		return err
	}
	ropts, err := serve.RedisOptions(getenv)
	if err != nil {
		return err
	}
	rdb := redis.NewClient(ropts)
	defer rdb.Close()

	log := serve.Logger(stderr, "payout")
	log.Info("starting", "environment", env, "addr", addr, "admin_addr", adminAddr, "quote_ttl", ttl.String(),
		"redis_url", ropts.Addr, "internal_token", "[set]", "quote_secret", "[set]")

	kit, err := obs.NewKit(ctx, "payout", env, getenv)
	if err != nil {
		return err
	}
	defer kit.Shutdown(context.Background())
	var svc payout.Service = payout.NewService(env, []byte(secret), ttl, quotestore.New(rdb), time.Now)
	svc = payout.LoggingMiddleware(log)(svc)
	svc = payout.InstrumentingMiddleware(kit.Registry)(svc)
	idem := idempotency.Middleware(idempotency.NewRedisStore(rdb), time.Minute, log)
	h := payout.NewHandler(payout.MakeEndpoints(svc), env, token, idem, log)

	return serve.Run(ctx, log, 10*time.Second,
		serve.NewServer(addr, kit.Serve(h), log),
		serve.NewServer(adminAddr, kit.Admin(), log),
	)
}
