// Command sandboxbank is the stand-in for the external bank provider in
// sandbox: the provider API the fiat and consent services call, and the
// hosted consent page browsers open. It is never part of a production
// deployment, and it keeps its state in memory.
//
//	sandboxbank              serve (configured by environment variables)
//	sandboxbank healthcheck  exit 0 if the service on SANDBOXBANK_ADDR is healthy
package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/partnerpay/api/pkg/environment"
	"github.com/partnerpay/api/pkg/obs"
	"github.com/partnerpay/api/pkg/serve"
	"github.com/partnerpay/api/services/sandboxbank/internal/bank"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, os.Args[1:], os.Getenv, os.Stderr); err != nil {
		fmt.Fprintln(os.Stderr, "sandboxbank:", err)
		os.Exit(1)
	}
}

const defaultAddr = "127.0.0.1:8090"

func run(ctx context.Context, args []string, getenv func(string) string, stderr io.Writer) error {
	if len(args) > 0 {
		if args[0] == "healthcheck" {
			return serve.Healthcheck(serve.Env(getenv, "SANDBOXBANK_ADDR", defaultAddr))
		}
		return fmt.Errorf("unknown command %q (want healthcheck, or nothing to serve)", args[0])
	}
	addr := serve.Env(getenv, "SANDBOXBANK_ADDR", defaultAddr)
	adminAddr := serve.Env(getenv, "SANDBOXBANK_ADMIN_ADDR", "127.0.0.1:9190")
	public := serve.Env(getenv, "SANDBOXBANK_PUBLIC_URL", "http://"+addr)
	key := getenv("BANK_PROVIDER_KEY")
	if len(key) < 16 {
		return fmt.Errorf("BANK_PROVIDER_KEY must be set to the provider API key (at least 16 characters) the services use")
	}
	cfg := bank.Config{PublicURL: public}
	var err error
	if cfg.LinkTTL, err = serve.EnvDuration(getenv, "SANDBOXBANK_LINK_TTL", 5*time.Minute); err != nil {
		return err
	}
	if cfg.SettlementDelay, err = serve.EnvDuration(getenv, "SANDBOXBANK_SETTLEMENT_DELAY", 3*time.Second); err != nil {
		return err
	}
	if v := getenv("SANDBOXBANK_IDENTITY_DELAY"); v == "0" || v == "0s" {
		cfg.IdentityDelay = 0
	} else if cfg.IdentityDelay, err = serve.EnvDuration(getenv, "SANDBOXBANK_IDENTITY_DELAY", 0); err != nil {
		return err
	}
	log := serve.Logger(stderr, "sandboxbank")
	b := bank.New(cfg)
	log.Info("starting", "addr", addr, "admin_addr", adminAddr, "public_url", public, "epoch", b.Epoch(),
		"link_ttl", cfg.LinkTTL.String(), "settlement_delay", cfg.SettlementDelay.String(),
		"identity_delay", cfg.IdentityDelay.String(), "provider_key", "[set]")

	kit, err := obs.NewKit(ctx, "sandboxbank", environment.Sandbox, getenv)
	if err != nil {
		return err
	}
	defer kit.Shutdown(context.Background())
	h := bank.NewHandler(b, key, log)
	return serve.Run(ctx, log, 10*time.Second,
		serve.NewServer(addr, kit.Serve(h), log),
		serve.NewServer(adminAddr, kit.Admin(), log),
	)
}
