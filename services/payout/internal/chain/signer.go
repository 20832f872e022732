package chain

import (
	"context"
	"crypto/ecdsa"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"math/big"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/ethereum/go-ethereum"
	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/core/types"
	"github.com/ethereum/go-ethereum/crypto"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/partnerpay/api/pkg/database"
	"github.com/partnerpay/api/pkg/obs"
	"github.com/partnerpay/api/pkg/worker"
	"github.com/partnerpay/api/services/payout/internal/store"
)

// Signer sends the refunds of one chain from the treasury wallet, each
// exactly once (DESIGN §10). A round:
//
//   - signs the chain's pending refunds, each at the wallet's next nonce,
//     and keeps every signed transaction in PostgreSQL, in the transaction
//     that takes its nonce, before anything is broadcast (intent first);
//     a refund the treasury cannot pay (short of the token, or of gas)
//     waits, takes no nonce, and is counted;
//   - broadcasts what is kept and not yet taken, the same bytes every
//     time (a node that already has it counts as taking it): the refund is
//     then sent, with its hash;
//   - follows what was broadcast: mined with the chain's confirmations,
//     the refund is confirmed with the mined version's hash; not mined in
//     ReplaceAfter, it is signed again at the same nonce with a higher fee
//     (kept first, then broadcast); forgotten by the node (a restart that
//     emptied its pool, a reorganisation), it is broadcast again; its
//     nonce spent without it (reverted, or another transaction of the
//     wallet), it is dropped and its refund signed again at a new nonce.
//
// No lock is held over a call to the node: the nonce row is locked only
// while the refunds are signed, which is local work. The wallet's key
// never leaves this type: it is in no log, metric, answer or error.
//
// Rows fail alone (DESIGN §3): a refund the signer cannot read, or whose
// send the database refuses, takes no nonce and is held back alone; a
// send or a sweep the database fails to move is left for the next round
// while the others move. Each is counted in
// partnerapi_worker_row_failures_total (queue treasury_<chain>) and
// logged on its first failure in a row. A node that fails a call ends the
// round: the next calls would fail too, and a later nonce cannot be mined
// before the one the node did not take.
type Signer struct {
	node    *Node
	label   string
	key     *ecdsa.PrivateKey
	from    common.Address
	sender  string   // from, as the database keeps addresses
	listed  []string // the chain's token contracts, lower-case
	store   *store.Store
	now     func() time.Time
	log     *slog.Logger
	metrics *SignerMetrics
	opts    SignerOptions
	gas     map[common.Address]uint64 // a transfer's gas limit per token, estimated once
	waiting int                       // refunds that waited for funds in the last round
	read    time.Time                 // when the balances were last read
	rows    *worker.Rows
	held    map[string]time.Time // refunds held back (unreadable, or refused), until when
	// refueled are sweeps sent back to funding, whose transfer is signed
	// again offering all its address's gas; unmined, since when a sweep's
	// transfer waits to be mined.
	refueled map[int64]bool
	unmined  map[int64]time.Time
	loop     *worker.Loop
}

// holdMost is the longest a refund the signer could not sign is held
// back before it is tried again; maxHeld bounds the refunds held.
const (
	holdMost = 10 * time.Minute
	maxHeld  = 10000
)

// SignerOptions tune a signer.
type SignerOptions struct {
	// ReplaceAfter is how long a broadcast transaction may go unmined
	// before it is replaced at its nonce with a higher fee.
	ReplaceAfter time.Duration
	// Batch is how many refunds a round signs, and how many sends it
	// follows, at most.
	Batch int
	// Sweep, when set, sweeps final deposits home to the treasury (the
	// deposit wallet's private side); nil: nothing is swept.
	Sweep *SweepKeys
}

// SignerMetrics are the signers' gauges and counters: the treasury's
// balances, what waits for funds, what waits to be mined.
type SignerMetrics struct {
	balance     *prometheus.GaugeVec
	waiting     *prometheus.GaugeVec
	unlisted    *prometheus.GaugeVec
	unconfirmed *prometheus.GaugeVec
	oldest      *prometheus.GaugeVec
	sent        *prometheus.CounterVec
	refunded    *prometheus.CounterVec
	replaced    *prometheus.CounterVec
	gasSpent    *prometheus.CounterVec
	swept       *prometheus.CounterVec
	rpcErrors   *prometheus.CounterVec
}

