// Command payout serves bank payout quotes, their execution and the
// reference lists behind the gateway.
//
//	payout              serve (configured by environment variables)
//	payout healthcheck  exit 0 if the service on PAYOUT_ADDR is healthy
package main

import (
	"context"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/partnerpay/api/pkg/idempotency"
	"github.com/partnerpay/api/pkg/serve"
	"github.com/partnerpay/api/services/payout/internal/payout"
	"github.com/partnerpay/api/services/payout/internal/quotestore"
)

func main() {
	serve.Main(serve.Binary{Name: "payout", Addr: "127.0.0.1:8081", AdminAddr: "127.0.0.1:9181", Internal: true}, run)
}

func run(ctx context.Context, s *serve.Setup) error {
	secret, err := serve.Secret(s.Getenv, "QUOTE_SECRET", "it keys the quote ids")
	if err != nil {
		return err
	}
	ttl, err := serve.EnvDuration(s.Getenv, "QUOTE_TTL", 60*time.Second)
	if err != nil {
		return err
	}
	ropts, err := serve.RedisOptions(s.Getenv)
	if err != nil {
		return err
	}
	rdb := redis.NewClient(ropts)
	defer rdb.Close()
	s.Log.Info("starting", "environment", s.Env, "addr", s.Addr, "admin_addr", s.AdminAddr, "quote_ttl", ttl.String(),
		"redis", ropts.Addr, "internal_token", "[set]", "quote_secret", "[set]")

	var svc payout.Service = payout.NewService(s.Env, []byte(secret), ttl, quotestore.New(rdb), time.Now)
	svc = payout.LoggingMiddleware(s.Log)(svc)
	svc = payout.InstrumentingMiddleware(s.Kit.Registry)(svc)
	idem := idempotency.Middleware(idempotency.NewRedisStore(rdb), time.Minute, s.Log)
	return s.Serve(ctx, payout.NewHandler(payout.MakeEndpoints(svc), s.Env, s.InternalToken, idem, s.Log))
}
