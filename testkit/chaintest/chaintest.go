// Package chaintest runs the sandbox's local testnet: a real EVM node from
// go-ethereum (its simulated backend, in process), one per sandbox chain
// of the catalogue, with that chain's id, its USDC and EURC at their
// published addresses in the genesis (TestToken, contracts/), and funded
// test wallets. It mines a block every period and at once when a
// transaction is waiting, and serves JSON-RPC on an address when one is
// given (make run, compose); a test drives it in process (Commit, Fork).
//
// It is the local stand-in for Base Sepolia and Ethereum Sepolia (DESIGN
// §10), started like PostgreSQL and Redis; nothing here is ever a mainnet.
package chaintest

import (
	"context"
	"crypto/ecdsa"
	_ "embed"
	"errors"
	"fmt"
	"math/big"
	"net"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/ethereum/go-ethereum"
	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/core/types"
	"github.com/ethereum/go-ethereum/crypto"
	"github.com/ethereum/go-ethereum/eth/ethconfig"
	"github.com/ethereum/go-ethereum/ethclient/simulated"
	"github.com/ethereum/go-ethereum/node"
	"github.com/ethereum/go-ethereum/params"

	"github.com/partnerpay/api/pkg/catalog"
	"github.com/partnerpay/api/pkg/environment"
)

// tokenCode is TestToken's runtime bytecode (hex), as make contracts
// compiles it; CI checks it is what solc makes of contracts/TestToken.sol.
//
//go:embed contracts/TestToken.bin
var tokenCode string

// TestToken's storage layout (contracts/TestToken.sol): the genesis writes
// these slots, as no constructor runs.
const (
	slotName        = 0
	slotSymbol      = 1
	slotTotalSupply = 2
	slotBalances    = 3
)

// A wallet of the testnet: its key is public knowledge (the well-known
// development keys every Ethereum toolkit ships), so it is testnet only.
type Wallet struct {
	Name    string
	Key     *ecdsa.PrivateKey
	Address common.Address
}

// KeyHex is the wallet's private key as a wallet tool takes it (0x…).
func (w Wallet) KeyHex() string { return "0x" + common.Bytes2Hex(crypto.FromECDSA(w.Key)) }

func wallet(name, hexKey string) Wallet {
	k, err := crypto.HexToECDSA(hexKey)
	if err != nil {
		panic(err)
	}
	return Wallet{Name: name, Key: k, Address: crypto.PubkeyToAddress(k.PublicKey)}
}

// The funded wallets, on every chain: each holds 1,000 ETH for gas and
// 10^12 of each token (a mock payout asks for 1,234,567.89).
var (
	// Partner is the test wallet make run prints: a partner pays a
	// payout from it with any wallet tool.
	Partner = wallet("partner", "ac0974bec39a17e36ba4a6b4d238ff944bacb478cbed5efcae784d7bf4f2ff80")
	// Faucet is the sandbox's own wallet: POST /v1/sandbox/payouts/deposit
	// sends from it.
	Faucet = wallet("faucet", "59c6995e998f97a5a0044966f0945389dc9e86dae88c7a8412f4603b6b78690d")
	// Treasury is the wallet that sends refunds and takes sweeps.
	Treasury = wallet("treasury", "5de4111afa1a4b94908f83103eb1f1706367c2e68ca870fc3fb9a804cdab365a")
)

// Funded is every funded wallet.
var Funded = []Wallet{Partner, Faucet, Treasury}

// Unlisted is an ERC-20 of every chain that the catalogue does not list
// (as anyone may make one, and send it anywhere): only the Partner wallet
// holds it, TokenUnits of it.
var Unlisted = common.HexToAddress("0x5150000000000000000000000000000000005150")

// TokenUnits is how many of each token (in its smallest unit) each funded
// wallet holds: 10^12 with 6 decimals.
var TokenUnits = new(big.Int).Mul(big.NewInt(1_000_000_000_000), big.NewInt(1_000_000))

