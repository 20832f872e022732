// Command fiat serves the bank-transfer on-ramp behind the gateway:
// onboarding, virtual accounts, funding status and the sandbox simulations.
//
//	fiat              serve (configured by environment variables)
//	fiat healthcheck  exit 0 if the service on FIAT_ADDR is healthy
package main

import (
	"context"
	"net/http"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/partnerpay/api/pkg/bankprovider"
	"github.com/partnerpay/api/pkg/idempotency"
	"github.com/partnerpay/api/pkg/serve"
	"github.com/partnerpay/api/services/fiat/internal/fiat"
)

func main() {
	serve.Main(serve.Binary{Name: "fiat", Addr: "127.0.0.1:8082", AdminAddr: "127.0.0.1:9182", Internal: true}, run)
}

func run(ctx context.Context, s *serve.Setup) error {
	providerURL := serve.Env(s.Getenv, "BANK_PROVIDER_URL", "http://127.0.0.1:8090")
	provider, err := bankprovider.New(providerURL, s.Getenv("BANK_PROVIDER_KEY"))
	if err != nil {
		return err
	}
	provider.WrapTransport(s.Kit.Tracing.Transport)
	consentURL := serve.Env(s.Getenv, "CONSENT_URL", "http://127.0.0.1:8083")
	consent, err := fiat.NewConsentClient(consentURL, s.InternalToken, s.Kit.Tracing.Transport(http.DefaultTransport))
	if err != nil {
		return err
	}
	ropts, err := serve.RedisOptions(s.Getenv)
	if err != nil {
		return err
	}
	rdb := redis.NewClient(ropts)
	defer rdb.Close()
	s.Log.Info("starting", "environment", s.Env, "addr", s.Addr, "admin_addr", s.AdminAddr, "bank_provider_url", providerURL,
		"consent_url", consentURL, "redis", ropts.Addr, "internal_token", "[set]", "bank_provider_key", "[set]")

	var svc fiat.Service = fiat.NewService(s.Env, fiat.NewRedisStore(rdb), provider, consent, time.Now)
	svc = fiat.LoggingMiddleware(s.Log)(svc)
	svc = fiat.InstrumentingMiddleware(s.Kit.Registry)(svc)
	idem := idempotency.Middleware(idempotency.NewRedisStore(rdb), time.Minute, s.Log)
	return s.Serve(ctx, fiat.NewHandler(fiat.MakeEndpoints(svc), s.Env, s.InternalToken, idem, s.Log))
}
