// Command devstack is `make run`: the whole stack as local processes, until
// Ctrl-C. See package devstack for what it starts.
package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/partnerpay/api/devstack"
	"github.com/partnerpay/api/pkg/config"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, os.Getenv); err != nil {
		fmt.Fprintln(os.Stderr, "devstack:", err)
		os.Exit(1)
	}
}

// settings is what make run reads of its environment, loaded once
// (config.Load), as every binary's configuration is.
type settings struct {
	BinDir          string `env:"BIN_DIR, default=bin"`
	KeysFile        string `env:"GATEWAY_KEYS_FILE"`
	RedisURL        string `env:"REDIS_URL"`
	RedisClusterURL string `env:"REDIS_CLUSTER_URL"`
	DatabaseURL     string `env:"DATABASE_URL"`
	GatewayAddr     string `env:"GATEWAY_ADDR"`
	// A local stack has no load balancer to drain from: on Ctrl-C each
	// binary stops at once (after its requests in flight), not 5 s later.
	ShutdownDrain string `env:"SHUTDOWN_DRAIN, default=0s"`
}

func run(ctx context.Context, getenv func(string) string) error {
	var cfg settings
	if err := config.Load(getenv, &cfg); err != nil {
		return err
	}
	s, err := devstack.Start(ctx, devstack.Options{
		Env:             map[string]string{"SHUTDOWN_DRAIN": cfg.ShutdownDrain},
		BinDir:          cfg.BinDir,
		KeysFile:        cfg.KeysFile,
		RedisURL:        cfg.RedisURL,
		RedisClusterURL: cfg.RedisClusterURL,
		DatabaseURL:     cfg.DatabaseURL,
		GatewayAddr:     cfg.GatewayAddr,
		Installer:       devstack.AptInstaller{},
		Logs:            os.Stderr,
		Out:             os.Stdout,
	})
	if err != nil {
		return err
	}
	defer s.Stop()
	fmt.Println()
	fmt.Println("The sandbox is up. Gateway:", s.GatewayURL)
	if s.SandboxKey != "" {
		fmt.Println("A sandbox key with every product was issued. It is shown only now; keep it:")
		fmt.Println()
		fmt.Println("    export KEY=" + s.SandboxKey)
		fmt.Println()
	} else {
		fmt.Println("Keys file exists; issue another key with: bin/gateway keys issue --file .local/keys.json --id NAME --products bank,fiat,deposit,card --source-chains 84532 --destination-chains 84532 --tokens 84532:0x036CbD53842c5426634e7929541eC2318f3dCF7e")
	}
	fmt.Println("Try:  curl -s " + s.GatewayURL + "/v1/config -H \"Authorization: Bearer $KEY\"")
	fmt.Println("A service that exits is restarted (with a growing delay, and a log line naming it). Ctrl-C stops everything.")
	s.Supervise(ctx, func(line string) { fmt.Fprintln(os.Stderr, line) })
	return nil
}