// NewSignerMetrics registers the signers' metrics with reg.
func NewSignerMetrics(reg prometheus.Registerer) *SignerMetrics {
	m := &SignerMetrics{
		balance: prometheus.NewGaugeVec(prometheus.GaugeOpts{Namespace: obs.Namespace, Subsystem: "treasury", Name: "balance",
			Help: "The treasury wallet's balance on a chain, in major units, by chain and token (gas: the chain's native coin, which pays the fees), as the node last said."},
			[]string{"chain", "token"}),
		waiting: prometheus.NewGaugeVec(prometheus.GaugeOpts{Namespace: obs.Namespace, Subsystem: "treasury", Name: "refunds_waiting_funds",
			Help: "Refunds that waited in the signer's last round because the treasury is short of their token or of gas, by chain: they are sent once it is funded."}, []string{"chain"}),
		unlisted: prometheus.NewGaugeVec(prometheus.GaugeOpts{Namespace: obs.Namespace, Subsystem: "treasury", Name: "refunds_unlisted_token",
			Help: "Refunds owed in a token the catalogue does not list (an unknown token sent to a deposit address), by chain: the signer does not send them, since anyone can make such a token and spam every address with it; the runbook says how to pay one whose token is real."}, []string{"chain"}),
		unconfirmed: prometheus.NewGaugeVec(prometheus.GaugeOpts{Namespace: obs.Namespace, Subsystem: "treasury", Name: "sends_unconfirmed",
			Help: "The treasury's transactions signed and not yet mined with the chain's confirmations, by chain."}, []string{"chain"}),
		oldest: prometheus.NewGaugeVec(prometheus.GaugeOpts{Namespace: obs.Namespace, Subsystem: "treasury", Name: "oldest_unconfirmed_seconds",
			Help: "How long the oldest broadcast transaction of the treasury has waited to be mined with its confirmations, by chain (0: none waits)."}, []string{"chain"}),
		sent: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: obs.Namespace, Subsystem: "treasury", Name: "refunds_sent_total",
			Help: "Refunds a node took the treasury's transaction of (each counted once, when it is sent), by chain and token."}, []string{"chain", "token"}),
		refunded: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: obs.Namespace, Subsystem: "treasury", Name: "refunded_total",
			Help: "What the sent refunds took from the treasury, in major units, by chain and token: the rate the TreasuryLow alert measures the balance against."}, []string{"chain", "token"}),
		replaced: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: obs.Namespace, Subsystem: "treasury", Name: "replacements_total",
			Help: "Transactions signed again at their nonce with a higher fee because they were not mined in time, by chain."}, []string{"chain"}),
		gasSpent: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: obs.Namespace, Subsystem: "treasury", Name: "gas_spent_total",
			Help: "What the treasury's confirmed transactions paid in fees, in the chain's native coin, by chain: the rate the TreasuryLow alert measures the gas balance against."}, []string{"chain"}),
		swept: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: obs.Namespace, Subsystem: "treasury", Name: "sweeps_total",
			Help: "Final deposits' funds moved home from their deposit address to the treasury (each sweep once, when confirmed), by chain."}, []string{"chain"}),
		rpcErrors: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: obs.Namespace, Subsystem: "treasury", Name: "rpc_errors_total",
			Help: "The signer's calls to a chain's node (JSON-RPC) that failed, by chain."}, []string{"chain"}),
	}
	reg.MustRegister(m.balance, m.waiting, m.unlisted, m.unconfirmed, m.oldest, m.sent, m.refunded, m.replaced, m.gasSpent, m.swept, m.rpcErrors)
	return m
}

