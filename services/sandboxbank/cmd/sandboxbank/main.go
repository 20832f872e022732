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
	"time"

	"github.com/partnerpay/api/pkg/environment"
	"github.com/partnerpay/api/pkg/serve"
	"github.com/partnerpay/api/services/sandboxbank/internal/bank"
)

func main() {
	serve.Main(serve.Binary{Name: "sandboxbank", Addr: "127.0.0.1:8090", AdminAddr: "127.0.0.1:9190", Environment: environment.Sandbox}, run)
}

func run(ctx context.Context, s *serve.Setup) error {
	key, err := serve.Secret(s.Getenv, "BANK_PROVIDER_KEY", "the provider API key the services use")
	if err != nil {
		return err
	}
	cfg := bank.Config{PublicURL: serve.Env(s.Getenv, "SANDBOXBANK_PUBLIC_URL", "http://"+s.Addr)}
	if cfg.LinkTTL, err = serve.EnvDuration(s.Getenv, "SANDBOXBANK_LINK_TTL", 5*time.Minute); err != nil {
		return err
	}
	if cfg.SettlementDelay, err = serve.EnvDuration(s.Getenv, "SANDBOXBANK_SETTLEMENT_DELAY", 3*time.Second); err != nil {
		return err
	}
	if v := s.Getenv("SANDBOXBANK_IDENTITY_DELAY"); v != "0" && v != "0s" {
		if cfg.IdentityDelay, err = serve.EnvDuration(s.Getenv, "SANDBOXBANK_IDENTITY_DELAY", 0); err != nil {
			return err
		}
	}
	b := bank.New(cfg)
	s.Log.Info("starting", "addr", s.Addr, "admin_addr", s.AdminAddr, "public_url", cfg.PublicURL, "epoch", b.Epoch(),
		"link_ttl", cfg.LinkTTL.String(), "settlement_delay", cfg.SettlementDelay.String(),
		"identity_delay", cfg.IdentityDelay.String(), "provider_key", "[set]")
	return s.Serve(ctx, bank.NewHandler(b, key, s.Log))
}
