package devstack

import (
	"encoding/hex"
	"fmt"
	"maps"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"time"

	"github.com/partnerpay/api/testkit/chaintest"
)

// The local testnet (DESIGN §10): started like PostgreSQL and Redis, one
// real EVM node from go-ethereum per sandbox chain of the catalogue, each
// serving JSON-RPC, unless CHAIN_RPC_URL_<id> names one already.

// ChainAddrs are where make run's chains serve JSON-RPC by default.
var ChainAddrs = map[int64]string{84532: "127.0.0.1:8545", 11155111: "127.0.0.1:8546"}

// ChainBlockPeriod is how often the local chains mine a block after one
// that carried a transaction (a transaction that waits is mined at once),
// for its confirmations; ChainIdlePeriod, once chaintest.BusyBlocks have
// come so: an idle chain kept on disk grows by a block every 12 s, not
// one a second (about 4.5 KB a block: the system contracts' storage
// written at each).
const (
	ChainBlockPeriod = time.Second
	ChainIdlePeriod  = 12 * time.Second
)

// chainAddr is where the local chain id serves JSON-RPC.
func (s *Stack) chainAddr(id int64) string {
	if a, ok := s.opts.Ports["chain_"+strconv.FormatInt(id, 10)]; ok {
		return a
	}
	return ChainAddrs[id]
}

// chainPortsFree checks, as portsFree does for the services, that every
// local chain's fixed address can be listened on.
func (s *Stack) chainPortsFree() error {
	for _, id := range slices.Sorted(maps.Keys(ChainAddrs)) {
		addr := s.chainAddr(id)
		if _, given := s.opts.ChainURLs[id]; given {
			continue
		}
		if _, port, err := net.SplitHostPort(addr); err != nil || port == "0" {
			continue
		}
		l, err := net.Listen("tcp", addr)
		if err != nil {
			return fmt.Errorf("%s (the local chain %d) is in use: another stack (a second make run?) or another program holds it; stop it, or set CHAIN_%d_ADDR to a free address", addr, id, id)
		}
		l.Close()
	}
	return nil
}

// startChains starts a local chain for each sandbox chain that
// opts.ChainURLs does not name, and answers every chain's RPC URL.
func (s *Stack) startChains() (map[int64]string, error) {
	urls := maps.Clone(s.opts.ChainURLs)
	if urls == nil {
		urls = map[int64]string{}
	}
	for _, id := range slices.Sorted(maps.Keys(ChainAddrs)) {
		if _, given := urls[id]; given {
			fmt.Fprintf(s.opts.Out, "chain %d: %s\n", id, urls[id])
			continue
		}
		addr := s.chainAddr(id)
		if _, port, _ := net.SplitHostPort(addr); port == "0" {
			ln, err := net.Listen("tcp", addr)
			if err != nil {
				return nil, err
			}
			addr = ln.Addr().String()
			ln.Close()
		}
		c, err := chaintest.Start(chaintest.Options{ChainID: id, Addr: addr, Period: ChainBlockPeriod, IdlePeriod: ChainIdlePeriod, Dir: s.chainDir(id)})
		if err != nil {
			return nil, fmt.Errorf("the local chain %d on %s: %w", id, addr, err)
		}
		s.chains = append(s.chains, c)
		urls[id] = c.URL
		fmt.Fprintf(s.opts.Out, "chain %d: a local testnet (go-ethereum) on %s: a transaction is mined at once, its confirmations come a block a second, an idle chain mines every %s\n",
			id, c.URL, ChainIdlePeriod)
	}
	return urls, nil
}

// chainDir is where the local chain id keeps its blocks and state across
// runs, beside the database that records what happened on it: a chain
// that started from its genesis at every run left the database's place,
// nonces and deposits pointing at blocks it no longer had, and its
// watcher failing every round.
func (s *Stack) chainDir(id int64) string {
	return filepath.Join(s.opts.StateDir, "chain", strconv.FormatInt(id, 10))
}

// chainsNew reports whether a local chain this stack starts has no kept
// data yet: it starts from its genesis.
func (s *Stack) chainsNew() bool {
	for id := range ChainAddrs {
		if _, given := s.opts.ChainURLs[id]; given {
			continue
		}
		if !chaintest.Kept(s.chainDir(id)) {
			return true
		}
	}
	return false
}

// forgetChains removes the local chains' kept data, so that all of them
// start from their genesis with a new database: a chain that went on
// would hold the earlier database's transfers to the addresses the new
// one hands out again from the first index (the watcher reads a new
// database's chain from a thousand blocks back, and would take them for
// its payouts' deposits).
func (s *Stack) forgetChains() error {
	removed := false
	for _, id := range slices.Sorted(maps.Keys(ChainAddrs)) {
		if _, given := s.opts.ChainURLs[id]; given {
			continue
		}
		dir := s.chainDir(id)
		if _, err := os.Stat(dir); err != nil {
			continue
		}
		if err := os.RemoveAll(dir); err != nil {
			return fmt.Errorf("the local chain %d's kept data: %w", id, err)
		}
		removed = true
	}
	if removed {
		fmt.Fprintf(s.opts.Out, "chains: the database is new, so the local chains start from their genesis with it (their data under %s removed)\n", filepath.Join(s.opts.StateDir, "chain"))
	}
	return nil
}

// stopChains stops the local chains.
func (s *Stack) stopChains() {
	for _, c := range s.chains {
		_ = c.Close()
	}
	s.chains = nil
}

// DepositXPub is the extended public key (m/44'/60'/0'/0) of the deposit
// wallet of seed (hex).
func DepositXPub(seed string) (string, error) {
	keys, err := depositKeys(seed)
	if err != nil {
		return "", err
	}
	return keys.XPub(), nil
}

// DepositXPrv is the private side of DepositXPub(seed): the signer sweeps
// deposits home with it.
func DepositXPrv(seed string) (string, error) {
	keys, err := depositKeys(seed)
	if err != nil {
		return "", err
	}
	return keys.XPrv(), nil
}

func depositKeys(seed string) (*chaintest.DepositKeys, error) {
	raw, err := hex.DecodeString(seed)
	if err != nil {
		return nil, fmt.Errorf("DEPOSIT_SEED: %w", err)
	}
	return chaintest.NewDepositKeys(raw)
}

// chainEnv is what the payout service is told of the chains: their URLs,
// the deposit wallet's public key (from the stack's seed), and the keys
// of the faucet and of the treasury that sends the refunds (well-known
// testnet keys, funded at genesis).
func chainEnv(urls map[int64]string, seed string) (map[string]string, error) {
	xpub, err := DepositXPub(seed)
	if err != nil {
		return nil, err
	}
	xprv, err := DepositXPrv(seed)
	if err != nil {
		return nil, err
	}
	env := map[string]string{"DEPOSIT_XPUB": xpub, "DEPOSIT_XPRV": xprv, "SANDBOX_FAUCET_KEY": chaintest.Faucet.KeyHex(), "TREASURY_KEY": chaintest.Treasury.KeyHex()}
	for id, u := range urls {
		env["CHAIN_RPC_URL_"+strconv.FormatInt(id, 10)] = u
	}
	return env, nil
}

// TestWallet is the funded wallet make run prints: a partner pays a payout
// from it with any wallet tool (testnet only; its key is public
// knowledge).
var TestWallet = chaintest.Partner