// NewSigner is the signer of node's chain, sending from the wallet whose
// private key is hexKey.
func NewSigner(node *Node, hexKey string, st *store.Store, now func() time.Time, opts SignerOptions, m *SignerMetrics,
	log *slog.Logger, reg prometheus.Registerer) (*Signer, error) {
	k, err := crypto.HexToECDSA(strings.TrimPrefix(hexKey, "0x"))
	if err != nil {
		return nil, errors.New("TREASURY_KEY is not a private key (64 hex digits)")
	}
	if opts.ReplaceAfter <= 0 {
		opts.ReplaceAfter = 2 * time.Minute
	}
	if opts.Batch <= 0 {
		opts.Batch = 100
	}
	from := crypto.PubkeyToAddress(k.PublicKey)
	var listed []string
	for _, t := range node.Chain.Tokens {
		listed = append(listed, strings.ToLower(t.Address))
	}
	s := &Signer{node: node, label: strconv.FormatInt(node.Chain.ID, 10), key: k, from: from, sender: strings.ToLower(from.Hex()), listed: listed,
		store: st, now: now, log: log, metrics: m, opts: opts, gas: map[common.Address]uint64{}, held: map[string]time.Time{},
		rows: worker.NewRows("payout", log, reg), refueled: map[int64]bool{}, unmined: map[int64]time.Time{}}
	s.rows.Declare(s.queue())
	// (The balances are exported once read: a zero never read would look
	// like an empty treasury.)
	for _, t := range node.Chain.Tokens {
		m.sent.WithLabelValues(s.label, t.Symbol)
		m.refunded.WithLabelValues(s.label, t.Symbol)
	}
	m.gasSpent.WithLabelValues(s.label)
	m.swept.WithLabelValues(s.label)
	m.waiting.WithLabelValues(s.label)
	m.unlisted.WithLabelValues(s.label)
	m.unconfirmed.WithLabelValues(s.label)
	m.oldest.WithLabelValues(s.label)
	m.replaced.WithLabelValues(s.label)
	m.rpcErrors.WithLabelValues(s.label)
	s.loop = worker.New("treasury_"+s.label, s.Round, log, reg).IdleEvery(time.Second)
	return s, nil
}

// Signers are the signers of nodes' chains (DESIGN §10), sending from
// cfg's treasury key and sweeping final deposits home with the keys of
// DEPOSIT_XPRV, checked against addresses (the deposit wallet's public
// side). Without a treasury key there are none, and the refunds stay
// pending; without DEPOSIT_XPRV nothing is swept. The log says so at boot.
func Signers(cfg Config, nodes map[int64]*Node, addresses *Addresses, st *store.Store, now func() time.Time, log *slog.Logger,
	reg prometheus.Registerer) ([]*Signer, error) {
	if len(nodes) == 0 {
		return nil, nil
	}
	if cfg.TreasuryKey == "" {
		log.Warn("no TREASURY_KEY: refunds are not sent, and stay pending until the service has one")
		return nil, nil
	}
	opts := SignerOptions{ReplaceAfter: cfg.ReplaceAfter}
	if cfg.DepositXPrv != "" {
		var err error
		if opts.Sweep, err = NewSweepKeys(string(cfg.DepositXPrv), addresses); err != nil {
			return nil, err
		}
	} else {
		log.Warn("no DEPOSIT_XPRV: deposits are not swept to the treasury, which pays the refunds from what it holds")
	}
	m := NewSignerMetrics(reg)
	var signers []*Signer
	for _, id := range slices.Sorted(maps.Keys(nodes)) {
		sg, err := NewSigner(nodes[id], string(cfg.TreasuryKey), st, now, opts, m, log, reg)
		if err != nil {
			return nil, err
		}
		signers = append(signers, sg)
	}
	return signers, nil
}

// Address is the treasury wallet's address.
func (s *Signer) Address() common.Address { return s.from }

// Run runs rounds until ctx ends.
func (s *Signer) Run(ctx context.Context) { s.loop.Run(ctx) }

// Wake runs a round now (a refund became pending).
func (s *Signer) Wake() { s.loop.Wake() }

// queue is the signer's queue in partnerapi_worker_row_failures_total.
func (s *Signer) queue() string { return "treasury_" + s.label }

// rpcError is a node's failure: it ends the round.
type rpcError struct{ error }

func (e rpcError) Unwrap() error { return e.error }

func (s *Signer) rpc(err error) error {
	s.metrics.rpcErrors.WithLabelValues(s.label).Inc()
	return rpcError{fmt.Errorf("chain %s: %w", s.label, err)}
}

