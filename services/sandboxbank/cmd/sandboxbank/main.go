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
	"errors"
	"time"

	"github.com/partnerpay/api/pkg/bankprovider"
	"github.com/partnerpay/api/pkg/config"
	"github.com/partnerpay/api/pkg/environment"
	"github.com/partnerpay/api/pkg/serve"
	"github.com/partnerpay/api/services/sandboxbank/internal/bank"
)

func main() {
	// Nothing upstream: its answers are immediate.
	serve.Main(serve.Binary{Name: "sandboxbank", Addr: "127.0.0.1:8090", AdminAddr: "127.0.0.1:9190", Environment: environment.Sandbox, Grace: 10 * time.Second}, &settings{}, run)
}

// settings is the sandbox bank's configuration, loaded once (config.Load).
type settings struct {
	Serve  serve.Config
	Listen serve.Listen `env:", prefix=SANDBOXBANK_"`
	// The provider API key the services use.
	ProviderKey     config.Secret `env:"BANK_PROVIDER_KEY, required"`
	PublicURL       config.URL    `env:"SANDBOXBANK_PUBLIC_URL"`
	LinkTTL         time.Duration `env:"SANDBOXBANK_LINK_TTL, default=5m"`
	SettlementDelay time.Duration `env:"SANDBOXBANK_SETTLEMENT_DELAY, default=3s"`
	IdentityDelay   time.Duration `env:"SANDBOXBANK_IDENTITY_DELAY, default=0s"`
	PayoutSettle    time.Duration `env:"SANDBOX_PAYOUT_SETTLE, default=3s"`
	Latency         time.Duration `env:"SANDBOXBANK_LATENCY, default=0s"`
	// Where it notifies that its changes feed has news (a signed POST,
	// the gateway's /provider/notifications); empty: it notifies nobody.
	NotifyURL config.URL `env:"SANDBOXBANK_NOTIFY_URL"`
}

func (c *settings) Serving() *serve.Config { return &c.Serve }

// Listening is where it listens.
func (c *settings) Listening() *serve.Listen { return &c.Listen }

// Validate checks the delays.
func (c *settings) Validate() error {
	return errors.Join(config.Positive("SANDBOXBANK_LINK_TTL", c.LinkTTL), config.Positive("SANDBOXBANK_SETTLEMENT_DELAY", c.SettlementDelay),
		config.NotNegative("SANDBOXBANK_IDENTITY_DELAY", c.IdentityDelay), config.Positive("SANDBOX_PAYOUT_SETTLE", c.PayoutSettle),
		config.NotNegative("SANDBOXBANK_LATENCY", c.Latency))
}

func run(ctx context.Context, s *serve.Setup, cfg *settings) error {
	public := string(cfg.PublicURL)
	if public == "" {
		public = "http://" + s.Addr()
	}
	b := bank.New(bank.Config{PublicURL: public, LinkTTL: cfg.LinkTTL, SettlementDelay: cfg.SettlementDelay, IdentityDelay: cfg.IdentityDelay, PayoutSettle: cfg.PayoutSettle, Latency: cfg.Latency})
	s.Log.Info("sandbox bank epoch", "epoch", b.Epoch(), "public_url", public)
	if cfg.NotifyURL != "" {
		go b.Notify(ctx, string(cfg.NotifyURL), bankprovider.NotifySecret(string(cfg.ProviderKey)), 200*time.Millisecond, s.Log)
	}
	return s.Serve(ctx, bank.NewHandler(b, string(cfg.ProviderKey), s.Log))
}
