// Command fiat serves the bank-transfer on-ramp behind the gateway:
// onboarding, virtual accounts, funding status and the sandbox simulations.
//
//	fiat              serve (configured by environment variables)
//	fiat healthcheck  exit 0 if the service on FIAT_ADDR is healthy
package main

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"net/http"
	"time"

	"github.com/partnerpay/api/pkg/bankprovider"
	"github.com/partnerpay/api/pkg/config"
	"github.com/partnerpay/api/pkg/consentapi"
	"github.com/partnerpay/api/pkg/database"
	"github.com/partnerpay/api/pkg/idempotency"
	"github.com/partnerpay/api/pkg/kithttp"
	"github.com/partnerpay/api/pkg/obs"
	"github.com/partnerpay/api/pkg/serve"
	"github.com/partnerpay/api/pkg/upstream"
	"github.com/partnerpay/api/services/fiat/internal/fiat"
)

func main() {
	// The bank provider answers within the gateway's 20 s route timeout; a
	// started creating request runs to its end within 25 s.
	serve.Main(serve.Binary{Name: "fiat", Addr: "127.0.0.1:8082", AdminAddr: "127.0.0.1:9182", Grace: 30 * time.Second}, &settings{}, run)
}

// settings is the fiat binary's configuration, loaded once (config.Load).
type settings struct {
	Serve         serve.Config
	Listen        serve.Listen  `env:", prefix=FIAT_"`
	InternalToken config.Secret `env:"INTERNAL_TOKEN, required"` // the gateway's calls carry it, and fiat's to consent
	Database      database.Config
	Provider      bankprovider.Config
	ConsentURL    config.URL `env:"CONSENT_URL, default=http://127.0.0.1:8083"`
	// The PEM bundle that signs the consent service's certificate, when
	// CONSENT_URL is https:// (the system's pool when unset).
	UpstreamCAFile string `env:"UPSTREAM_CA_FILE"`
	// How often a record in flight is asked about at most (the worker).
	PollMax time.Duration `env:"FIAT_POLL_MAX, default=2s"`
}

// Validate checks the worker's pace.
func (c *settings) Validate() error { return config.Positive("FIAT_POLL_MAX", c.PollMax) }

func (c *settings) Serving() *serve.Config { return &c.Serve }

// Listening is where it listens.
func (c *settings) Listening() *serve.Listen { return &c.Listen }

func cursorKey(internalToken string) []byte {
	m := hmac.New(sha256.New, []byte(internalToken))
	m.Write([]byte("fiat list cursors"))
	return m.Sum(nil)
}

func run(ctx context.Context, s *serve.Setup, cfg *settings) error {
	provider, err := cfg.Provider.Client(s.Kit.Tracing.Transport, s.Kit.Registry)
	if err != nil {
		return err
	}
	toConsent, err := upstream.Transport(upstream.Options{CAFile: cfg.UpstreamCAFile})
	if err != nil {
		return err
	}
	consent, err := consentapi.NewClient(string(cfg.ConsentURL), string(cfg.InternalToken), s.Kit.Tracing.Transport(toConsent))
	if err != nil {
		return err
	}
	db, err := database.ForBinary(ctx, cfg.Database, s.Log, s.Kit, idempotency.Migrations, fiat.Feed.Migrations(), fiat.Migrations)
	if err != nil {
		return err
	}
	defer db.Close()

	// The lists' cursors are signed with a key drawn from the internal
	// token, which every instance shares: a cursor one instance made opens
	// on any other, and none is kept.
	svc := fiat.NewService(s.Env, fiat.NewStore(db, s.Env), provider, consent, db.Now, cursorKey(string(cfg.InternalToken)))
	// Every replica keeps the records up to date with the provider,
	// whether or not anyone reads them.
	go fiat.NewWorker(svc, cfg.PollMax, s.Log, s.Kit.Registry).Run(ctx)
	go fiat.Feed.Loop(db, s.Log, s.Kit.Registry).Run(ctx)
	o := kithttp.NewObserver(s.Log, obs.NewOperations(s.Kit.Registry, "fiat"))
	// Once started, a creating request runs to its end within 25 s (the
	// bank provider's client gives up within 20), caller or no caller.
	creating := idempotency.ForService(ctx, db, idempotency.Options{Budget: 25 * time.Second}, s.Log)
	mux := http.NewServeMux()
	fiat.Routes(mux, fiat.MakeEndpoints(svc, o), s.Env, creating, s.Log)
	fiat.Feed.Route(mux, db, o, s.Log)
	return s.Serve(ctx, kithttp.Wrap(mux, s.Env, string(cfg.InternalToken)))
}