// isRPC reports whether err is a node's failure.
func isRPC(err error) bool {
	var e rpcError
	return errors.As(err, &e)
}

// alone records that the row id (a refund, a send or a sweep) could not
// move this round, for reason: counted, logged on its first failure in a
// row; it returns err, for the round's errors.
func (s *Signer) alone(ctx context.Context, id, reason string, err error) error {
	s.rows.Failed(ctx, s.queue(), id, reason, s.rows.Streak(id), err)
	return err
}

// stored records a store's failure to move the row id: alone (a database
// that refuses it or fails) unless another replica moved it first.
func (s *Signer) stored(ctx context.Context, id string, err error) error {
	if err == nil || errors.Is(err, store.ErrSendMoved) {
		s.rows.Moved(id)
		return nil
	}
	return s.alone(ctx, id, worker.DatabaseReason(err, database.IsRuleViolation), err)
}

// hold holds the refund id back alone, for a wait that doubles with its
// failures in a row.
func (s *Signer) hold(ctx context.Context, id, reason string, err error) {
	key := "refund " + id
	n := s.rows.Streak(key)
	s.rows.Failed(ctx, s.queue(), id, reason, n, err)
	if len(s.held) < maxHeld {
		s.held[id] = s.now().Add(worker.Backoff(n, holdMost))
	}
}

// holding is the refunds held back now.
func (s *Signer) holding() []string {
	var ids []string
	now := s.now()
	for id, until := range s.held {
		if now.Before(until) {
			ids = append(ids, id)
		} else {
			delete(s.held, id)
		}
	}
	return ids
}

// sendID names a send in a log line and the failure count.
func sendID(send store.Send) string {
	return "send " + strconv.FormatInt(send.Chain, 10) + "/" + strconv.FormatUint(send.Nonce, 10)
}

// Round signs, broadcasts and follows the chain's refunds once, and
// sweeps, and returns how many changed. A step that fails in the database
// does not keep the next from running; a node that fails ends the round.
func (s *Signer) Round(ctx context.Context) (int, error) {
	head, err := s.node.Client.HeaderByNumber(ctx, nil)
	if err != nil {
		return 0, s.rpc(err)
	}
	if head.BaseFee == nil {
		return 0, fmt.Errorf("chain %s has no base fee (EIP-1559)", s.label)
	}
	if s.now().Sub(s.read) >= balancesEvery {
		// Read every few seconds whatever is due: the TreasuryLow alert
		// measures them.
		if _, err := s.balances(ctx); err != nil {
			return 0, err
		}
	}
	steps := []func(context.Context, *types.Header) (int, error){s.sign, s.broadcast, s.follow}
	if s.opts.Sweep != nil {
		steps = append(steps, s.sweep)
	}
	moved, errs := 0, []error(nil)
	for _, step := range steps {
		n, err := step(ctx, head)
		moved += n
		if err != nil {
			errs = append(errs, err)
			if isRPC(err) || ctx.Err() != nil {
				break
			}
		}
	}
	return moved, errors.Join(errs...)
}

// balancesEvery is how often the treasury's balances are read when no
// refund is being signed.
const balancesEvery = 15 * time.Second

// wallet is what the treasury holds, as the node says: each token's
// units, and gas.
type wallet struct {
	units map[common.Address]*big.Int
	gas   *big.Int
}

// balances reads the treasury's balance of gas and of every token of the
// chain, and reports them.
func (s *Signer) balances(ctx context.Context) (wallet, error) {
	w := wallet{units: map[common.Address]*big.Int{}}
	var err error
	if w.gas, err = s.node.Client.BalanceAt(ctx, s.from, nil); err != nil {
		return w, s.rpc(err)
	}
	s.metrics.balance.WithLabelValues(s.label, "gas").Set(major(w.gas, 18))
	for _, t := range s.node.Chain.Tokens {
		token := common.HexToAddress(t.Address)
		data := append(crypto.Keccak256([]byte("balanceOf(address)"))[:4:4], common.LeftPadBytes(s.from.Bytes(), 32)...)
		out, err := s.node.Client.CallContract(ctx, ethereum.CallMsg{To: &token, Data: data}, nil)
		if err != nil || len(out) != 32 {
			if err == nil {
				err = fmt.Errorf("balanceOf on %s answered %d bytes", token.Hex(), len(out))
			}
			return w, s.rpc(err)
		}
		w.units[token] = new(big.Int).SetBytes(out)
		s.metrics.balance.WithLabelValues(s.label, t.Symbol).Set(major(w.units[token], t.Decimals))
	}
	// (Read as often as the balances: what the runbook's operator pays.)
	n, err := s.store.UnlistedRefunds(ctx, s.node.Chain.ID)
	if err != nil {
		return w, err
	}
	s.metrics.unlisted.WithLabelValues(s.label).Set(float64(n))
	s.read = s.now()
	return w, nil
}