// Options shape a chain.
type Options struct {
	// ChainID is a sandbox chain of the catalogue (84532, 11155111).
	ChainID int64
	// Addr is where JSON-RPC is served (host:port); empty: not served (a
	// test uses Client).
	Addr string
	// Period is how often a block is mined when no transaction waits; 0:
	// only when one waits, or on Commit.
	Period time.Duration
	// IdlePeriod, when set, is how often a block is mined once BusyBlocks
	// blocks have come at Period since the last that carried a
	// transaction: confirmations come at Period's pace, and an idle chain
	// (make run's, left running) mines, and keeps on disk, a block every
	// IdlePeriod instead.
	IdlePeriod time.Duration
	// Manual: blocks are mined only on Commit (a test that counts them).
	Manual bool
	// Dir keeps the chain's blocks and state across restarts (make run's
	// .local/chain/<id>, compose's volume), beside the database that
	// records what happened on it; empty: in memory, from the genesis at
	// every start (the tests).
	Dir string
}

// Chain is one local testnet.
type Chain struct {
	ID     int64
	URL    string // the JSON-RPC endpoint; empty when not served
	Tokens map[string]common.Address

	mu      sync.Mutex // one block at a time: Commit, Fork and the miner
	backend backend
	stop    chan struct{}
	done    chan struct{}
}

// Start starts a chain.
func Start(o Options) (*Chain, error) {
	chain, ok := catalog.ChainsFor(environment.Sandbox).Chain(o.ChainID)
	if !ok || !chain.Testnet {
		return nil, fmt.Errorf("chaintest: %d is not a sandbox chain of the catalogue", o.ChainID)
	}
	code := common.FromHex(strings.TrimSpace(tokenCode))
	alloc := types.GenesisAlloc{}
	eth := new(big.Int).Mul(big.NewInt(1000), big.NewInt(params.Ether))
	for _, w := range Funded {
		alloc[w.Address] = types.Account{Balance: eth}
	}
	c := &Chain{ID: o.ChainID, Tokens: map[string]common.Address{}, stop: make(chan struct{}), done: make(chan struct{})}
	for _, t := range chain.Tokens {
		addr := common.HexToAddress(t.Address)
		c.Tokens[t.Symbol] = addr
		storage := map[common.Hash]common.Hash{
			slot(slotName):        shortString(t.Symbol + " (testnet)"),
			slot(slotSymbol):      shortString(t.Symbol),
			slot(slotTotalSupply): common.BigToHash(new(big.Int).Mul(TokenUnits, big.NewInt(int64(len(Funded))))),
		}
		for _, w := range Funded {
			storage[BalanceSlot(w.Address)] = common.BigToHash(TokenUnits)
		}
		alloc[addr] = types.Account{Code: code, Storage: storage, Balance: new(big.Int)}
	}
	alloc[Unlisted] = types.Account{Code: code, Balance: new(big.Int), Storage: map[common.Hash]common.Hash{
		slot(slotName):               shortString("Unlisted (testnet)"),
		slot(slotSymbol):             shortString("SPAM"),
		slot(slotTotalSupply):        common.BigToHash(TokenUnits),
		BalanceSlot(Partner.Address): common.BigToHash(TokenUnits),
	}}
	var host string
	var port int
	if o.Addr != "" {
		h, p, err := net.SplitHostPort(o.Addr)
		if err != nil {
			return nil, fmt.Errorf("chaintest: address %q: %w", o.Addr, err)
		}
		if port, err = strconv.Atoi(p); err != nil {
			return nil, fmt.Errorf("chaintest: address %q: %w", o.Addr, err)
		}
		host = h
	}
	config := *params.AllDevChainProtocolChanges
	config.ChainID = big.NewInt(o.ChainID)
	configure := func(n *node.Config, e *ethconfig.Config) {
		e.Genesis.Config = &config
		e.NetworkId = uint64(o.ChainID)
		// eth_getLogs searches block by block (each header's bloom), not
		// by the log index: the same answer for the short ranges a watcher
		// asks, for a tenth of the work, since the index is rendered again
		// at every block. And an indexed search waits until the index has
		// caught up with the head: on a loaded machine that wait passed
		// the node's 30 s and the watcher's round failed ("request timed
		// out"), seeing no deposit meanwhile.
		e.LogNoHistory = true
		if o.Addr != "" {
			n.HTTPHost, n.HTTPPort = host, port
			n.HTTPModules = []string{"eth", "net", "web3"}
			n.HTTPVirtualHosts = []string{"*"}
			n.HTTPCors = []string{"*"}
		}
	}
	if o.Dir == "" {
		c.backend = simulated.NewBackend(alloc, configure)
	} else {
		k, err := startKept(o.Dir, alloc, configure)
		if err != nil {
			return nil, fmt.Errorf("chaintest: the chain kept in %s: %w", o.Dir, err)
		}
		c.backend = k
	}
	if o.Addr != "" {
		c.URL = "http://" + o.Addr
	}
	// A block, so the head's time is now (the genesis is 1970's, and a
	// kept chain's head is when it stopped).
	c.backend.Commit()
	go c.mine(o)
	return c, nil
}

