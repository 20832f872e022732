package chain

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"math/big"
	"strconv"
	"strings"
	"time"

	"github.com/ethereum/go-ethereum"
	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/core/types"
	"github.com/ethereum/go-ethereum/crypto"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/partnerpay/api/pkg/catalog"
	"github.com/partnerpay/api/pkg/database"
	"github.com/partnerpay/api/pkg/obs"
	"github.com/partnerpay/api/pkg/worker"
	"github.com/partnerpay/api/services/payout/internal/record"
	"github.com/partnerpay/api/services/payout/internal/simbug"
	"github.com/partnerpay/api/services/payout/internal/store"
)

// Deposits are seen on chain (DESIGN §10). A watcher per chain follows its
// blocks, one replica at a time (a lease in PostgreSQL), from its place
// kept there (the last block it passed, number and hash):
//
//  1. the head, and the last block with the chain's confirmations on top
//     of it (the confirmed one);
//  2. its place's hash, read again: when the chain no longer has it (a
//     reorganisation), the place goes back to the last block it passed
//     that the chain still has, and nothing after it was ever recorded
//     unless it was confirmed;
//  3. every ERC-20 Transfer log of the confirmed blocks after its place,
//     from any token contract (a wrong token is seen too), kept when it
//     goes to one of our deposit addresses;
//  4. each recorded once, by its place on the chain, in the transaction
//     that applies §3's arrival rules to its payout, and moves the place.
//
// A transfer that vanished before its confirmations is never recorded;
// one that was recorded is never recorded twice; a killed watcher resumes
// where its last commit left it.

// transferTopic is the ERC-20 Transfer event's signature.
var transferTopic = crypto.Keccak256Hash([]byte("Transfer(address,address,uint256)"))

const (
	// watchLease is how long a replica's watching of a chain is its own
	// after a round (each round renews it): another replica, or the
	// replica started after a kill, takes over when it is past. A round
	// that outlives it records nothing (the lease is checked in its
	// transaction), and nothing is ever recorded twice.
	watchLease = 3 * time.Second
	// rangeMost is the most blocks a round reads the logs of.
	rangeMost = 500
	// startBack is how far before the confirmed block a chain never
	// watched is first read from.
	startBack = 1000
	// depositsMost bounds the deposits one round records (one
	// transaction): a round stops at the block that reaches it.
	depositsMost = 1000
)

// Metrics are the watchers' figures, by chain.
type Metrics struct {
	lag         *prometheus.GaugeVec
	unconfirmed *prometheus.GaugeVec
	rpcErrors   *prometheus.CounterVec
	recorded    *prometheus.CounterVec
	reorgs      *prometheus.CounterVec
	beyondKept  *prometheus.CounterVec
	held        *prometheus.GaugeVec
}

// NewMetrics registers the watchers' figures in reg.
func NewMetrics(reg prometheus.Registerer) *Metrics {
	m := &Metrics{
		lag: prometheus.NewGaugeVec(prometheus.GaugeOpts{Namespace: obs.Namespace, Subsystem: "chain", Name: "lag_blocks",
			Help: "Confirmed blocks the chain watcher has not read yet (the last block with the chain's confirmations, minus the watcher's place; 0 when it keeps up), by chain, on the database's word: every replica reports it."}, []string{"chain"}),
		unconfirmed: prometheus.NewGaugeVec(prometheus.GaugeOpts{Namespace: obs.Namespace, Subsystem: "chain", Name: "deposits_unconfirmed",
			Help: "Transfers to deposit addresses seen in blocks without the chain's confirmations yet, by chain."}, []string{"chain"}),
		rpcErrors: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: obs.Namespace, Subsystem: "chain", Name: "rpc_errors_total",
			Help: "Calls to a chain's node (JSON-RPC) that failed, by chain."}, []string{"chain"}),
		recorded: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: obs.Namespace, Subsystem: "chain", Name: "deposits_total",
			Help: "Confirmed transfers to deposit addresses recorded (each once), by chain."}, []string{"chain"}),
		reorgs: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: obs.Namespace, Subsystem: "chain", Name: "reorgs_total",
			Help: "Reorganisations the chain watcher rewound its place for, by chain."}, []string{"chain"}),
		beyondKept: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: obs.Namespace, Subsystem: "chain", Name: "reorgs_beyond_kept_total",
			Help: "Reorganisations the chain watcher rewound its place past every block it keeps for, by chain: deeper than 256 blocks, or a chain started again from its genesis (an incident at the chain; also counted in reorgs_total)."}, []string{"chain"}),
		held: prometheus.NewGaugeVec(prometheus.GaugeOpts{Namespace: obs.Namespace, Subsystem: "chain", Name: "deposits_held",
			Help: "Confirmed transfers to deposit addresses the database refused to record with their payout, held and tried again alone while the watcher moves on, by chain (0: none), as the watcher last counted them."}, []string{"chain"}),
	}
	reg.MustRegister(m.lag, m.unconfirmed, m.rpcErrors, m.recorded, m.reorgs, m.beyondKept, m.held)
	return m
}