// major is units of a token with decimals as a float (a gauge's value).
func major(units *big.Int, decimals int) float64 {
	f, _ := new(big.Rat).SetFrac(units, new(big.Int).Exp(big.NewInt(10), big.NewInt(int64(decimals)), nil)).Float64()
	return f
}

// refundToken is the contract and the units of a refund: a catalogue
// token's symbol and amount in major units. (A refund in a token the
// catalogue does not list is not the signer's: store.RefundsToSign leaves
// it out.)
func (s *Signer) refundToken(r store.RefundToSign) (common.Address, *big.Int, error) {
	t, ok := s.node.Chain.Token(r.CryptoCurrency)
	if !ok {
		return common.Address{}, nil, fmt.Errorf("refund %s: token %q is not one of the chain's", r.ID, r.CryptoCurrency)
	}
	units, err := Units(r.Amount, t.Decimals)
	if err == nil && units.Sign() <= 0 {
		err = fmt.Errorf("refund %s: amount %q is not positive", r.ID, r.Amount)
	}
	return common.HexToAddress(t.Address), units, err
}

// transferGas is the gas limit of a transfer of token: estimated once (a
// transfer to a new holder, the dearer kind) with a fifth more for
// margin; a token the treasury holds none of yet takes a generous fixed
// limit until it does.
func (s *Signer) transferGas(ctx context.Context, token common.Address) uint64 {
	if g, ok := s.gas[token]; ok {
		return g
	}
	fresh := common.BytesToAddress(crypto.Keccak256([]byte("a holder that holds nothing yet"))[:20])
	g, err := s.node.Client.EstimateGas(ctx, ethereum.CallMsg{From: s.from, To: &token, Data: transferData(fresh, big.NewInt(1))})
	if err != nil {
		return 120_000
	}
	s.gas[token] = g + g/5
	return s.gas[token]
}

