// Command consent serves consent sessions behind the gateway: fresh hosted
// consent links, session state, and the browser's return.
//
//	consent              serve (configured by environment variables)
//	consent healthcheck  exit 0 if the service on CONSENT_ADDR is healthy
package main

import (
	"context"
	"net/http"
	"time"

	"github.com/partnerpay/api/pkg/bankprovider"
	"github.com/partnerpay/api/pkg/config"
	"github.com/partnerpay/api/pkg/database"
	"github.com/partnerpay/api/pkg/hostedlink"
	"github.com/partnerpay/api/pkg/kithttp"
	"github.com/partnerpay/api/pkg/obs"
	"github.com/partnerpay/api/pkg/serve"
	"github.com/partnerpay/api/services/consent/internal/consent"
)

func main() {
	// The bank provider answers within the gateway's 20 s route timeout; a
	// started creating request runs to its end within 25 s.
	serve.Main(serve.Binary{Name: "consent", Addr: "127.0.0.1:8083", AdminAddr: "127.0.0.1:9183", Grace: 30 * time.Second},
		&settings{Links: hostedlink.Config{ReturnURL: "http://127.0.0.1:8080/consent/return"}}, run)
}

// settings is the consent binary's configuration, loaded once (config.Load).
type settings struct {
	Serve         serve.Config
	Listen        serve.Listen  `env:", prefix=CONSENT_"`
	InternalToken config.Secret `env:"INTERNAL_TOKEN, required"` // the gateway's and fiat's calls carry it
	Database      database.Config
	Provider      bankprovider.Config
	// CONSENT_SECRET signs the return state; CONSENT_RETURN_URL is the
	// gateway's public return route.
	Links hostedlink.Config `env:", prefix=CONSENT_"`
}

func (c *settings) Serving() *serve.Config { return &c.Serve }

// Listening is where it listens.
func (c *settings) Listening() *serve.Listen { return &c.Listen }

func run(ctx context.Context, s *serve.Setup, cfg *settings) error {
	provider, err := cfg.Provider.Client(s.Kit.Tracing.Transport, s.Kit.Registry)
	if err != nil {
		return err
	}
	db, err := database.ForBinary(ctx, cfg.Database, s.Log, s.Kit, consent.Feed.Migrations(), consent.Migrations)
	if err != nil {
		return err
	}
	defer db.Close()

	svc := consent.NewService(s.Env, consent.NewStore(db, s.Env), provider, []byte(cfg.Links.Secret), string(cfg.Links.ReturnURL), time.Now)
	o := kithttp.NewObserver(s.Log, obs.NewOperations(s.Kit.Registry, "consent"))
	mux := http.NewServeMux()
	consent.Routes(mux, consent.MakeEndpoints(svc, o), s.Log)
	consent.Feed.Route(mux, db, o, s.Log)
	// Every replica places the events written (one at a time) and deletes
	// the old ones (DESIGN §9).
	go consent.Feed.Loop(db, s.Log, s.Kit.Registry).Run(ctx)
	return s.Serve(ctx, kithttp.Wrap(mux, s.Env, string(cfg.InternalToken)))
}
