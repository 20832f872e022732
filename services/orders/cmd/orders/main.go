// Command orders serves the card on- and off-ramp behind the gateway: card
// orders (buy and sell), opened at the card provider; the hosted card page
// link and the browser's return; their status; a sell's sandbox deposit.
//
//	orders              serve (configured by environment variables)
//	orders healthcheck  exit 0 if the service on ORDERS_ADDR is healthy
package main

import (
	"context"
	"net/http"
	"time"

	"github.com/partnerpay/api/pkg/bankprovider"
	"github.com/partnerpay/api/pkg/config"
	"github.com/partnerpay/api/pkg/database"
	"github.com/partnerpay/api/pkg/hostedlink"
	"github.com/partnerpay/api/pkg/idempotency"
	"github.com/partnerpay/api/pkg/kithttp"
	"github.com/partnerpay/api/pkg/obs"
	"github.com/partnerpay/api/pkg/serve"
	"github.com/partnerpay/api/services/orders/internal/orders"
)

func main() {
	// A started order runs to its end within 10 s.
	serve.Main(serve.Binary{Name: "orders", Addr: "127.0.0.1:8084", AdminAddr: "127.0.0.1:9184", Grace: 15 * time.Second},
		&settings{Links: hostedlink.Config{ReturnURL: "http://127.0.0.1:8080/orders/return"}}, run)
}

// settings is the orders binary's configuration, loaded once (config.Load).
type settings struct {
	Serve         serve.Config
	Listen        serve.Listen  `env:", prefix=ORDERS_"`
	InternalToken config.Secret `env:"INTERNAL_TOKEN, required"` // the gateway's calls carry it
	Database      database.Config
	// The card provider is the bank provider's card side (DESIGN §7).
	Provider bankprovider.Config
	// ORDERS_SECRET signs the return state, and the order list's cursors;
	// ORDERS_RETURN_URL is the gateway's public return route.
	Links hostedlink.Config `env:", prefix=ORDERS_"`
	// How often an order in flight is asked about at most (the worker).
	PollMax time.Duration `env:"ORDERS_POLL_MAX, default=2s"`
}

// Validate checks the worker's pace.
func (c *settings) Validate() error { return config.Positive("ORDERS_POLL_MAX", c.PollMax) }

func (c *settings) Serving() *serve.Config { return &c.Serve }

// Listening is where it listens.
func (c *settings) Listening() *serve.Listen { return &c.Listen }

func run(ctx context.Context, s *serve.Setup, cfg *settings) error {
	provider, err := cfg.Provider.Client(s.Kit.Tracing.Transport, s.Kit.Registry)
	if err != nil {
		return err
	}
	db, err := database.ForBinary(ctx, cfg.Database, s.Log, s.Kit, idempotency.Migrations, orders.Feed.Migrations(), orders.Migrations)
	if err != nil {
		return err
	}
	defer db.Close()
	svc := orders.NewService(orders.Config{Env: s.Env, Store: orders.NewStore(db, s.Env), Provider: provider,
		Secret: []byte(cfg.Links.Secret), ReturnURL: string(cfg.Links.ReturnURL), Log: s.Log, Now: db.Now})
	// Every replica moves orders on the card provider's word, whether or
	// not anyone reads them.
	go orders.NewWorker(svc, cfg.PollMax, s.Log, s.Kit.Registry).Run(ctx)
	go orders.Feed.Loop(db, s.Log, s.Kit.Registry).Run(ctx)
	o := kithttp.NewObserver(s.Log, obs.NewOperations(s.Kit.Registry, "orders"))
	creating := idempotency.ForService(ctx, db, idempotency.Options{Budget: 10 * time.Second}, s.Log)
	mux := http.NewServeMux()
	orders.Routes(mux, orders.MakeEndpoints(svc, o), s.Env, creating, s.Log)
	orders.Feed.Route(mux, db, o, s.Log)
	return s.Serve(ctx, kithttp.Wrap(mux, s.Env, string(cfg.InternalToken)))
}