// BusyBlocks is how many blocks come at Period after one that carried a
// transaction, before an IdlePeriod: more than any confirmations a chain
// of ours asks.
const BusyBlocks = 16

// mine seals a block when a transaction waits (checked every 20 ms) and
// every period otherwise (o.IdlePeriod once the chain is idle), until
// Close.
func (c *Chain) mine(o Options) {
	defer close(c.done)
	if o.Manual {
		<-c.stop
		return
	}
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	last := time.Now()
	busy := 0 // blocks still to come at o.Period
	for {
		select {
		case <-c.stop:
			return
		case <-tick.C:
		}
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		pending, err := c.backend.Client().PendingTransactionCount(ctx)
		cancel()
		period := o.Period
		if busy == 0 && o.IdlePeriod > 0 {
			period = o.IdlePeriod
		}
		switch {
		case err == nil && pending > 0:
			busy = BusyBlocks
		case period > 0 && time.Since(last) >= period:
			busy = max(busy-1, 0)
		default:
			continue
		}
		c.Commit()
		last = time.Now()
	}
}

// Client is a client of the chain, in process.
func (c *Chain) Client() simulated.Client { return c.backend.Client() }

// Commit mines a block of what waits, and returns its hash.
func (c *Chain) Commit() common.Hash {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.backend.Commit()
}

// Rollback drops the transactions waiting to be mined (after a Fork, the
// ones of the blocks that left the chain wait again): a transfer that
// vanishes in a reorganisation.
func (c *Chain) Rollback() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.backend.Rollback()
}

// AdjustTime mines an empty block d later than the last: the chain's
// clock moves with a test's (the blocks after it keep their lead).
func (c *Chain) AdjustTime(d time.Duration) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.backend.AdjustTime(d)
}

// Fork makes the block parent the head, as a reorganisation does: the
// blocks after it leave the canonical chain (their transactions are
// dropped), and the next Commit builds on parent.
func (c *Chain) Fork(parent common.Hash) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.backend.Fork(parent)
}

// Close stops the chain.
func (c *Chain) Close() error {
	select {
	case <-c.stop:
		return nil
	default:
		close(c.stop)
	}
	<-c.done
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.backend.Close()
}

// Transfer sends value (smallest units) of token from w to to, and returns
// the transaction; the miner (or the caller's Commit) puts it in a block.
func (c *Chain) Transfer(ctx context.Context, w Wallet, token, to common.Address, value *big.Int) (*types.Transaction, error) {
	return SendTransfer(ctx, c.Client(), big.NewInt(c.ID), w.Key, token, to, value)
}

// Transfers sends value of token from w to each of to, at consecutive
// nonces from nonce (batches faster than the node's pending nonce catches
// up), and returns the transactions once the node counts them all
// pending (AwaitPending): a block mined after it holds them. Without that
// wait, a block mined at once missed the last of a batch now and then,
// and nothing mined it after (BenchmarkWatch: 199 deposits recorded of
// 200 transfers).
func (c *Chain) Transfers(ctx context.Context, w Wallet, nonce uint64, token common.Address, to []common.Address, value *big.Int) ([]*types.Transaction, error) {
	cl := c.Client()
	head, err := cl.HeaderByNumber(ctx, nil)
	if err != nil {
		return nil, err
	}
	tip := big.NewInt(params.GWei)
	feeCap := new(big.Int).Add(tip, new(big.Int).Mul(head.BaseFee, big.NewInt(4)))
	chainID := big.NewInt(c.ID)
	out := make([]*types.Transaction, 0, len(to))
	for i, dest := range to {
		tx, err := types.SignNewTx(w.Key, types.LatestSignerForChainID(chainID), &types.DynamicFeeTx{ChainID: chainID, Nonce: nonce + uint64(i),
			GasTipCap: tip, GasFeeCap: feeCap, Gas: 300_000, To: &token, Data: TransferData(dest, value)})
		if err != nil {
			return nil, err
		}
		if err := cl.SendTransaction(ctx, tx); err != nil {
			return nil, err
		}
		out = append(out, tx)
	}
	if len(out) > 0 {
		if err := AwaitPending(ctx, cl, w.Address, nonce+uint64(len(out))-1); err != nil {
			return out, err
		}
	}
	return out, nil
}