// Watcher follows one chain's blocks.
type Watcher struct {
	node    *Node
	label   string
	store   *store.Store
	owner   string
	now     func() time.Time
	log     *slog.Logger
	metrics *Metrics
	tokens  map[common.Address]catalog.Token
	rows    *worker.Rows
	// arrived starts the hand-over of a payout whose deposit was just
	// recorded (the mover's hand-over queue).
	arrived func()
	placed  bool // the chain's place exists: no start block to find
	// held is the chain's held deposits as the last recording left them
	// (unknown until one ran): they are tried again when due, new blocks
	// or none.
	held      store.Held
	heldKnown bool
	loop      *worker.Loop
}

// NewWatcher is the watcher of node's chain on st; arrived is called when
// a recorded deposit owes a hand-over.
func NewWatcher(node *Node, st *store.Store, now func() time.Time, arrived func(), m *Metrics, rows *worker.Rows, log *slog.Logger,
	reg prometheus.Registerer) *Watcher {
	var b [8]byte
	_, _ = rand.Read(b[:])
	w := &Watcher{node: node, label: strconv.FormatInt(node.Chain.ID, 10), store: st, owner: hex.EncodeToString(b[:]), now: now, log: log,
		metrics: m, tokens: map[common.Address]catalog.Token{}, rows: rows, arrived: arrived}
	for _, t := range node.Chain.Tokens {
		w.tokens[common.HexToAddress(t.Address)] = t
	}
	m.lag.WithLabelValues(w.label)
	m.unconfirmed.WithLabelValues(w.label)
	m.rpcErrors.WithLabelValues(w.label)
	m.recorded.WithLabelValues(w.label)
	m.reorgs.WithLabelValues(w.label)
	m.beyondKept.WithLabelValues(w.label)
	m.held.WithLabelValues(w.label)
	rows.Declare(w.queue())
	w.loop = worker.New("chain_"+w.label, w.Round, log, reg).IdleEvery(250 * time.Millisecond)
	return w
}

func (w *Watcher) queue() string { return "chain_" + w.label }

// Run follows the chain until ctx ends.
func (w *Watcher) Run(ctx context.Context) { w.loop.Run(ctx) }

// Wake reads the chain at once (a transfer was just sent).
func (w *Watcher) Wake() { w.loop.Wake() }

// rpc counts a failed call to the node.
func (w *Watcher) rpc(err error) error {
	if err != nil {
		w.metrics.rpcErrors.WithLabelValues(w.label).Inc()
		return fmt.Errorf("chain %s: %w", w.label, err)
	}
	return nil
}

