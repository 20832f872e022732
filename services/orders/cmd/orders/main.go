// Command orders serves the card on- and off-ramp behind the gateway: card
// orders (buy and sell) and their status.
//
//	orders              serve (configured by environment variables)
//	orders healthcheck  exit 0 if the service on ORDERS_ADDR is healthy
package main

import (
	"context"
	"net/http"
	"time"

	"github.com/partnerpay/api/pkg/database"
	"github.com/partnerpay/api/pkg/idempotency"
	"github.com/partnerpay/api/pkg/kithttp"
	"github.com/partnerpay/api/pkg/obs"
	"github.com/partnerpay/api/pkg/reference"
	"github.com/partnerpay/api/pkg/serve"
	"github.com/partnerpay/api/services/orders/internal/orders"
)

func main() { serve.Main("orders", run) }

func run(ctx context.Context, s *serve.Setup) error {
	db, err := database.ForBinary(ctx, s, idempotency.Migrations, orders.Migrations)
	if err != nil {
		return err
	}
	defer db.Close()
	svc := orders.NewService(s.Env, orders.NewStore(db), time.Now)
	o := kithttp.NewObserver(s.Log, obs.NewOperations(s.Kit.Registry, "orders"))
	idem := idempotency.NewStore(db, time.Now)
	go idem.Janitor(ctx, 10*time.Minute, func(err error) { s.Log.Warn("idempotency sweep failed", "err", err) })
	creating := idempotency.Middleware(idem, idempotency.Options{Budget: 10 * time.Second}, s.Log)
	mux := http.NewServeMux()
	orders.Routes(mux, orders.MakeEndpoints(svc, o), creating, s.Log)
	reference.Routes(mux, reference.NewService(s.Env), o, s.Log)
	return s.Serve(ctx, kithttp.Wrap(mux, s.Env, s.InternalToken))
}
