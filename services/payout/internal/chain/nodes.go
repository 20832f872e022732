// Package chain is the payout service's side of the chain (DESIGN §10):
// the nodes it reads and writes over JSON-RPC (go-ethereum's ethclient),
// the deposit addresses derived from a key we hold (BIP-32), the watcher
// that records each confirmed transfer to a deposit address once and
// applies it to its payout (§3's arrival rules), and the sandbox's faucet.
package chain

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/big"
	"net/http"
	"net/url"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/ethereum/go-ethereum"
	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/core/types"
	"github.com/ethereum/go-ethereum/ethclient"
	"github.com/ethereum/go-ethereum/rpc"

	"github.com/partnerpay/api/pkg/catalog"
	"github.com/partnerpay/api/pkg/config"
	"github.com/partnerpay/api/pkg/environment"
)

// Config is where the chains are reached (the payout binary's
// configuration embeds it): one JSON-RPC URL per chain of the catalogue,
// CHAIN_RPC_URL_<chain id>. A chain without one is not offered: it is not
// watched (the boot log says so), and no new payout starts on it.
type Config struct {
	BaseSepolia     string `env:"CHAIN_RPC_URL_84532"`
	EthereumSepolia string `env:"CHAIN_RPC_URL_11155111"`
	Ethereum        string `env:"CHAIN_RPC_URL_1"`
	Base            string `env:"CHAIN_RPC_URL_8453"`
	Polygon         string `env:"CHAIN_RPC_URL_137"`
	Arbitrum        string `env:"CHAIN_RPC_URL_42161"`
	Optimism        string `env:"CHAIN_RPC_URL_10"`
	// Confirmations is how many blocks a transfer's block must have on top
	// of it, itself included, before its deposit is recorded, per chain
	// ("84532:2,1:12"); a chain not listed takes its default (Defaults).
	Confirmations map[string]string `env:"CHAIN_CONFIRMATIONS"`
	// DepositXPub is the extended public key deposit addresses are
	// derived from (xpub…, the BIP-44 external chain m/44'/60'/0'/0 of the
	// deposit wallet); the private side never reaches this service.
	// It is masked in the logs: whoever has it can tell every deposit
	// address is ours.
	DepositXPub config.Secret `env:"DEPOSIT_XPUB"`
	// FaucetKey is the sandbox faucet wallet's private key (hex): POST
	// /v1/sandbox/payouts/deposit sends from it. Sandbox only.
	FaucetKey config.Secret `env:"SANDBOX_FAUCET_KEY"`
	// DepositXPrv is the deposit wallet's extended private key (xprv…, the
	// private side of DepositXPub): the signer sweeps final deposits home
	// to the treasury with it. Without it nothing is swept.
	DepositXPrv config.Secret `env:"DEPOSIT_XPRV"`
	// TreasuryKey is the treasury wallet's private key (hex): the signer
	// sends every refund from it, on every chain with a node (an EVM key
	// is the same wallet on each). Without it no refund is sent: refunds
	// stay pending, and the boot log says so.
	TreasuryKey config.Secret `env:"TREASURY_KEY"`
	// ReplaceAfter is how long a refund's broadcast transaction may go
	// unmined before it is replaced at its nonce with a higher fee.
	ReplaceAfter time.Duration `env:"CHAIN_REPLACE_AFTER, default=2m"`
}

// URLs is the configured RPC URL of each chain id.
func (c Config) URLs() map[int64]string {
	out := map[int64]string{}
	for id, u := range map[int64]string{84532: c.BaseSepolia, 11155111: c.EthereumSepolia, 1: c.Ethereum, 8453: c.Base,
		137: c.Polygon, 42161: c.Arbitrum, 10: c.Optimism} {
		if u != "" {
			out[id] = u
		}
	}
	return out
}

// Defaults are the confirmations a chain's deposit waits for when
// CHAIN_CONFIRMATIONS does not say.
var Defaults = map[int64]uint64{84532: 2, 11155111: 2, 1: 12, 8453: 10, 137: 64, 42161: 20, 10: 10}

// Validate checks the URLs and confirmations.
func (c Config) Validate() error {
	var errs []error
	for id, u := range c.URLs() {
		if p, err := url.Parse(u); err != nil || (p.Scheme != "http" && p.Scheme != "https" && p.Scheme != "ws" && p.Scheme != "wss") || p.Host == "" {
			errs = append(errs, fmt.Errorf("CHAIN_RPC_URL_%d must be an http(s) or ws(s) URL", id))
		}
	}
	if c.ReplaceAfter < time.Second {
		errs = append(errs, errors.New("CHAIN_REPLACE_AFTER must be a second or more"))
	}
	for k, v := range c.Confirmations {
		id, err := strconv.ParseInt(k, 10, 64)
		if _, known := Defaults[id]; err != nil || !known {
			errs = append(errs, fmt.Errorf("CHAIN_CONFIRMATIONS names %q, not a chain of the catalogue", k))
		}
		if n, err := strconv.ParseUint(v, 10, 16); err != nil || n == 0 {
			errs = append(errs, fmt.Errorf("CHAIN_CONFIRMATIONS for %s must be a whole number of blocks, 1 or more", k))
		}
	}
	return errors.Join(errs...)
}

// confirmations is what chain id waits for.
func (c Config) confirmations(id int64) uint64 {
	if v, ok := c.Confirmations[strconv.FormatInt(id, 10)]; ok {
		n, _ := strconv.ParseUint(v, 10, 16)
		return n
	}
	return Defaults[id]
}