// Round is one round of the watcher: it records the deposits of up to
// rangeMost confirmed blocks after its place, and tries again the held
// deposits that are due (one the database refused is held alone, and the
// place moves on), and answers how many blocks it passed while more
// confirmed ones wait (0: it caught up, or another replica watches the
// chain).
func (w *Watcher) Round(ctx context.Context) (int, error) {
	c := w.node.Client
	head, err := c.BlockNumber(ctx)
	if err != nil {
		return 0, w.rpc(err)
	}
	conf := w.node.Confirmations
	if simbug.Planted("confirmations-ignored") {
		conf = 1
	}
	if head+1 < conf {
		return 0, nil
	}
	confirmed := head + 1 - conf
	var start store.Block
	if !w.placed {
		n := uint64(0)
		if confirmed > startBack {
			n = confirmed - startBack
		}
		h, err := c.HeaderByNumber(ctx, new(big.Int).SetUint64(n))
		if err != nil {
			return 0, w.rpc(err)
		}
		start = store.Block{Number: n, Hash: h.Hash().Hex()}
		start.Hash = strings.ToLower(start.Hash)
	}
	now := w.now()
	place, ok, err := w.store.LeaseChain(ctx, w.node.Chain.ID, w.owner, now, now.Add(watchLease), start)
	if err != nil {
		return 0, err
	}
	if !ok {
		w.heldKnown = false // its held deposits are read again when this replica watches again
		// Another replica watches: the lag is still the database's.
		if p, found, err := w.store.ChainPlace(ctx, w.node.Chain.ID); err == nil && found {
			w.setLag(confirmed, p.Number)
		}
		return 0, nil
	}
	w.placed = true
	if moved, err := w.rewound(ctx, place, confirmed); err != nil || moved {
		if moved {
			return 1, nil
		}
		return 0, err
	}
	w.setLag(confirmed, place.Number)
	w.countUnconfirmed(ctx, confirmed, head)
	heldDue := !w.heldKnown || (w.held.Count > 0 && !now.Before(w.held.Next))
	if place.Number >= confirmed && !heldDue {
		return 0, nil
	}
	var deposits []store.ChainDeposit
	through := place
	if place.Number < confirmed {
		to := min(confirmed, place.Number+rangeMost)
		if deposits, through, err = w.transfers(ctx, place.Number+1, to); err != nil {
			return 0, err
		}
	}
	recordedAt := w.now()
	moved, held, err := w.store.RecordDeposits(ctx, w.node.Chain.ID, w.owner, through, deposits, recordedAt,
		func(r record.Record, d store.ChainDeposit) (record.Change, error) {
			return Arrival(r.StoredPayout, w.deposit(d), recordedAt), nil
		},
		func(d store.ChainDeposit, n int, err error) {
			w.rows.Failed(ctx, w.queue(), d.TxHash, worker.DatabaseReason(err, database.IsRuleViolation), n, err)
		})
	if err != nil {
		return 0, err
	}
	w.setLag(confirmed, through.Number)
	w.held, w.heldKnown = held, true
	w.metrics.held.WithLabelValues(w.label).Set(float64(held.Count))
	handOver := false
	for _, c := range moved {
		handOver = handOver || c.HandOver != nil
	}
	if len(moved) > 0 {
		w.metrics.recorded.WithLabelValues(w.label).Add(float64(len(moved)))
	}
	if handOver && w.arrived != nil {
		w.arrived()
	}
	if through.Number < confirmed {
		return int(through.Number - place.Number), nil // more wait: at once
	}
	if len(moved) > 0 && through.Number == place.Number {
		return len(moved), nil // held deposits recorded
	}
	return 0, nil
}

// setLag sets the confirmed blocks not read yet.
func (w *Watcher) setLag(confirmed, place uint64) {
	lag := 0.0
	if confirmed > place {
		lag = float64(confirmed - place)
	}
	w.metrics.lag.WithLabelValues(w.label).Set(lag)
}