// sign signs the chain's refunds to sign, as far as the treasury can pay
// them, and keeps them (store.SignRefunds).
func (s *Signer) sign(ctx context.Context, head *types.Header) (int, error) {
	held := s.holding()
	due, err := s.store.RefundsToSign(ctx, s.node.Chain.ID, held, s.opts.Batch)
	if err != nil {
		return 0, err
	}
	if len(due) == 0 {
		s.setWaiting(0)
		return 0, nil
	}
	gas := map[common.Address]uint64{}
	var readable int
	for _, r := range due {
		token, _, err := s.refundToken(r)
		if err != nil {
			s.hold(ctx, r.ID, worker.ReasonUnreadable, err)
			held = append(held, r.ID)
			continue
		}
		readable++
		gas[token] = s.transferGas(ctx, token)
	}
	if readable == 0 {
		s.setWaiting(0)
		return 0, nil
	}
	have, err := s.balances(ctx)
	if err != nil {
		return 0, err
	}
	nonce, err := s.node.Client.NonceAt(ctx, s.from, nil)
	if err != nil {
		return 0, s.rpc(err)
	}
	tip, err := s.node.Client.SuggestGasTipCap(ctx)
	if err != nil {
		return 0, s.rpc(err)
	}
	feeCap := new(big.Int).Add(tip, new(big.Int).Mul(head.BaseFee, big.NewInt(2)))
	chainID := big.NewInt(s.node.Chain.ID)
	var unreadable, refused map[string]error
	signed, waiting, err := s.store.SignRefunds(ctx, s.node.Chain.ID, s.sender, nonce, held, s.opts.Batch,
		func(r store.RefundToSign, nonce uint64, c store.Committed) (store.Send, store.Version, bool, error) {
			token, units, err := s.refundToken(r)
			if err != nil {
				// (Came after the refunds were read.)
				unreadable = setOf(unreadable, r.ID, err)
				return store.Send{}, store.Version{}, false, fmt.Errorf("%w: %w", store.ErrSkip, err)
			}
			limit, ok := gas[token]
			held := have.units[token]
			if !ok || held == nil {
				return store.Send{}, store.Version{}, true, nil // came after the balances were read: the next round
			}
			free := new(big.Int).Sub(held, orZero(c.Units[strings.ToLower(token.Hex())]))
			cost := new(big.Int).Mul(new(big.Int).SetUint64(limit), feeCap)
			if free.Cmp(units) < 0 || new(big.Int).Sub(have.gas, c.Gas).Cmp(cost) < 0 {
				return store.Send{}, store.Version{}, true, nil
			}
			to := common.HexToAddress(r.Address)
			tx, err := types.SignNewTx(s.key, types.LatestSignerForChainID(chainID), &types.DynamicFeeTx{ChainID: chainID, Nonce: nonce,
				GasTipCap: tip, GasFeeCap: feeCap, Gas: limit, To: &token, Data: transferData(to, units)})
			if err != nil {
				return store.Send{}, store.Version{}, false, err
			}
			raw, err := tx.MarshalBinary()
			if err != nil {
				return store.Send{}, store.Version{}, false, err
			}
			send := store.Send{Chain: s.node.Chain.ID, Sender: s.sender, Nonce: nonce, RefundID: r.ID,
				Token: strings.ToLower(token.Hex()), Recipient: strings.ToLower(to.Hex()), Units: units}
			return send, store.Version{Hash: strings.ToLower(tx.Hash().Hex()), Raw: raw, Gas: limit, TipCap: tip, FeeCap: feeCap,
				SignedAt: s.now()}, false, nil
		}, func(r store.RefundToSign, err error) { refused = setOf(refused, r.ID, err) })
	if err != nil {
		return 0, err // nothing was kept: the refunds are read again next round
	}
	// Held back once the signing is kept (a signing undone and done again
	// would count them twice).
	for id, err := range unreadable {
		s.hold(ctx, id, worker.ReasonUnreadable, err)
	}
	for id, err := range refused {
		s.hold(ctx, id, worker.DatabaseReason(err, database.IsRuleViolation), err)
	}
	s.setWaiting(waiting)
	return signed, nil
}

// setOf is m with id's err, made when nil (the signing's closures may run
// again when it is retried: a map keeps each refund once).
func setOf(m map[string]error, id string, err error) map[string]error {
	if m == nil {
		m = map[string]error{}
	}
	m[id] = err
	return m
}

func orZero(n *big.Int) *big.Int {
	if n == nil {
		return new(big.Int)
	}
	return n
}

// setWaiting reports the refunds that waited for funds, and logs when
// that starts and ends.
func (s *Signer) setWaiting(n int) {
	s.metrics.waiting.WithLabelValues(s.label).Set(float64(n))
	switch {
	case n > 0 && s.waiting == 0:
		s.log.Warn("refunds wait: the treasury is short of their token or of gas", "chain", s.label, "treasury", s.from.Hex(), "refunds", n)
	case n == 0 && s.waiting > 0:
		s.log.Info("the treasury pays the refunds again", "chain", s.label)
	}
	s.waiting = n
}

