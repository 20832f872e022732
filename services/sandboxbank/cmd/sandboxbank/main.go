// Command sandboxbank is the stand-in for the external bank provider in
// sandbox: the provider API the fiat, consent, orders and payout services
// call, and the hosted consent and card pages browsers open. It is never part of a production
// deployment, and it keeps its state in memory.
//
//	sandboxbank              serve (configured by environment variables)
//	sandboxbank healthcheck  exit 0 if the service on SANDBOXBANK_ADDR is healthy
package main

import (
	"context"
	"github.com/partnerpay/api/pkg/config"
	"time"

	"github.com/partnerpay/api/pkg/serve"
	"github.com/partnerpay/api/services/sandboxbank/internal/bank"
)

func main() { serve.Main("sandboxbank", run) }

type settings struct {
	ProviderKey     config.Secret `env:"BANK_PROVIDER_KEY" doc:"the provider API key the services use"`
	PublicURL       string        `env:"SANDBOXBANK_PUBLIC_URL" optional:"true" url:"absolute"`
	LinkTTL         time.Duration `env:"SANDBOXBANK_LINK_TTL" default:"5m"`
	SettlementDelay time.Duration `env:"SANDBOXBANK_SETTLEMENT_DELAY" default:"3s"`
	IdentityDelay   time.Duration `env:"SANDBOXBANK_IDENTITY_DELAY" default:"0s" zero:"allowed"`
	PayoutSettle    time.Duration `env:"SANDBOX_PAYOUT_SETTLE" default:"3s"`
	Latency         time.Duration `env:"SANDBOXBANK_LATENCY" default:"0s" zero:"allowed"`
}

func run(ctx context.Context, s *serve.Setup) error {
	var cfg settings
	if err := s.Config(&cfg); err != nil {
		return err
	}
	if cfg.PublicURL == "" {
		cfg.PublicURL = "http://" + s.Addr
	}
	b := bank.New(bank.Config{PublicURL: cfg.PublicURL, LinkTTL: cfg.LinkTTL, SettlementDelay: cfg.SettlementDelay, IdentityDelay: cfg.IdentityDelay, PayoutSettle: cfg.PayoutSettle, Latency: cfg.Latency})
	s.Log.Info("sandbox bank epoch", "epoch", b.Epoch(), "public_url", cfg.PublicURL)
	return s.Serve(ctx, bank.NewHandler(b, string(cfg.ProviderKey), s.Log))
}