// Sender is what SendTransfer needs of a node.
type Sender interface {
	PendingNonceAt(ctx context.Context, account common.Address) (uint64, error)
	SuggestGasTipCap(ctx context.Context) (*big.Int, error)
	HeaderByNumber(ctx context.Context, number *big.Int) (*types.Header, error)
	EstimateGas(ctx context.Context, call ethereum.CallMsg) (uint64, error)
	SendTransaction(ctx context.Context, tx *types.Transaction) error
}

// SendTransfer signs and sends an ERC-20 transfer of value from key's
// address to to, on the chain chainID, at its next pending nonce.
func SendTransfer(ctx context.Context, node Sender, chainID *big.Int, key *ecdsa.PrivateKey, token, to common.Address, value *big.Int) (*types.Transaction, error) {
	from := crypto.PubkeyToAddress(key.PublicKey)
	nonce, err := node.PendingNonceAt(ctx, from)
	if err != nil {
		return nil, err
	}
	tip, err := node.SuggestGasTipCap(ctx)
	if err != nil {
		return nil, err
	}
	head, err := node.HeaderByNumber(ctx, nil)
	if err != nil {
		return nil, err
	}
	if head.BaseFee == nil {
		return nil, errors.New("chaintest: the chain has no base fee")
	}
	feeCap := new(big.Int).Add(tip, new(big.Int).Mul(head.BaseFee, big.NewInt(2)))
	data := TransferData(to, value)
	gas, err := node.EstimateGas(ctx, ethereum.CallMsg{From: from, To: &token, Data: data})
	if err != nil {
		return nil, err
	}
	tx, err := types.SignNewTx(key, types.LatestSignerForChainID(chainID), &types.DynamicFeeTx{
		ChainID: chainID, Nonce: nonce, GasTipCap: tip, GasFeeCap: feeCap, Gas: gas + gas/5, To: &token, Data: data,
	})
	if err != nil {
		return nil, err
	}
	if err := node.SendTransaction(ctx, tx); err != nil {
		return tx, err
	}
	return tx, AwaitPending(ctx, node, from, nonce)
}

// AwaitPending returns once the node counts the transaction at nonce into
// from's pending nonce. A node's pool takes a sent transaction in at once
// but counts it among the pending ones in the background (go-ethereum's
// reorganisation loop): a second send from the same wallet that read the
// pending nonce before would take the same nonce and replace the first,
// and a block mined before would not hold it. It gives up after 5 s (a
// transaction the pool keeps queued behind a gap, or dropped).
func AwaitPending(ctx context.Context, node interface {
	PendingNonceAt(ctx context.Context, account common.Address) (uint64, error)
}, from common.Address, nonce uint64) error {
	deadline := time.Now().Add(5 * time.Second)
	for {
		n, err := node.PendingNonceAt(ctx, from)
		if err != nil {
			return err
		}
		if n > nonce {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("chaintest: the node still counts %s's pending nonce at %d, after sending at %d", from, n, nonce)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(time.Millisecond):
		}
	}
}

// TransferData is the calldata of ERC-20 transfer(to, value).
func TransferData(to common.Address, value *big.Int) []byte {
	data := make([]byte, 0, 4+64)
	data = append(data, crypto.Keccak256([]byte("transfer(address,uint256)"))[:4]...)
	data = append(data, common.LeftPadBytes(to.Bytes(), 32)...)
	return append(data, common.LeftPadBytes(value.Bytes(), 32)...)
}

// BalanceSlot is the storage slot of owner's balance in TestToken.
func BalanceSlot(owner common.Address) common.Hash {
	return crypto.Keccak256Hash(common.LeftPadBytes(owner.Bytes(), 32), common.LeftPadBytes(big.NewInt(slotBalances).Bytes(), 32))
}

func slot(n int64) common.Hash { return common.BigToHash(big.NewInt(n)) }

// shortString is a Solidity string under 32 bytes as its slot holds it:
// the bytes, left-aligned, and twice the length in the last byte.
func shortString(s string) common.Hash {
	var h common.Hash
	copy(h[:], s)
	h[31] = byte(2 * len(s))
	return h
}