// broadcast hands the kept, untaken transactions to the node, lowest
// nonce first; each taken marks its refund sent. One the node took but
// the database did not mark is broadcast again next round (the node has
// it already), while the others go on.
func (s *Signer) broadcast(ctx context.Context, _ *types.Header) (int, error) {
	sends, err := s.store.Sends(ctx, s.node.Chain.ID, s.sender, "signed", s.opts.Batch)
	if err != nil {
		return 0, err
	}
	n, errs := 0, []error(nil)
	for _, send := range sends {
		v := send.Latest()
		if err := s.send(ctx, v.Raw); err != nil && !spent(err) {
			// Later nonces cannot be mined before this one: the next round.
			return n, errors.Join(append(errs, s.rpc(err))...)
		}
		// Taken (or its nonce spent already: the follow step finds which).
		switch err := s.store.Broadcast(ctx, send, v.Hash, s.now()); {
		case errors.Is(err, store.ErrSendMoved):
			continue // another replica broadcast it first
		case err != nil:
			errs = append(errs, s.stored(ctx, sendID(send), err))
			continue
		}
		s.rows.Moved(sendID(send))
		n++
		token := common.HexToAddress(send.Token)
		if t, ok := s.node.Chain.TokenAt(token.Hex()); ok && send.Versions[0].Hash == v.Hash {
			s.metrics.sent.WithLabelValues(s.label, t.Symbol).Inc()
			s.metrics.refunded.WithLabelValues(s.label, t.Symbol).Add(major(send.Units, t.Decimals))
		}
	}
	return n, errors.Join(errs...)
}

// send broadcasts a signed transaction; a node that has it already took
// it.
func (s *Signer) send(ctx context.Context, raw []byte) error {
	var tx types.Transaction
	if err := tx.UnmarshalBinary(raw); err != nil {
		return err
	}
	err := s.node.Client.SendTransaction(ctx, &tx)
	if err != nil && strings.Contains(strings.ToLower(err.Error()), "already known") {
		return nil
	}
	return err
}

// spent is a node's refusal of a transaction whose nonce was used: by
// a version of it (mined), or by another transaction.
func spent(err error) bool {
	return strings.Contains(strings.ToLower(err.Error()), "nonce too low")
}

// follow moves the broadcast sends on: confirmed, replaced, broadcast
// again or dropped.
func (s *Signer) follow(ctx context.Context, head *types.Header) (int, error) {
	sends, err := s.store.Sends(ctx, s.node.Chain.ID, s.sender, "broadcast", s.opts.Batch)
	if err != nil {
		return 0, err
	}
	s.metrics.unconfirmed.WithLabelValues(s.label).Set(float64(len(sends)))
	if len(sends) == 0 {
		s.metrics.oldest.WithLabelValues(s.label).Set(0)
		return 0, nil
	}
	if at := sends[0].BroadcastAt; at != nil {
		s.metrics.oldest.WithLabelValues(s.label).Set(max(0, s.now().Sub(*at).Seconds()))
	}
	// The wallet's mined count, read before the receipts: a nonce below it
	// with no receipt of ours was spent without us.
	mined, err := s.node.Client.NonceAt(ctx, s.from, nil)
	if err != nil {
		return 0, s.rpc(err)
	}
	n, errs := 0, []error(nil)
	for _, send := range sends {
		moved, err := s.followOne(ctx, head, mined, send)
		if isRPC(err) {
			return n, errors.Join(append(errs, err)...)
		}
		if err := s.stored(ctx, sendID(send), err); err != nil {
			errs = append(errs, err)
			continue
		}
		if moved {
			n++
		}
	}
	return n, errors.Join(errs...)
}

