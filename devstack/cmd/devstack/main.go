// Command devstack is `make run`: the whole stack as local processes, until
// Ctrl-C. See package devstack for what it starts.
package main

import (
	"context"
	"fmt"
	"maps"
	"os"
	"os/signal"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"

	"github.com/partnerpay/api/devstack"
	"github.com/partnerpay/api/pkg/config"
)

func main() {
	if len(os.Args) == 3 && (os.Args[1] == "deposit-key" || os.Args[1] == "deposit-private-key") {
		// make env: the deposit wallet's public key of a seed (or its
		// private side, for the signer that sweeps), for compose.
		derive := devstack.DepositXPub
		if os.Args[1] == "deposit-private-key" {
			derive = devstack.DepositXPrv
		}
		xpub, err := derive(os.Args[2])
		if err != nil {
			fmt.Fprintln(os.Stderr, "devstack:", err)
			os.Exit(1)
		}
		fmt.Println(xpub)
		return
	}
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
	// Every service's address may be moved (a second stack beside the
	// first): <SERVICE>_ADDR and <SERVICE>_ADMIN_ADDR.
	ports := map[string]string{}
	for _, name := range devstack.Names() {
		up := strings.ToUpper(name)
		if v := getenv(up + "_ADDR"); v != "" && name != "gateway" {
			ports[name] = v
		}
		if v := getenv(up + "_ADMIN_ADDR"); v != "" {
			ports[name+"_admin"] = v
		}
	}
	// A chain named by CHAIN_RPC_URL_<id> is used as it is; any other
	// sandbox chain is a local testnet, on CHAIN_<id>_ADDR if set.
	chainURLs := map[int64]string{}
	for id := range devstack.ChainAddrs {
		n := strconv.FormatInt(id, 10)
		if v := getenv("CHAIN_RPC_URL_" + n); v != "" {
			chainURLs[id] = v
		}
		if v := getenv("CHAIN_" + n + "_ADDR"); v != "" {
			ports["chain_"+n] = v
		}
	}
	s, err := devstack.Start(ctx, devstack.Options{
		ChainURLs:       chainURLs,
		Ports:           ports,
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
	keysFile := s.KeysFile()
	if wd, err := os.Getwd(); err == nil {
		if rel, err := filepath.Rel(wd, keysFile); err == nil && !strings.HasPrefix(rel, "..") {
			keysFile = rel
		}
	}
	fmt.Println()
	fmt.Println("The sandbox is up. Gateway:", s.GatewayURL)
	if s.SandboxKey != "" {
		fmt.Println("A sandbox key with every product was issued. It is shown only now; keep it, and paste this line:")
		fmt.Println()
		fmt.Println("    export API=" + s.GatewayURL + " KEY=" + s.SandboxKey)
		fmt.Println()
		fmt.Printf("The key allows %d requests a second. For a faster one (a load test, a batch job):\n", devstack.SandboxKeyRate)
		fmt.Println("    " + devstack.FasterKeyCommand(keysFile))
	} else {
		fmt.Println("The keys file " + keysFile + " exists; with a key of yours, paste:")
		fmt.Println()
		fmt.Println("    export API=" + s.GatewayURL + " KEY=<your key>")
		fmt.Println()
		fmt.Println("Issue another key (it is printed once) with:")
		fmt.Println("    " + devstack.FasterKeyCommand(keysFile))
	}
	fmt.Println("Try:  curl -s \"$API/v1/config\" -H \"Authorization: Bearer $KEY\"   (the walkthroughs: docs/partner-guide.md)")
	fmt.Println()
	fmt.Println("A funded test wallet on the local chains (testnet only: its key is public knowledge), to pay a payout's")
	fmt.Println("deposit.address with any wallet tool; POST /v1/sandbox/payouts/deposit sends one for you instead:")
	fmt.Println("    address      " + devstack.TestWallet.Address.Hex())
	fmt.Println("    private key  " + devstack.TestWallet.KeyHex())
	for _, id := range slices.Sorted(maps.Keys(s.ChainURLs)) {
		fmt.Printf("    chain %-9d %s\n", id, s.ChainURLs[id])
	}
	fmt.Println("A service that exits is restarted (with a growing delay, and a log line naming it). Ctrl-C stops everything.")
	s.Supervise(ctx, func(line string) { fmt.Fprintln(os.Stderr, line) })
	return nil
}