// rewound checks the place is still on the chain; when it is not (a
// reorganisation, or a chain shorter than the place: started again from
// its genesis, as a testnet is), it moves it back to the last block passed
// that the chain still has, and reports that it did.
func (w *Watcher) rewound(ctx context.Context, place store.Block, confirmed uint64) (bool, error) {
	if on, err := w.has(ctx, place); err != nil || on {
		return false, err
	}
	recent, err := w.store.RecentBlocks(ctx, w.node.Chain.ID, place.Number, 256)
	if err != nil {
		return false, err
	}
	to := store.Block{}
	for _, b := range recent {
		on, err := w.has(ctx, b)
		if err != nil {
			return false, err
		}
		if on {
			to = b
			break
		}
	}
	if to.Hash == "" {
		// Deeper than the blocks kept, or a chain started again: an
		// incident. The hashes that would find where the chains part are
		// gone, so read again from before the oldest kept and at least as
		// far back as a chain never watched is read (startBack before the
		// confirmed block): a deposit recorded is never recorded twice.
		back := uint64(0)
		if confirmed > startBack {
			back = confirmed - startBack
		}
		if n := len(recent); n > 0 {
			back = min(back, max(recent[n-1].Number, 1)-1)
		} else {
			back = min(back, max(place.Number, startBack)-startBack)
		}
		h, err := w.node.Client.HeaderByNumber(ctx, new(big.Int).SetUint64(back))
		if err != nil {
			return false, w.rpc(err)
		}
		to = store.Block{Number: back, Hash: strings.ToLower(h.Hash().Hex())}
		w.log.ErrorContext(ctx, "the chain no longer has the blocks the watcher passed, as far back as it keeps them (a deep reorganisation, or a chain started again); reading again from before them",
			"chain", w.label, "from", place.Number, "to", back)
		w.metrics.beyondKept.WithLabelValues(w.label).Inc()
	} else {
		w.log.WarnContext(ctx, "the chain reorganised; the watcher goes back to the last block it passed that the chain still has",
			"chain", w.label, "from", place.Number, "to", to.Number)
	}
	w.metrics.reorgs.WithLabelValues(w.label).Inc()
	return true, w.store.Rewind(ctx, w.node.Chain.ID, w.owner, to, w.now())
}

// has reports whether the chain has block b: its number with its hash. A
// number past the chain's head is a block it does not have.
func (w *Watcher) has(ctx context.Context, b store.Block) (bool, error) {
	h, err := w.node.Client.HeaderByNumber(ctx, new(big.Int).SetUint64(b.Number))
	if errors.Is(err, ethereum.NotFound) {
		return false, nil
	}
	if err != nil {
		return false, w.rpc(err)
	}
	return strings.EqualFold(h.Hash().Hex(), b.Hash), nil
}

// transfers reads the Transfer logs of blocks from..to (all confirmed)
// and keeps those to our deposit addresses, in the chain's order, with
// their blocks' times; through is block to, or the last whole block of
// the first depositsMost deposits.
func (w *Watcher) transfers(ctx context.Context, from, to uint64) (deposits []store.ChainDeposit, through store.Block, err error) {
	c := w.node.Client
	logs, err := c.FilterLogs(ctx, ethereum.FilterQuery{FromBlock: new(big.Int).SetUint64(from), ToBlock: new(big.Int).SetUint64(to),
		Topics: [][]common.Hash{{transferTopic}}})
	if err != nil {
		return nil, store.Block{}, w.rpc(err)
	}
	last, err := c.HeaderByNumber(ctx, new(big.Int).SetUint64(to))
	if err != nil {
		return nil, store.Block{}, w.rpc(err)
	}
	through = store.Block{Number: to, Hash: strings.ToLower(last.Hash().Hex())}
	ours, err := w.ours(ctx, logs)
	if err != nil {
		return nil, store.Block{}, err
	}
	times := map[uint64]time.Time{}
	for _, l := range logs {
		addr, ok := recipient(l)
		if !ok || !ours[addr] {
			continue
		}
		at, known := times[l.BlockNumber]
		if !known {
			h, err := c.HeaderByNumber(ctx, new(big.Int).SetUint64(l.BlockNumber))
			if err != nil {
				return nil, store.Block{}, w.rpc(err)
			}
			at = time.Unix(int64(h.Time), 0).UTC()
			times[l.BlockNumber] = at
		}
		if len(deposits) >= depositsMost && l.BlockNumber != deposits[len(deposits)-1].Block.Number {
			// Enough for one transaction: the round ends with the block
			// before this one, whole.
			last := deposits[len(deposits)-1].Block
			return deposits, last, nil
		}
		deposits = append(deposits, store.ChainDeposit{Chain: w.node.Chain.ID, TxHash: strings.ToLower(l.TxHash.Hex()), LogIndex: l.Index,
			Address: addr, Token: l.Address.Hex(), Units: new(big.Int).SetBytes(l.Data).String(),
			Block: store.Block{Number: l.BlockNumber, Hash: strings.ToLower(l.BlockHash.Hex())}, At: at})
	}
	return deposits, through, nil
}

