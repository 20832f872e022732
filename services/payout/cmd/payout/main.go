// Command payout serves bank payout quotes, their execution and status
// (the payouts handed to the bank provider once their stablecoins arrive),
// and crypto deposit quotes, behind the gateway.
//
//	payout              serve (configured by environment variables)
//	payout healthcheck  exit 0 if the service on PAYOUT_ADDR is healthy
package main

import (
	"context"
	"errors"
	"net/http"
	"time"

	"go.opentelemetry.io/otel/trace"

	"github.com/partnerpay/api/pkg/bankprovider"
	"github.com/partnerpay/api/pkg/config"
	"github.com/partnerpay/api/pkg/database"
	"github.com/partnerpay/api/pkg/environment"
	"github.com/partnerpay/api/pkg/idempotency"
	"github.com/partnerpay/api/pkg/kithttp"
	"github.com/partnerpay/api/pkg/obs"
	"github.com/partnerpay/api/pkg/redisclient"
	"github.com/partnerpay/api/pkg/serve"
	"github.com/partnerpay/api/pkg/worker"
	"github.com/partnerpay/api/services/payout/internal/chain"
	"github.com/partnerpay/api/services/payout/internal/deposit"
	"github.com/partnerpay/api/services/payout/internal/mover"
	"github.com/partnerpay/api/services/payout/internal/payout"
	"github.com/partnerpay/api/services/payout/internal/quote"
	"github.com/partnerpay/api/services/payout/internal/store"
)

func main() {
	// A started payout runs to its end within 10 s, caller or no caller.
	serve.Main(serve.Binary{Name: "payout", Addr: "127.0.0.1:8081", AdminAddr: "127.0.0.1:9181", Grace: 15 * time.Second}, &settings{}, run)
}

// settings is the payout binary's configuration, loaded once (config.Load).
type settings struct {
	Serve         serve.Config
	Listen        serve.Listen  `env:", prefix=PAYOUT_"`
	InternalToken config.Secret `env:"INTERNAL_TOKEN, required"` // the gateway's calls carry it
	Database      database.Config
	Redis         redisclient.Config
	// The bank provider carries payouts whose stablecoins arrived.
	Provider bankprovider.Config
	// It keys the quote ids and the payouts' deposit addresses.
	QuoteSecret config.Secret `env:"QUOTE_SECRET, required"`
	QuoteTTL    time.Duration `env:"QUOTE_TTL, default=60s"`
	// How payouts move on the provider's word (the worker).
	Worker mover.Config
	// The chains: their nodes, the deposit key, the sandbox's faucet.
	Chain chain.Config
}

func (c *settings) Serving() *serve.Config { return &c.Serve }

// Listening is where it listens.
func (c *settings) Listening() *serve.Listen { return &c.Listen }

// Validate checks the quotes' lifetime.
func (c *settings) Validate() error { return config.Positive("QUOTE_TTL", c.QuoteTTL) }