func (s *Signer) followOne(ctx context.Context, head *types.Header, mined uint64, send store.Send) (bool, error) {
	for i := len(send.Versions) - 1; i >= 0; i-- {
		v := send.Versions[i]
		r, err := s.node.Client.TransactionReceipt(ctx, common.HexToHash(v.Hash))
		if errors.Is(err, ethereum.NotFound) {
			continue
		}
		if err != nil {
			return false, s.rpc(err)
		}
		if head.Number.Uint64()+1 < r.BlockNumber.Uint64()+s.node.Confirmations {
			return false, nil // mined; its confirmations are coming
		}
		if r.Status != types.ReceiptStatusSuccessful {
			// Signed again at a new nonce, after a wait that doubles with
			// each revert (a recipient the token refuses would otherwise
			// spend the treasury's gas every round).
			if err := s.store.Drop(ctx, send); err != nil {
				return false, err
			}
			if send.Purpose == store.PurposeRefund {
				s.hold(ctx, send.RefundID, worker.ReasonProvider, fmt.Errorf("its transfer %s was mined and reverted", v.Hash))
			}
			return true, nil
		}
		if err := s.store.Confirm(ctx, send, v.Hash, r.BlockNumber.Uint64(), s.now()); err != nil {
			return false, err
		}
		spent := new(big.Int)
		if r.EffectiveGasPrice != nil {
			spent.Mul(r.EffectiveGasPrice, new(big.Int).SetUint64(r.GasUsed))
		}
		if send.Purpose == store.PurposeGas {
			spent.Add(spent, send.Units) // the sweep's gas, spent at its address
		}
		s.metrics.gasSpent.WithLabelValues(s.label).Add(major(spent, 18))
		return true, nil
	}
	if mined > send.Nonce {
		s.log.Error("the treasury's nonce was spent by a transaction that is not this refund's: the refund is signed again at a new nonce",
			"chain", s.label, "refund_id", send.RefundID, "nonce", send.Nonce)
		return true, s.store.Drop(ctx, send)
	}
	latest := send.Latest()
	if s.now().Sub(latest.SignedAt) >= s.opts.ReplaceAfter {
		return true, s.replace(ctx, head, send)
	}
	// Not mined yet: a node that forgot it (restarted empty, or the block
	// it was in left the chain) is given it again.
	if _, _, err := s.node.Client.TransactionByHash(ctx, common.HexToHash(latest.Hash)); errors.Is(err, ethereum.NotFound) {
		if err := s.send(ctx, latest.Raw); err != nil && !spent(err) {
			return false, s.rpc(err)
		}
	} else if err != nil {
		return false, s.rpc(err)
	}
	return false, nil
}

// replace signs send again at its nonce with fees a fifth higher (at
// least the chain's current ones), keeps the new version, then
// broadcasts it: the refund carries its hash. The new transaction moves
// what the last did: a token transfer's call, or a gas send's coin (its
// value; a replacement without it delivered nothing, and its sweep, found
// without gas, was funded again, and again: issue 60's simulation, seed 7).
func (s *Signer) replace(ctx context.Context, head *types.Header, send store.Send) error {
	last := send.Latest()
	var old types.Transaction
	if err := old.UnmarshalBinary(last.Raw); err != nil {
		return err
	}
	tip, err := s.node.Client.SuggestGasTipCap(ctx)
	if err != nil {
		return s.rpc(err)
	}
	bump := func(x *big.Int) *big.Int {
		return new(big.Int).Add(x, new(big.Int).Add(new(big.Int).Div(x, big.NewInt(5)), big.NewInt(1)))
	}
	tip = bigMax(tip, bump(last.TipCap))
	feeCap := bigMax(new(big.Int).Add(tip, new(big.Int).Mul(head.BaseFee, big.NewInt(2))), bump(last.FeeCap))
	chainID := big.NewInt(s.node.Chain.ID)
	tx, err := types.SignNewTx(s.key, types.LatestSignerForChainID(chainID), &types.DynamicFeeTx{ChainID: chainID, Nonce: send.Nonce,
		GasTipCap: tip, GasFeeCap: feeCap, Gas: last.Gas, To: old.To(), Value: old.Value(), Data: old.Data()})
	if err != nil {
		return err
	}
	raw, err := tx.MarshalBinary()
	if err != nil {
		return err
	}
	v := store.Version{Hash: strings.ToLower(tx.Hash().Hex()), Raw: raw, Gas: last.Gas, TipCap: tip, FeeCap: feeCap, SignedAt: s.now()}
	if err := s.store.Replace(ctx, send, last.Hash, v); err != nil {
		return err
	}
	s.metrics.replaced.WithLabelValues(s.label).Inc()
	what, key, id := "a refund's transaction", "refund_id", any(send.RefundID)
	if send.Purpose == store.PurposeGas {
		what, key, id = "a sweep's gas send", "sweep", send.SweepID
	}
	s.log.Warn(what+" was not mined in time: replaced at its nonce with a higher fee", "chain", s.label,
		key, id, "nonce", send.Nonce, "tx_hash", v.Hash, "replaces", last.Hash)
	if err := s.send(ctx, raw); err != nil && !spent(err) {
		return s.rpc(err) // kept: broadcast again next round
	}
	return nil
}

func bigMax(a, b *big.Int) *big.Int {
	if a.Cmp(b) >= 0 {
		return a
	}
	return b
}
