// Command consent serves consent sessions behind the gateway: fresh hosted
// consent links, session state, and the browser's return.
//
//	consent              serve (configured by environment variables)
//	consent healthcheck  exit 0 if the service on CONSENT_ADDR is healthy
package main

import (
	"context"
	"github.com/partnerpay/api/pkg/config"
	"net/http"
	"time"

	"github.com/partnerpay/api/pkg/bankprovider"
	"github.com/partnerpay/api/pkg/database"
	"github.com/partnerpay/api/pkg/kithttp"
	"github.com/partnerpay/api/pkg/obs"
	"github.com/partnerpay/api/pkg/serve"
	"github.com/partnerpay/api/services/consent/internal/consent"
)

func main() { serve.Main("consent", run) }

type settings struct {
	Database      database.Config
	ConsentSecret config.Secret `env:"CONSENT_SECRET" doc:"it signs the return state"`
	ReturnURL     string        `env:"CONSENT_RETURN_URL" default:"http://127.0.0.1:8080/consent/return" url:"absolute"`
	bankprovider.Config
}

func run(ctx context.Context, s *serve.Setup) error {
	var cfg settings
	if err := s.Config(&cfg); err != nil {
		return err
	}
	provider, err := cfg.Client(s.Kit.Tracing.Transport, s.Kit.Registry)
	if err != nil {
		return err
	}
	db, err := database.ForBinary(ctx, cfg.Database, s.Env, s.Log, s.Kit, consent.Migrations)
	if err != nil {
		return err
	}
	defer db.Close()

	svc := consent.NewService(s.Env, consent.NewStore(db), provider, []byte(cfg.ConsentSecret), cfg.ReturnURL, time.Now)
	o := kithttp.NewObserver(s.Log, obs.NewOperations(s.Kit.Registry, "consent"))
	mux := http.NewServeMux()
	consent.Routes(mux, consent.MakeEndpoints(svc, o), s.Log)
	return s.Serve(ctx, kithttp.Wrap(mux, s.Env, s.InternalToken))
}
