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

	"github.com/partnerpay/api/pkg/bankprovider"
	"github.com/partnerpay/api/pkg/consentapi"
	"github.com/partnerpay/api/pkg/idempotency"
	"github.com/partnerpay/api/pkg/kithttp"
	"github.com/partnerpay/api/pkg/obs"
	"github.com/partnerpay/api/pkg/serve"
	"github.com/partnerpay/api/services/fiat/internal/fiat"
)

func main() { serve.Main("fiat", run) }

type config struct {
	bankprovider.Config
	ConsentURL string `env:"CONSENT_URL" default:"http://127.0.0.1:8083" url:"absolute"`
}

func run(ctx context.Context, s *serve.Setup) error {
	var cfg config
	if err := s.Config(&cfg); err != nil {
		return err
	}
	provider, err := cfg.Client(s.Kit.Tracing.Transport, s.Kit.Registry)
	if err != nil {
		return err
	}
	consent, err := consentapi.NewClient(cfg.ConsentURL, s.InternalToken, s.Kit.Tracing.Transport(http.DefaultTransport))
	if err != nil {
		return err
	}
	rdb, err := s.Redis(ctx, serve.RedisTuning{})
	if err != nil {
		return err
	}
	defer rdb.Close()

	svc := fiat.NewService(s.Env, fiat.NewRedisStore(rdb), provider, consent, time.Now)
	o := kithttp.NewObserver(s.Log, obs.NewOperations(s.Kit.Registry, "fiat"))
	idem := idempotency.Middleware(idempotency.NewRedisStore(rdb), time.Minute, s.Log)
	return s.Serve(ctx, fiat.NewHandler(fiat.MakeEndpoints(svc, o), s.Env, s.InternalToken, idem, s.Log))
}