// Client is what the service asks of a chain's node (go-ethereum's
// ethclient over JSON-RPC; a test's in-process simulated chain).
type Client interface {
	ChainID(ctx context.Context) (*big.Int, error)
	BlockNumber(ctx context.Context) (uint64, error)
	HeaderByNumber(ctx context.Context, number *big.Int) (*types.Header, error)
	FilterLogs(ctx context.Context, q ethereum.FilterQuery) ([]types.Log, error)
	PendingNonceAt(ctx context.Context, account common.Address) (uint64, error)
	SuggestGasTipCap(ctx context.Context) (*big.Int, error)
	EstimateGas(ctx context.Context, call ethereum.CallMsg) (uint64, error)
	SendTransaction(ctx context.Context, tx *types.Transaction) error
	TransactionReceipt(ctx context.Context, hash common.Hash) (*types.Receipt, error)
	TransactionByHash(ctx context.Context, hash common.Hash) (tx *types.Transaction, isPending bool, err error)
	NonceAt(ctx context.Context, account common.Address, blockNumber *big.Int) (uint64, error)
	BalanceAt(ctx context.Context, account common.Address, blockNumber *big.Int) (*big.Int, error)
	CallContract(ctx context.Context, call ethereum.CallMsg, blockNumber *big.Int) ([]byte, error)
}

// Node is one chain's node, checked to be the chain it is configured as.
type Node struct {
	Chain         *catalog.Chain
	Client        Client
	Confirmations uint64
}

// NewNode is the node of chain id of env's catalogue reached by c,
// waiting for confirmations (0: the chain's default).
func NewNode(env environment.Name, id int64, c Client, confirmations uint64) (*Node, error) {
	ch, ok := catalog.ChainsFor(env).Chain(id)
	if !ok {
		return nil, fmt.Errorf("chain %d is not in the %s catalogue", id, env)
	}
	if confirmations == 0 {
		confirmations = Defaults[id]
	}
	return &Node{Chain: ch, Client: c, Confirmations: confirmations}, nil
}

// Close closes every node's connection.
func Close(nodes map[int64]*Node) { closeAll(nodes) }

// Dial reaches every configured chain of env's catalogue and checks, by
// the node's own eth_chainId, that it is that chain: a URL whose node is
// another chain, or a chain env does not list (a testnet in production, a
// mainnet in the sandbox), stops the boot. A node that does not answer is
// asked again for up to wait. It logs the chains it watches, and those
// without a URL, which are not watched.
func Dial(ctx context.Context, cfg Config, env environment.Name, wait time.Duration, log *slog.Logger) (map[int64]*Node, error) {
	chains := catalog.ChainsFor(env)
	nodes := map[int64]*Node{}
	urls := cfg.URLs()
	for id, u := range urls {
		ch, ok := chains.Chain(id)
		if !ok {
			closeAll(nodes)
			return nil, fmt.Errorf("CHAIN_RPC_URL_%d: chain %d is not in the %s catalogue", id, id, env)
		}
		c, err := dialNode(ctx, u, callWait)
		if err != nil {
			closeAll(nodes)
			return nil, fmt.Errorf("CHAIN_RPC_URL_%d: %w", id, err)
		}
		got, err := chainID(ctx, c, wait)
		if err != nil {
			c.Close()
			closeAll(nodes)
			return nil, fmt.Errorf("CHAIN_RPC_URL_%d: eth_chainId: %w", id, err)
		}
		if got.Cmp(big.NewInt(id)) != 0 {
			c.Close()
			closeAll(nodes)
			return nil, fmt.Errorf("CHAIN_RPC_URL_%d reaches chain %s, not %d", id, got, id)
		}
		nodes[id] = &Node{Chain: ch, Client: c, Confirmations: cfg.confirmations(id)}
	}
	var watched, unwatched []string
	for _, ch := range chains.List {
		name := fmt.Sprintf("%d (%s)", ch.ID, ch.Name)
		if n, ok := nodes[ch.ID]; ok {
			watched = append(watched, fmt.Sprintf("%s, %d confirmations", name, n.Confirmations))
		} else {
			unwatched = append(unwatched, name)
		}
	}
	sort.Strings(watched)
	sort.Strings(unwatched)
	if len(unwatched) > 0 {
		log.Warn("chains without CHAIN_RPC_URL_<id>: their deposits are not seen", "chains", strings.Join(unwatched, "; "))
	}
	if len(watched) > 0 {
		log.Info("chains", "watched", strings.Join(watched, "; "))
	}
	return nodes, nil
}

// callWait bounds one call to a node over HTTP. A node that stalls (one
// whose log index lags its head holds eth_getLogs until its own 30 s
// timeout; a proxy in front of one may never answer) fails the call, and
// the worker's round with it, instead of holding the round, and the
// chain, for as long as the node likes: the next round asks again.
const callWait = 5 * time.Second

// dialNode reaches a node's JSON-RPC, each HTTP call bounded by wait. A
// ws(s) URL's calls are not: go-ethereum's client has no per-call bound
// over WebSocket, so docs/operating.md recommends http(s).
func dialNode(ctx context.Context, u string, wait time.Duration) (*ethclient.Client, error) {
	c, err := rpc.DialOptions(ctx, u, rpc.WithHTTPClient(&http.Client{Timeout: wait}))
	if err != nil {
		return nil, err
	}
	return ethclient.NewClient(c), nil
}

// chainID asks the node its chain id, again and again for up to wait.
func chainID(ctx context.Context, c *ethclient.Client, wait time.Duration) (*big.Int, error) {
	deadline := time.Now().Add(wait)
	for {
		cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		id, err := c.ChainID(cctx)
		cancel()
		if err == nil || time.Now().After(deadline) || ctx.Err() != nil {
			return id, err
		}
		time.Sleep(250 * time.Millisecond)
	}
}

func closeAll(nodes map[int64]*Node) {
	for _, n := range nodes {
		if c, ok := n.Client.(interface{ Close() }); ok {
			c.Close()
		}
	}
}
