package chaintest

import (
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"time"

	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/core"
	"github.com/ethereum/go-ethereum/core/rawdb"
	"github.com/ethereum/go-ethereum/core/types"
	"github.com/ethereum/go-ethereum/eth"
	"github.com/ethereum/go-ethereum/eth/catalyst"
	"github.com/ethereum/go-ethereum/eth/ethconfig"
	"github.com/ethereum/go-ethereum/eth/filters"
	"github.com/ethereum/go-ethereum/ethclient"
	"github.com/ethereum/go-ethereum/ethclient/simulated"
	"github.com/ethereum/go-ethereum/node"
	"github.com/ethereum/go-ethereum/p2p"
	"github.com/ethereum/go-ethereum/params"
	"github.com/ethereum/go-ethereum/rpc"
)

// backend is what a Chain drives: go-ethereum's simulated backend (in
// memory, from the genesis at every start) or a kept chain.
type backend interface {
	Commit() common.Hash
	Rollback()
	Fork(parent common.Hash) error
	AdjustTime(d time.Duration) error
	Client() simulated.Client
	Close() error
}

// kept is a chain whose blocks and state live in a directory, so that it
// goes on where it stopped after a restart, as the database that records
// its deposits, refunds and nonces does (make run's .local/pg, compose's
// volume). It is the simulated backend's own assembly (a node, the eth
// service, the filter API, the simulated beacon) without its return to
// the genesis at start, as geth --dev --datadir keeps its chain. It keeps
// every block's state (an archive, hash-keyed, no dirty cache): each
// block is written to the file as it is sealed, so a killed process
// loses none it announced (a crash of the machine may lose the last
// seconds' blocks; the chain watcher then rewinds, as for a
// reorganisation).
type kept struct {
	node   *node.Node
	beacon *catalyst.SimulatedBeacon
	client *ethclient.Client
}

// instance is the node's name, and so its directory under a kept
// chain's Dir.
const instance = "chain"

// Kept reports whether dir holds a kept chain (Options.Dir): one started
// there before, which the next Start goes on from.
func Kept(dir string) bool {
	_, err := os.Stat(filepath.Join(dir, instance, "chaindata"))
	return err == nil
}

func startKept(dir string, alloc types.GenesisAlloc, configure func(*node.Config, *ethconfig.Config)) (*kept, error) {
	nodeConf := node.DefaultConfig
	nodeConf.Name = instance
	nodeConf.DataDir = dir
	nodeConf.IPCPath = "" // JSON-RPC over HTTP only, when configured
	// LevelDB writes its journal to the file at each write; pebble's is
	// flushed behind the writer, and a kill right after a block was sealed
	// lost it (TestAKilledKeptChainLosesNoBlockItAnnounced: tried).
	nodeConf.DBEngine = "leveldb"
	nodeConf.P2P = p2p.Config{NoDiscovery: true}

	genesisAlloc := core.SystemContractAllocs()
	maps.Copy(genesisAlloc, alloc)
	ethConf := ethconfig.Defaults
	ethConf.Genesis = &core.Genesis{Config: params.AllDevChainProtocolChanges, GasLimit: ethconfig.Defaults.Miner.GasCeil, Alloc: genesisAlloc}
	ethConf.SyncMode = ethconfig.FullSync
	ethConf.TxPool.NoLocals = true
	ethConf.NoPruning = true
	ethConf.StateScheme = rawdb.HashScheme
	// A test chain's blocks are a few transactions each: caches of the
	// size a mainnet node wants (gigabytes) would only hold memory.
	ethConf.DatabaseCache, ethConf.TrieCleanCache, ethConf.TrieDirtyCache, ethConf.SnapshotCache = 16, 16, 0, 0
	configure(&nodeConf, &ethConf)

	stack, err := node.New(&nodeConf)
	if err != nil {
		return nil, err
	}
	service, err := eth.New(stack, &ethConf)
	if mismatch := new(core.GenesisMismatchError); errors.As(err, &mismatch) {
		err = fmt.Errorf("%w: the chain kept there began with another genesis than this version's (its token or chain configuration changed since); remove %s to start it again", err, dir)
	}
	if err != nil {
		return nil, errors.Join(err, stack.Close())
	}
	stack.RegisterAPIs([]rpc.API{{Namespace: "eth", Service: filters.NewFilterAPI(filters.NewFilterSystem(service.APIBackend, filters.Config{}))}})
	if err := stack.Start(); err != nil {
		return nil, errors.Join(err, stack.Close())
	}
	beacon, err := catalyst.NewSimulatedBeacon(0, common.Address{}, service)
	if err != nil {
		return nil, errors.Join(err, stack.Close())
	}
	return &kept{node: stack, beacon: beacon, client: ethclient.NewClient(stack.Attach())}, nil
}

func (k *kept) Commit() common.Hash              { return k.beacon.Commit() }
func (k *kept) Rollback()                        { k.beacon.Rollback() }
func (k *kept) Fork(parent common.Hash) error    { return k.beacon.Fork(parent) }
func (k *kept) AdjustTime(d time.Duration) error { return k.beacon.AdjustTime(d) }
func (k *kept) Client() simulated.Client         { return k.client }

// Close stops the chain and closes its directory (a clean stop: the next
// start needs no repair).
func (k *kept) Close() error {
	k.client.Close()
	return errors.Join(k.beacon.Stop(), k.node.Close())
}