func run(ctx context.Context, s *serve.Setup, cfg *settings) error {
	provider, err := cfg.Provider.Client(s.Kit.Tracing.Transport, s.Kit.Registry)
	if err != nil {
		return err
	}
	db, err := database.ForBinary(ctx, cfg.Database, s.Log, s.Kit, idempotency.Migrations, store.Feed.Migrations(), store.Migrations)
	if err != nil {
		return err
	}
	defer db.Close()
	// Quote offers and their tombstones: short-lived, lost without harm.
	var tp trace.TracerProvider
	if s.Kit.Tracing.Recording() {
		tp = s.Kit.Tracing.Provider // the quote book's commands in an execution's trace
	}
	rdb, err := cfg.Redis.Open(redisclient.Tuning{Tracer: tp}, s.Log, s.Kit.Registry)
	if err != nil {
		return err
	}
	defer rdb.Close()
	if err := quote.CheckNoEviction(ctx, rdb, s.Env, s.Log); err != nil {
		return err
	}

	// Expiry and leases are read on the database's clock, not this
	// replica's (DESIGN §3).
	book := quote.NewBook(rdb, []byte(cfg.QuoteSecret), db.Now)
	o := kithttp.NewObserver(s.Log, obs.NewOperations(s.Kit.Registry, "payout"))
	// A payout has the gateway's 10 s to answer; once started it runs to
	// its end whether or not its caller stays. Its work, and its wait for
	// the synchronous standby, get 8 s: then the caller hears that the
	// outcome is not known yet (409 idempotency_in_progress) from us, not a
	// gateway timeout, while the commit itself runs on.
	creating := idempotency.ForService(ctx, db, idempotency.Options{Budget: 8 * time.Second}, s.Log)
	mux := http.NewServeMux()
	payouts := store.NewStore(db, s.Env)
	payouts.Measure(store.NewMetrics(db, s.Log, s.Kit.Registry))
	// The chains (DESIGN §10): each configured node is checked to be its
	// chain; deposit addresses come from the deposit wallet's public key.
	nodes, err := chain.Dial(ctx, cfg.Chain, s.Env, 30*time.Second, s.Log)
	if err != nil {
		return err
	}
	defer chain.Close(nodes)
	var keys *chain.Addresses
	switch {
	case cfg.Chain.DepositXPub != "":
		if keys, err = chain.NewAddresses(string(cfg.Chain.DepositXPub)); err != nil {
			return err
		}
	case s.Env == environment.Sandbox:
		return errors.New("DEPOSIT_XPUB is required in the sandbox: every deposit address is derived from it (make env writes one)")
	}
	var faucet *chain.Faucet
	if s.Env == environment.Sandbox && cfg.Chain.FaucetKey != "" {
		if faucet, err = chain.NewFaucet(string(cfg.Chain.FaucetKey), nodes); err != nil {
			return err
		}
	}
	// Every replica moves payouts on the provider's word and closes their
	// deposit windows, whether or not anyone reads them; the provider's
	// signed notifications wake its reading of the changes feed.
	w := mover.New(mover.Parts{Env: s.Env, Store: payouts, Provider: provider, Now: db.Now, Config: cfg.Worker, Log: s.Log,
		Registry: s.Kit.Registry})
	go w.Run(ctx)
	mover.NotificationRoute(mux, s.Env, bankprovider.NotifySecret(string(cfg.Provider.Key)), w.WakeChanges, db.Now, s.Log)
	// A chain watcher per chain follows its blocks and records each
	// confirmed deposit once; a recorded deposit wakes the hand-over.
	watchers := map[int64]*chain.Watcher{}
	chainMetrics, chainRows := chain.NewMetrics(s.Kit.Registry), worker.NewRows("payout", s.Log, s.Kit.Registry)
	for id, n := range nodes {
		watchers[id] = chain.NewWatcher(n, payouts, db.Now, w.WakeHandOver, chainMetrics, chainRows, s.Log, s.Kit.Registry)
		go watchers[id].Run(ctx)
	}
	// A signer per chain sends the refunds from the treasury, each once,
	// and sweeps final deposits home.
	signers, err := chain.Signers(cfg.Chain, nodes, keys, payouts, db.Now, s.Log, s.Kit.Registry)
	if err != nil {
		return err
	}
	for _, sg := range signers {
		go sg.Run(ctx)
	}
	svc := payout.NewService(payout.Config{Env: s.Env, TTL: cfg.QuoteTTL, Book: book, Payouts: payouts, Payee: provider,
		Mover: w, Now: db.Now, Secret: []byte(cfg.QuoteSecret), Addresses: keys,
		Indexes: chain.NewIndexes(payouts.NextIndexes, store.IndexBlock), Faucet: faucet,
		Offered: func(id int64) bool { _, ok := nodes[id]; return ok },
		Sent: func(id int64) {
			if wt, ok := watchers[id]; ok {
				wt.Wake()
			}
		}, Log: s.Log})
	// Every replica places the events written (one at a time) and deletes
	// the old ones (DESIGN §9).
	go store.Feed.Loop(db, s.Log, s.Kit.Registry).Run(ctx)
	payout.Routes(mux, payout.MakeEndpoints(svc, o), creating, s.Log)
	store.Feed.Route(mux, db, o, s.Log)
	deposit.Routes(mux, deposit.MakeEndpoints(deposit.NewService(s.Env, cfg.QuoteTTL, book), o), creating, s.Log)
	return s.Serve(ctx, kithttp.Wrap(mux, s.Env, string(cfg.InternalToken)))
}