// recipient is the address an ERC-20 Transfer log sends to (EIP-55), when
// the log has an ERC-20 Transfer's shape (from and to indexed, the value
// in its data) and moved something: a transfer of nothing (which anyone
// may send to any address) is no deposit, and owes no refund.
func recipient(l types.Log) (string, bool) {
	if l.Removed || len(l.Topics) != 3 || l.Topics[0] != transferTopic || len(l.Data) != 32 || new(big.Int).SetBytes(l.Data).Sign() == 0 {
		return "", false
	}
	return common.BytesToAddress(l.Topics[2].Bytes()).Hex(), true
}

// ours is the set of the logs' recipients that are deposit addresses.
func (w *Watcher) ours(ctx context.Context, logs []types.Log) (map[string]bool, error) {
	var addrs []string
	seen := map[string]bool{}
	for _, l := range logs {
		if a, ok := recipient(l); ok && !seen[a] {
			seen[a] = true
			addrs = append(addrs, a)
		}
	}
	found, err := w.store.PayoutsAt(ctx, addrs)
	if err != nil {
		return nil, err
	}
	out := make(map[string]bool, len(found))
	for a := range found {
		out[a] = true
	}
	return out, nil
}

// countUnconfirmed sets how many transfers to deposit addresses wait for
// their confirmations in the blocks after confirmed, and notes them on
// their payouts: an expiry waits for them.
func (w *Watcher) countUnconfirmed(ctx context.Context, confirmed, head uint64) {
	if head <= confirmed {
		w.metrics.unconfirmed.WithLabelValues(w.label).Set(0)
		return
	}
	logs, err := w.node.Client.FilterLogs(ctx, ethereum.FilterQuery{FromBlock: new(big.Int).SetUint64(confirmed + 1),
		ToBlock: new(big.Int).SetUint64(head), Topics: [][]common.Hash{{transferTopic}}})
	if err != nil {
		_ = w.rpc(err)
		return
	}
	ours, err := w.ours(ctx, logs)
	if err != nil {
		return
	}
	n := 0
	var seen []string
	for _, l := range logs {
		if a, ok := recipient(l); ok && ours[a] {
			n++
			seen = append(seen, a)
		}
	}
	w.metrics.unconfirmed.WithLabelValues(w.label).Set(float64(n))
	// Their payouts' expiry waits for their confirmations.
	if err := w.store.SeenOnTheWay(ctx, seen, w.now()); err != nil {
		w.log.WarnContext(ctx, "transfers on their way were not noted; a payout may expire before one is confirmed", "chain", w.label, "err", err)
	}
}

// deposit is a recorded transfer as the arrival rules read it: its token
// by the catalogue (or its contract, not listed), its amount in the
// token's major units.
func (w *Watcher) deposit(d store.ChainDeposit) Deposit {
	units, _ := new(big.Int).SetString(d.Units, 10)
	out := Deposit{Token: d.Token, Amount: d.Units, TxHash: d.TxHash, LogIndex: int(d.LogIndex), At: d.At}
	if t, ok := w.tokens[common.HexToAddress(d.Token)]; ok {
		out.Token, out.Amount = t.Symbol, Major(units, t.Decimals)
	}
	return out
}

// ErrNoChain is a chain without a node: nothing can be sent on it.
var ErrNoChain = errors.New("the chain has no node configured")
