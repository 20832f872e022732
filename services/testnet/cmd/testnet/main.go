// Command testnet serves the sandbox's local chains over JSON-RPC for
// docker compose (DESIGN §10): a real EVM node from go-ethereum (its
// simulated backend) per sandbox chain of the catalogue, with USDC and
// EURC at their published addresses and funded test wallets
// (testkit/chaintest). make run and the tests run the same chains in
// process. It is a sandbox stand-in, like sandboxbank: never part of a
// production deployment.
//
//	testnet              serve (TESTNET_ADDR_84532, TESTNET_ADDR_11155111, TESTNET_BLOCK_PERIOD, TESTNET_IDLE_BLOCK_PERIOD, TESTNET_DATA_DIR)
//	testnet healthcheck  exit 0 if every chain answers eth_chainId
package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"syscall"
	"time"

	"github.com/partnerpay/api/pkg/config"
	"github.com/partnerpay/api/testkit/chaintest"
)

// settings is the testnet's configuration, loaded once.
type settings struct {
	BaseSepolia     string        `env:"TESTNET_ADDR_84532, default=0.0.0.0:8545"`
	EthereumSepolia string        `env:"TESTNET_ADDR_11155111, default=0.0.0.0:8546"`
	BlockPeriod     time.Duration `env:"TESTNET_BLOCK_PERIOD, default=1s"`
	// IdleBlockPeriod is how often an idle chain mines, once
	// chaintest.BusyBlocks have come at BlockPeriod after the last
	// transaction (make run's pace).
	IdleBlockPeriod time.Duration `env:"TESTNET_IDLE_BLOCK_PERIOD, default=12s"`
	// DataDir keeps each chain's blocks and state (a directory per chain
	// id) across restarts, beside the database volume that records what
	// happened on them; empty: in memory, from the genesis at each start.
	DataDir string `env:"TESTNET_DATA_DIR"`
}

func (s settings) addrs() map[int64]string {
	return map[int64]string{84532: s.BaseSepolia, 11155111: s.EthereumSepolia}
}

func main() {
	log := slog.New(slog.NewJSONHandler(os.Stderr, nil)).With("service", "testnet")
	var cfg settings
	if err := config.Load(os.Getenv, &cfg); err != nil {
		log.Error("configuration", "err", err)
		os.Exit(1)
	}
	if len(os.Args) > 1 && os.Args[1] == "healthcheck" {
		if err := healthcheck(cfg); err != nil {
			fmt.Fprintln(os.Stderr, "testnet:", err)
			os.Exit(1)
		}
		return
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	var chains []*chaintest.Chain
	for id, addr := range cfg.addrs() {
		dir := ""
		if cfg.DataDir != "" {
			dir = filepath.Join(cfg.DataDir, strconv.FormatInt(id, 10))
		}
		c, err := chaintest.Start(chaintest.Options{ChainID: id, Addr: addr, Period: cfg.BlockPeriod, IdlePeriod: cfg.IdleBlockPeriod, Dir: dir})
		if err != nil {
			log.Error("chain", "chain", id, "err", err)
			os.Exit(1)
		}
		chains = append(chains, c)
		log.Info("serving", "chain", id, "addr", addr, "block_period", cfg.BlockPeriod.String(), "idle_block_period", cfg.IdleBlockPeriod.String(), "data_dir", dir)
	}
	log.Info("funded test wallet (testnet only: its key is public knowledge)", "address", chaintest.Partner.Address.Hex(),
		"private_key", chaintest.Partner.KeyHex())
	<-ctx.Done()
	for _, c := range chains {
		_ = c.Close()
	}
	log.Info("stopped")
}

// healthcheck asks each chain its id, on loopback.
func healthcheck(cfg settings) error {
	client := &http.Client{Timeout: 2 * time.Second}
	for id, addr := range cfg.addrs() {
		_, port, err := net.SplitHostPort(addr)
		if err != nil {
			return err
		}
		body := []byte(`{"jsonrpc":"2.0","id":1,"method":"eth_chainId","params":[]}`)
		resp, err := client.Post("http://127.0.0.1:"+port, "application/json", bytes.NewReader(body))
		if err != nil {
			return err
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		var answer struct{ Result string }
		if err := json.Unmarshal(b, &answer); err != nil {
			return fmt.Errorf("chain %d: %s", id, b)
		}
		if got, err := strconv.ParseInt(answer.Result, 0, 64); err != nil || got != id {
			return fmt.Errorf("chain %d answers chain id %q", id, answer.Result)
		}
	}
	return nil
}
