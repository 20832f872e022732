// Command consent serves consent sessions behind the gateway: fresh hosted
// consent links, session state, and the browser's return.
//
//	consent              serve (configured by environment variables)
//	consent healthcheck  exit 0 if the service on CONSENT_ADDR is healthy
package main

import (
	"context"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/partnerpay/api/pkg/bankprovider"
	"github.com/partnerpay/api/pkg/serve"
	"github.com/partnerpay/api/services/consent/internal/consent"
)

func main() {
	serve.Main(serve.Binary{Name: "consent", Addr: "127.0.0.1:8083", AdminAddr: "127.0.0.1:9183", Internal: true}, run)
}

func run(ctx context.Context, s *serve.Setup) error {
	secret, err := serve.Secret(s.Getenv, "CONSENT_SECRET", "it signs the return state")
	if err != nil {
		return err
	}
	returnURL := serve.Env(s.Getenv, "CONSENT_RETURN_URL", "http://127.0.0.1:8080/consent/return")
	providerURL := serve.Env(s.Getenv, "BANK_PROVIDER_URL", "http://127.0.0.1:8090")
	provider, err := bankprovider.New(providerURL, s.Getenv("BANK_PROVIDER_KEY"))
	if err != nil {
		return err
	}
	provider.WrapTransport(s.Kit.Tracing.Transport)
	ropts, err := serve.RedisOptions(s.Getenv)
	if err != nil {
		return err
	}
	rdb := redis.NewClient(ropts)
	defer rdb.Close()
	s.Log.Info("starting", "environment", s.Env, "addr", s.Addr, "admin_addr", s.AdminAddr, "return_url", returnURL,
		"bank_provider_url", providerURL, "redis", ropts.Addr, "internal_token", "[set]", "consent_secret", "[set]", "bank_provider_key", "[set]")

	var svc consent.Service = consent.NewService(consent.NewRedisStore(rdb), provider, []byte(secret), returnURL, time.Now)
	svc = consent.LoggingMiddleware(s.Log)(svc)
	svc = consent.InstrumentingMiddleware(s.Kit.Registry)(svc)
	return s.Serve(ctx, consent.NewHandler(svc, consent.MakeEndpoints(svc), s.Env, s.InternalToken, s.Log))
}
