package payout

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"math/big"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/core/types"
	"github.com/jackc/pgx/v5"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/partnerpay/api/pkg/bankprovider"
	"github.com/partnerpay/api/pkg/catalog"
	"github.com/partnerpay/api/pkg/database"
	"github.com/partnerpay/api/pkg/envelope"
	"github.com/partnerpay/api/pkg/environment"
	"github.com/partnerpay/api/pkg/idempotency"
	"github.com/partnerpay/api/pkg/kithttp"
	"github.com/partnerpay/api/pkg/lifecycle"
	"github.com/partnerpay/api/pkg/obs"
	"github.com/partnerpay/api/pkg/partner"
	"github.com/partnerpay/api/pkg/worker"
	"github.com/partnerpay/api/services/payout/internal/chain"
	"github.com/partnerpay/api/services/payout/internal/mover"
	"github.com/partnerpay/api/services/payout/internal/store"
	"github.com/partnerpay/api/testkit/chaintest"
	"github.com/partnerpay/api/testkit/pgtest"
)

// The seeded simulation (issue 60; docs/architecture.md, "The
// simulation"): the payout service's own code (the service, the store on
// a real PostgreSQL, the mover, the chain's watcher and signer, two
// replicas of each) driven through a schedule of steps drawn from a seed:
// executions (keyed ones through the route and its idempotency
// middleware, some killed between two of their statements and retried;
// retried, raced by another beneficiary), deposits of every kind as real
// transfers, refund addresses, the provider's word (completed, failed and
// returned, with listed and unlisted reasons), the provider down, answers
// lost, the provider forgetting, a node refusing broadcasts or losing
// their answers, rounds of either replica in any order, replicas
// restarted (their memory lost), blocks mined, the chain reorganised (its
// last blocks' transactions mined again elsewhere, or lost) and time
// passing. The money rules are checked after every step, and once more
// when the faults stop and the work is done.
//
// SIM_SEED=n replays seed n; SIM_SEEDS=N runs seeds 1..N; SIM_STEPS sets
// the steps a seed takes. make sim runs them (12 seeds unless SEEDS says);
// every test run of the package runs two (simSmoke), under the race
// detector in make test; make sim-bugs checks that it catches every fault
// a simbug build plants.

// simSmoke are the seeds every test run of the package takes (under the
// race detector in make test); make sim takes more. What the simulation
// found, each fixed with it (the seeds are those of the schedule of the
// commit that found it; the schedule has grown since):
//
//   - seed 7: a sweep's transfer left in the node's pool with a fee the
//     chain would not take, for good (now topped up and signed again at
//     its nonce after CHAIN_REPLACE_AFTER);
//   - seed 6: then its earlier transfer mined after all, and the sweep's
//     new transfer of tokens already home failing for good (the earlier
//     hashes are now followed);
//   - seed 12: a signer's round killed as it released a refund's
//     savepoint carried on as if that refund alone had failed, and its
//     COMMIT (which runs whatever happens to the round's context) kept
//     the send without moving the wallet's next nonce, so every later
//     signing collided with it (database.Alone now returns ErrInDoubt;
//     TestAloneKeepsAFailureToItsRecordOnlyWhenItCan holds it);
//   - by reading, while mending the first: a sweep sent back to funding
//     after its transfer reverted was never funded again;
//   - seed 7, once the quiescence ran until nothing moved and checked
//     that every final deposit is home: a sweep's gas send replaced at its
//     nonce carried no coin (the replacement kept the call, not the
//     value), so its sweep, found without gas, was funded again every
//     round, for good (TestAGasSendReplacedAtItsNonceStillCarriesItsGas).
var simSmoke = []uint64{1, 2}

// simDefaultSteps are the steps a seed takes unless SIM_STEPS says.
const simDefaultSteps = 500

func TestSimulation(t *testing.T) {
	t.Parallel()
	seeds, steps := simSchedule(t)
	for _, seed := range seeds {
		t.Run("seed="+strconv.FormatUint(seed, 10), func(t *testing.T) {
			t.Parallel()
			s := newSim(t, seed)
			start := time.Now()
			for i := range steps {
				s.step(i)
			}
			s.quiesce()
			t.Logf("seed %d: %d steps and the quiescence in %s (%.0f steps/s); %d payouts, %s", seed, steps,
				time.Since(start).Round(time.Millisecond), float64(steps)/time.Since(start).Seconds(), len(s.payouts), s.tally())
		})
	}
}

// simSchedule is the seeds and the steps each takes, from SIM_SEED,
// SIM_SEEDS and SIM_STEPS.
func simSchedule(t *testing.T) ([]uint64, int) {
	steps := simDefaultSteps
	if v := os.Getenv("SIM_STEPS"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n <= 0 {
			t.Fatalf("SIM_STEPS=%q: want a positive number", v)
		}
		steps = n
	}
	if v := os.Getenv("SIM_SEED"); v != "" {
		seed, err := strconv.ParseUint(v, 10, 64)
		if err != nil {
			t.Fatalf("SIM_SEED=%q: want a number", v)
		}
		return []uint64{seed}, steps
	}
	v := os.Getenv("SIM_SEEDS")
	if v == "" {
		return simSmoke, steps
	}
	n, err := strconv.Atoi(v)
	if err != nil || n <= 0 {
		t.Fatalf("SIM_SEEDS=%q: want a positive number", v)
	}
	seeds := make([]uint64, n)
	for i := range seeds {
		seeds[i] = uint64(i + 1)
	}
	return seeds, steps
}

// simReplica is one replica's workers: the mover, the chain's watcher and
// signer, and its own view of the chain's node (whose broadcasts may be
// refused, or their answers lost).
type simReplica struct {
	worker  *mover.Worker
	watcher *chain.Watcher
	signer  *chain.Signer
	node    *faultyNode
}

// simPayout is a payout the simulation made, as the partner knows it.
type simPayout struct {
	id, quote, name string
}

type sim struct {
	t       *testing.T
	f       statusFixture
	route   http.Handler // the payout routes, behind their idempotency middleware
	grants  string       // the caller's grants, as the gateway forwards them
	seed    uint64
	rng     *rand.Rand
	ctx     context.Context
	steps   []string // what was done, in order
	reps    [2]*simReplica
	payouts []simPayout
	counts  map[string]int
	resent  []string // payouts handed over again after we knew the provider took them
	// statements are how many statements the last round of each kind
	// that moved something made: where a crash may land.
	statements map[string]int
}

func newSim(t *testing.T, seed uint64) *sim {
	f := newStatusFixture(t, pgtest.OpenWith(t, database.Options{Tracer: crashTracing{}},
		append([]database.Migrations{idempotency.Migrations}, migrationSets...)...))
	s := &sim{t: t, f: f, seed: seed, rng: rand.New(rand.NewPCG(seed, 0x5eed)), ctx: context.Background(), counts: map[string]int{},
		statements: map[string]int{"watch": 30, "move": 30, "sign": 30}}
	// The route as the payout binary serves it, its claims' leases on the
	// simulation's clock (renewed every 20 s of real time: never, in a
	// step, so a crash's statement is the seed's).
	log := discard()
	mux := http.NewServeMux()
	Routes(mux, MakeEndpoints(f.svc, kithttp.NewObserver(log, obs.NewOperations(prometheus.NewRegistry(), "payout"))),
		idempotency.Middleware(idempotency.NewStore(f.db, f.clock.now), idempotency.Options{Budget: 8 * time.Second, Lease: simLease}, log), log)
	grants, err := json.Marshal(acme.Grants)
	if err != nil {
		t.Fatal(err)
	}
	s.route, s.grants = mux, string(grants)
	for i := range s.reps {
		s.reps[i] = s.replica()
	}
	f.provider.set(func(p *fakeProvider) {
		p.retaken = func(ref string) {
			var knew bool
			if err := f.db.QueryRow(s.ctx, `SELECT handed_over_at IS NOT NULL FROM payouts WHERE id = $1`, ref).Scan(&knew); err != nil || knew {
				s.resent = append(s.resent, fmt.Sprintf("%s (%v)", ref, err))
			}
		}
	})
	return s
}

// replica starts a replica's workers afresh: a new process, with nothing
// in memory but what the database keeps.
func (s *sim) replica() *simReplica {
	st := store.NewStore(s.f.db, environment.Sandbox)
	reg := prometheus.NewRegistry()
	node := &faultyNode{Client: s.f.chain.chain.Client()}
	n, err := chain.NewNode(environment.Sandbox, 84532, node, simConfirmations)
	if err != nil {
		s.t.Fatal(err)
	}
	sg, err := chain.NewSigner(n, chaintest.Treasury.KeyHex(), st, s.f.clock.now, chain.SignerOptions{ReplaceAfter: time.Minute, Sweep: sweepKeys},
		chain.NewSignerMetrics(reg), discard(), reg)
	if err != nil {
		s.t.Fatal(err)
	}
	return &simReplica{
		worker:  mover.New(mover.Parts{Env: environment.Sandbox, Store: st, Provider: s.f.provider, Now: s.f.clock.now, Registry: reg}),
		watcher: chain.NewWatcher(n, st, s.f.clock.now, nil, chain.NewMetrics(reg), worker.NewRows("payout", discard(), reg), discard(), reg),
		signer:  sg,
		node:    node,
	}
}

// did notes step i's action (and counts its kind).
func (s *sim) did(i int, kind, format string, args ...any) {
	s.counts[kind]++
	s.steps = append(s.steps, fmt.Sprintf("%4d %-9s %s", i, kind, fmt.Sprintf(format, args...)))
}

// fail ends the seed with what broke and the steps that led there.
func (s *sim) fail(format string, args ...any) {
	s.t.Helper()
	from := max(0, len(s.steps)-40)
	s.t.Fatalf("seed %d: %s\nthe last %d steps:\n%s\nreplay: make sim SEED=%d SIM_STEPS=%d", s.seed, fmt.Sprintf(format, args...),
		len(s.steps)-from, strings.Join(s.steps[from:], "\n"), s.seed, len(s.steps))
}

// recent is one of the payouts, mostly one of the last five made (whose
// deposit windows are open), or -1 when there is none.
func (s *sim) recent() int {
	n := len(s.payouts)
	if n == 0 {
		return -1
	}
	if s.rng.IntN(10) < 7 {
		return n - 1 - s.rng.IntN(min(n, 5))
	}
	return s.rng.IntN(n)
}

// pick is one of n, or -1 when there is none.
func (s *sim) pick(n int) int {
	if n == 0 {
		return -1
	}
	return s.rng.IntN(n)
}

var simAddresses = []string{refundTo, "0x1111111111111111111111111111111111111111", "0x2222222222222222222222222222222222222222"}

var simNames = []string{"Ada Lovelace", "Grace Hopper"}

// step draws and takes one step, then checks the money rules.
func (s *sim) step(i int) {
	r := s.rng.IntN(100)
	switch {
	case r < 12:
		s.execute(i)
	case r < 17:
		s.race(i)
	case r < 30:
		s.deposit(i)
	case r < 36:
		s.refundAddress(i)
	case r < 46:
		s.provider(i)
	case r < 52:
		s.providerFault(i)
	case r < 78:
		s.round(i)
	case r < 82:
		s.f.chain.chain.Commit()
		s.did(i, "mine", "a block")
	case r < 85:
		s.reorg(i)
	case r < 96:
		d := []time.Duration{time.Second, 10 * time.Second, time.Minute, time.Minute, 10 * time.Minute}[s.rng.IntN(5)]
		if s.rng.IntN(15) == 0 {
			d = 2 * time.Hour // past every deposit window
		}
		s.advance(d)
		s.did(i, "time", "+%s (what waited mined first)", d)
	default:
		k := s.rng.IntN(2)
		s.reps[k] = s.replica()
		s.did(i, "restart", "replica %d", k)
	}
	s.check(i)
}

// advance moves the clock, and the chain's, on by d; what waits is mined
// first (the chain moves its time only between blocks).
func (s *sim) advance(d time.Duration) {
	for range 3 {
		s.f.chain.chain.Commit()
		if s.f.chain.chain.AdjustTime(d) == nil {
			s.f.clock.add(d)
			return
		}
	}
	// A transaction the node keeps but cannot mine (its fee below what the
	// miner takes) holds the chain's clock: ours moves alone, and the
	// blocks' times lag it until that transaction is replaced.
	s.f.clock.add(d)
	s.steps = append(s.steps, "     (the chain's clock is held: a transaction it cannot mine waits)")
}

// execute makes a payout: a new quote, executed for one of two
// beneficiaries (held first as a keyed execution is), with a refund
// address or not; sometimes retried, as a client does.
func (s *sim) execute(i int) {
	amount := []string{"10", "25.50", "100", "1000"}[s.rng.IntN(4)]
	q, err := s.f.svc.Quote(s.ctx, acme, QuoteRequest{CryptoCurrency: "USDC", Chain: 84532, FiatCurrency: "EUR", Country: "DE", CryptoAmount: &amount})
	if err != nil {
		s.fail("a quote: %v", err)
	}
	name := simNames[s.rng.IntN(len(simNames))]
	req := pay(q.QuoteID, name, goodIBAN)
	if s.rng.IntN(2) == 0 {
		req.RefundAddress = &simAddresses[s.rng.IntN(len(simAddresses))]
	}
	if s.rng.IntN(2) == 0 {
		s.executeKeyed(i, req, q.QuoteID, name, amount)
		return
	}
	p, err := s.f.svc.Execute(s.ctx, acme, req)
	if err != nil {
		s.fail("executing a fresh quote: %v", err)
	}
	s.payouts = append(s.payouts, simPayout{id: p.PayoutID, quote: q.QuoteID, name: name})
	s.did(i, "execute", "%s of %s for %s", p.PayoutID, amount, name)
	if s.rng.IntN(4) == 0 {
		again, err := s.f.svc.Execute(s.ctx, acme, req)
		if err != nil || again.PayoutID != p.PayoutID {
			s.fail("the same execution again: %s %v, want %s", again.PayoutID, err, p.PayoutID)
		}
		s.did(i, "retry", "%s answered again", p.PayoutID)
	}
}

// simLease is the lease of a keyed execution's claim (on the simulation's
// clock): a retry takes over the claim of a request that died once it
// has run out.
const simLease = time.Minute

// executeKeyed executes req with an Idempotency-Key through the route, as
// a partner's client does: sometimes the request dies between two of its
// statements (its answer lost with it) and the client sends it again at
// once; an answer of 409 idempotency_in_progress is a promise that the
// same request, sent again once the claim lapses, learns the outcome, and
// it must. The payout answered is the quote's, for its beneficiary, and
// the same request later is answered the same bytes.
func (s *sim) executeKeyed(i int, req ExecuteRequest, quoteID, name, amount string) {
	key := fmt.Sprintf("sim-%d-%d", s.seed, i)
	crash := 0
	if s.rng.IntN(3) == 0 {
		crash = 1 + s.rng.IntN(14)
	}
	promised := false
	for range 4 {
		a := s.send(req, key, crash)
		switch {
		case a.died:
			s.did(i, "killed", "the keyed execution of %s died before its statement %d; its answer is lost, and it is sent again", quoteID, crash)
			crash = 0
			continue
		case a.status == http.StatusConflict && a.code == envelope.CodeIdempotencyInProgress && !promised:
			promised = true
			s.advance(simLease + time.Second)
			s.did(i, "lapse", "+%s: %s answered in progress, and is sent again once the claim of the request that died lapses", simLease+time.Second, quoteID)
			continue
		case a.status != http.StatusOK:
			s.fail("a keyed execution of the fresh quote %s answered %d %s (after an in-progress answer: %v): %s", quoteID, a.status, a.code, promised, a.body)
		}
		var p Payout
		if err := json.Unmarshal(a.body, &p); err != nil || p.QuoteID != quoteID || p.Beneficiary.Name != name {
			s.fail("a keyed execution of %s for %s answered %s (%v)", quoteID, name, a.body, err)
		}
		s.payouts = append(s.payouts, simPayout{id: p.PayoutID, quote: quoteID, name: name})
		s.did(i, "keyed", "%s of %s for %s%s", p.PayoutID, amount, name, map[bool]string{true: " (a replay)"}[a.replayed])
		switch s.rng.IntN(6) {
		case 0:
			again := s.send(req, key, 0)
			if again.status != http.StatusOK || !again.replayed || !bytes.Equal(again.body, a.body) {
				s.fail("the same keyed execution again: %d (replayed %v) %s, want the first answer %s", again.status, again.replayed, again.body, a.body)
			}
			s.did(i, "retry", "%s answered again, byte for byte", p.PayoutID)
		case 1:
			other := pay(quoteID, simNames[1-slices.Index(simNames, name)], goodIBAN)
			reused := s.send(other, key, 0)
			if reused.status != http.StatusUnprocessableEntity || reused.code != envelope.CodeIdempotencyKeyReused {
				s.fail("the key of %s's execution sent for another beneficiary: %d %s, want 422 idempotency_key_reused", p.PayoutID, reused.status, reused.code)
			}
			s.did(i, "race", "%s's key, for another beneficiary: %s", p.PayoutID, reused.code)
		}
		return
	}
	s.fail("a keyed execution of %s never answered", quoteID)
}

// simAnswer is what the route answered.
type simAnswer struct {
	status   int
	code     envelope.Code
	body     []byte
	replayed bool
	died     bool // the request was killed mid-way: nobody heard its answer
}

// send is req through the route, with Idempotency-Key key (none when
// empty), as the gateway forwards it; crash > 0 kills the request before
// its crash-th statement reaches PostgreSQL, as a process killed there.
func (s *sim) send(req ExecuteRequest, key string, crash int) simAnswer {
	fields := map[string]any{"quoteId": req.QuoteID, "beneficiary": req.Beneficiary}
	if req.RefundAddress != nil {
		fields["refundAddress"] = *req.RefundAddress
	}
	body, err := json.Marshal(fields)
	if err != nil {
		s.t.Fatal(err)
	}
	ctx, budget := s.ctx, (*crashBudget)(nil)
	if crash > 0 {
		var cancel context.CancelFunc
		ctx, budget, cancel = crashAfter(s.ctx, crash)
		defer cancel()
	}
	r := httptest.NewRequestWithContext(ctx, http.MethodPost, "/v1/bank/payout", bytes.NewReader(body))
	r.Header.Set("Content-Type", "application/json")
	r.Header.Set(partner.HeaderKeyID, acme.KeyID)
	r.Header.Set(partner.HeaderGrants, s.grants)
	if key != "" {
		r.Header.Set(partner.HeaderIdempotencyKey, key)
	}
	w := httptest.NewRecorder()
	s.route.ServeHTTP(w, r)
	return simAnswer{status: w.Code, code: envelope.Code(w.Header().Get(partner.HeaderErrorCode)), body: w.Body.Bytes(),
		replayed: w.Header().Get(idempotency.ReplayedHeader) == "true", died: budget != nil && budget.fired.Load()}
}

// race executes an executed quote again, for the other beneficiary
// (through the route with a key of its own, or not): it must be refused.
func (s *sim) race(i int) {
	k := s.pick(len(s.payouts))
	if k < 0 {
		return
	}
	p := s.payouts[k]
	other := simNames[0]
	if other == p.name {
		other = simNames[1]
	}
	req := pay(p.quote, other, goodIBAN)
	if s.rng.IntN(2) == 0 {
		a := s.send(req, fmt.Sprintf("sim-%d-%d-race", s.seed, i), 0)
		if a.status != http.StatusConflict || a.code != envelope.CodeQuoteAlreadyExecuted {
			s.fail("quote %s, executed for %s as %s, executed again (keyed) for %s: %d %s", p.quote, p.name, p.id, other, a.status, a.body)
		}
		s.did(i, "race", "%s's quote for %s, keyed: %s", p.id, other, a.code)
		return
	}
	got, err := s.f.svc.Execute(s.ctx, acme, req)
	if err == nil {
		s.fail("quote %s, executed for %s as %s, executed again for %s as %s", p.quote, p.name, p.id, other, got.PayoutID)
	}
	s.did(i, "race", "%s's quote for %s: %s", p.id, other, code(err))
}

// simConfirmations are the confirmations the simulation's chain asks of a
// transfer; its reorganisations are shallower (a deeper one undoes what
// any watcher of that chain counted, which no software can help).
const simConfirmations = 3

// reorg has the chain reorganise: its last one or two blocks leave it,
// and their transactions are mined again in other blocks, or lost with
// them (and with every other transaction waiting, as a node that drops
// its pool). Half the time the tip changes under a watcher that follows
// it closely: what waits is mined, and one replica's watcher reads it,
// first. A chain with transactions waiting cannot be forked here (the
// simulated chain refuses): that step mines them instead.
func (s *sim) reorg(i int) {
	c := s.f.chain.chain
	if s.rng.IntN(2) == 0 {
		c.Commit()
		k := s.rng.IntN(2)
		n, _ := s.reps[k].watcher.Round(s.ctx)
		s.did(i, "watch", "replica %d, at the tip: %d", k, n)
	}
	head, err := c.Client().HeaderByNumber(s.ctx, nil)
	if err != nil {
		s.t.Fatal(err)
	}
	depth := int64(1 + s.rng.IntN(simConfirmations-1))
	lost := s.rng.IntN(3) == 0
	if head.Number.Int64() <= depth {
		return
	}
	parent, err := c.Client().HeaderByNumber(s.ctx, big.NewInt(head.Number.Int64()-depth))
	if err != nil {
		s.t.Fatal(err)
	}
	if err := c.Fork(parent.Hash()); err != nil {
		c.Commit()
		s.did(i, "mine", "a block (no reorganisation: %v)", err)
		return
	}
	if lost {
		c.Rollback()
	}
	for range depth + 1 {
		c.Commit()
	}
	s.did(i, "reorg", "the last %d blocks leave the chain, their transactions %s", depth, map[bool]string{true: "lost", false: "mined again"}[lost])
	s.canonical(i)
}

// canonical checks that what we counted on chain is on the chain, as we
// recorded it: every deposit recorded, every send confirmed and every
// sweep swept is in a block of the canonical chain (a reorganisation
// shallower than the confirmations leaves them all there), and each send
// moved what it was for: its coin (a sweep's gas), or its token, to its
// recipient.
func (s *sim) canonical(i int) {
	s.t.Helper()
	rows, err := s.f.db.Query(s.ctx, `SELECT 'deposit', tx_hash, block_number, block_hash, '', '', '' FROM payout_deposits
		UNION ALL SELECT 'send', mined_hash, mined_block, '', token, recipient, units::text FROM payout_chain_sends WHERE state = 'confirmed'
		UNION ALL SELECT 'sweep', tx_hash, -1, '', '', '', '' FROM payout_sweeps WHERE state = 'swept'`)
	if err != nil {
		s.t.Fatal(err)
	}
	type counted struct {
		What, Hash              string
		Block                   int64
		BlockHash               string
		Token, Recipient, Units string
	}
	all, err := pgx.CollectRows(rows, pgx.RowToStructByPos[counted])
	if err != nil {
		s.t.Fatal(err)
	}
	cl := s.f.chain.chain.Client()
	var gone []string
	for _, c := range all {
		hash := common.HexToHash(c.Hash)
		r, err := cl.TransactionReceipt(s.ctx, hash)
		if err != nil {
			gone = append(gone, fmt.Sprintf("%s %s: %v", c.What, c.Hash, err))
			continue
		}
		h, err := cl.HeaderByNumber(s.ctx, r.BlockNumber)
		switch {
		case err != nil:
			s.t.Fatal(err)
		case h.Hash() != r.BlockHash || r.Status != types.ReceiptStatusSuccessful:
			gone = append(gone, fmt.Sprintf("%s %s in block %d, which left the chain, or failed (%d)", c.What, c.Hash, r.BlockNumber, r.Status))
		case c.Block >= 0 && (r.BlockNumber.Int64() != c.Block || (c.BlockHash != "" && !strings.EqualFold(c.BlockHash, h.Hash().Hex()))):
			gone = append(gone, fmt.Sprintf("%s %s counted in block %d %s, mined in block %d %s", c.What, c.Hash, c.Block, c.BlockHash,
				r.BlockNumber, h.Hash().Hex()))
		}
		if c.What != "send" {
			continue
		}
		tx, _, err := cl.TransactionByHash(s.ctx, hash)
		if err != nil {
			s.t.Fatal(err)
		}
		units, _ := new(big.Int).SetString(c.Units, 10)
		to := common.HexToAddress(c.Recipient)
		if c.Token == store.NativeCoin {
			if tx.Value().Cmp(units) != 0 || *tx.To() != to {
				gone = append(gone, fmt.Sprintf("gas send %s moved %s wei to %s, for %s to %s", c.Hash, tx.Value(), tx.To(), units, to))
			}
		} else if *tx.To() != common.HexToAddress(c.Token) || !bytes.Equal(tx.Data(), chaintest.TransferData(to, units)) || tx.Value().Sign() != 0 {
			gone = append(gone, fmt.Sprintf("refund send %s is not the transfer of %s %s to %s", c.Hash, units, c.Token, to))
		}
	}
	if len(gone) > 0 {
		s.fail("after step %d, counted on chain but not on it as counted: %v", i, gone)
	}
}

// deposit sends a transfer to a payout's deposit address through the
// faucet: exact, short, in excess, or of the wrong token, to a payout in
// any state (late and unexpected ones included).
func (s *sim) deposit(i int) {
	k := s.recent()
	if k < 0 {
		return
	}
	p := s.payouts[k]
	req := DepositRequest{PayoutID: p.id}
	kind := []string{"exact", "exact", "short", "excess", "wrong token"}[s.rng.IntN(5)]
	switch kind {
	case "short":
		req.Amount = strp("1")
	case "excess":
		req.Amount = strp("2000000")
	case "wrong token":
		req.CryptoCurrency = strp("EURC")
	}
	d, err := s.f.svc.SandboxDeposit(s.ctx, acme, req)
	if err != nil {
		s.fail("a deposit to %s: %v", p.id, err)
	}
	s.did(i, "deposit", "%s to %s (%s): %s", kind, p.id, d.Status, d.TxHash)
}

// refundAddress sets a payout's refund address (again, perhaps).
func (s *sim) refundAddress(i int) {
	k := s.pick(len(s.payouts))
	if k < 0 {
		return
	}
	p := s.payouts[k]
	a := simAddresses[s.rng.IntN(len(simAddresses))]
	_, err := s.f.svc.SetRefundAddress(s.ctx, acme, RefundAddressRequest{PayoutID: p.id, Address: a})
	s.did(i, "address", "%s to %s: %s", p.id, a, code(err))
}

// provider has the provider say something of a payout it took, along its
// own arrows: a payout processing completes or fails, one completed is
// returned, with listed and unlisted reasons; or a word it tells only when
// asked (its feed lost it).
func (s *sim) provider(i int) {
	now := map[string]string{}
	s.f.provider.set(func(f *fakeProvider) {
		for ref := range f.payouts {
			now[ref] = f.word[ref].Status
		}
	})
	// (Map order is not the seed's: the payouts' order is.)
	var refs []string
	for _, p := range s.payouts {
		if st := now[p.id]; st == "processing" || st == "completed" {
			refs = append(refs, p.id)
		}
	}
	if len(refs) == 0 {
		return
	}
	ref := refs[s.rng.IntN(len(refs))]
	words := []bankprovider.Payout{
		{Status: "completed", CompletedAt: "2026-11-29T12:00:03Z"},
		{Status: "completed", CompletedAt: "2026-11-29T12:00:03Z"},
		{Status: "failed", FailureReason: "account_closed"},
		{Status: "failed", FailureReason: "insufficient_funds"},
	}
	if now[ref] == "completed" {
		words = []bankprovider.Payout{
			{Status: "returned", ReturnReason: "account_closed", ReturnCode: "R02", CompletedAt: "2026-11-29T12:00:03Z"},
			{Status: "returned", ReturnReason: "account_frozen", ReturnCode: "R16", CompletedAt: "2026-11-29T12:00:03Z"},
		}
	}
	w := words[s.rng.IntN(len(words))]
	if s.rng.IntN(5) == 0 {
		s.f.provider.tells(ref, w)
		s.did(i, "provider", "%s %s %s, told only when asked", ref, w.Status, w.FailureReason+w.ReturnReason)
		return
	}
	s.f.provider.says(ref, w)
	s.did(i, "provider", "%s %s %s", ref, w.Status, w.FailureReason+w.ReturnReason)
}

// providerFault breaks or mends the provider.
func (s *sim) providerFault(i int) {
	switch r := s.rng.IntN(10); {
	case r < 4:
		s.f.provider.set(func(f *fakeProvider) { f.down = !f.down })
		s.did(i, "fault", "the provider down or up again")
	case r < 9:
		s.f.provider.set(func(f *fakeProvider) { f.loseNext = true })
		s.did(i, "fault", "the provider's next answer to a hand-over is lost (it takes the payout)")
	default:
		s.f.provider.forget()
		s.did(i, "fault", "the provider forgets everything")
	}
}

// round runs one round of one of a replica's workers, its node perhaps
// refusing broadcasts or losing their answers meanwhile. Every round
// counts its statements; one in five is killed before one of them, drawn
// from as many as the last round of its kind that moved something made
// (so a crash lands anywhere in a round that works, between its commits
// too), and its replica starts again with nothing in memory.
func (s *sim) round(i int) {
	k := s.rng.IntN(2)
	r := s.reps[k]
	kind := []string{"watch", "watch", "move", "move", "move", "sign", "sign"}[s.rng.IntN(7)]
	at, crash := int(^uint32(0)>>1), ""
	if s.rng.IntN(5) == 0 {
		at = 1 + s.rng.IntN(s.statements[kind])
		crash = fmt.Sprintf(", killed before its statement %d", at)
	}
	ctx, budget, cancel := crashAfter(s.ctx, at)
	defer cancel()
	var n int
	switch kind {
	case "watch":
		n, _ = r.watcher.Round(ctx)
		s.did(i, kind, "replica %d%s: %d", k, crash, n)
	case "move":
		n, _ = r.worker.Round(ctx)
		s.did(i, kind, "replica %d%s: %d", k, crash, n)
	default:
		fault := s.rng.IntN(8)
		r.node.set(func(n *faultyNode) { n.refuse, n.lose = fault == 0, fault == 1 })
		n, _ = r.signer.Round(ctx)
		r.node.set(func(n *faultyNode) { n.refuse, n.lose = false, false })
		s.did(i, kind, "replica %d (node fault %d)%s: %d", k, fault, crash, n)
	}
	// (A round's error, the provider down or a broadcast refused, is the
	// next round's to mend.)
	if budget.fired.Load() {
		s.reps[k] = s.replica()
		s.did(i, "crash", "replica %d died mid-round, and starts again", k)
		return
	}
	if n > 0 {
		s.statements[kind] = max(8, budget.spent())
	}
}

// quiesce stops every fault, settles what the provider holds, closes every
// deposit window, and runs both replicas until nothing moves; then checks
// that nothing is left that only we could finish.
func (s *sim) quiesce() {
	s.f.provider.set(func(f *fakeProvider) { f.down, f.loseNext = false, false })
	s.advance(3 * time.Hour)
	for round := range 60 {
		// The provider settles what it holds (a hand-over made again
		// meanwhile included).
		s.f.provider.set(func(f *fakeProvider) {
			for _, p := range s.payouts {
				if w, ok := f.word[p.id]; ok && w.Status == "processing" {
					f.word[p.id] = bankprovider.Payout{ID: w.ID, Reference: p.id, Status: "completed", CompletedAt: "2026-11-29T12:00:03Z"}
					f.publish(f.word[p.id])
				}
			}
		})
		s.f.chain.chain.Commit()
		moved := 0
		for k, r := range s.reps {
			for range 5 {
				n, err := r.watcher.Round(s.ctx)
				if err != nil {
					s.fail("quiescence: replica %d's watcher: %v", k, err)
				}
				if n == 0 {
					break
				}
			}
			n, err := r.worker.Round(s.ctx)
			if err != nil {
				s.fail("quiescence: replica %d's mover: %v", k, err)
			}
			m, err := r.signer.Round(s.ctx)
			if err != nil {
				s.fail("quiescence: replica %d's signer: %v", k, err)
			}
			moved += n + m
		}
		s.check(len(s.steps))
		if moved == 0 && round > 5 {
			break
		}
		s.advance(2 * time.Minute) // past replacements, holds and backoffs
	}
	s.steps = append(s.steps, "     quiesced")
	s.canonical(len(s.steps))
	// Nothing waits on us: every payout is final, or processing at a
	// provider that forgot it (found, counted and paged: an operator's).
	stuck, err := s.strings(`SELECT id || ' ' || status FROM payouts WHERE status NOT IN ('completed', 'failed', 'returned', 'expired')
		AND NOT (status = 'processing' AND provider_missing_at IS NOT NULL)`)
	if err != nil {
		s.t.Fatal(err)
	}
	if len(stuck) > 0 {
		s.fail("quiescence: payouts not final: %v", stuck)
	}
	// Every refund with an address is confirmed on chain.
	unsent, err := s.strings(`SELECT id || ' ' || status FROM payout_refunds WHERE status <> 'confirmed' AND address IS NOT NULL`)
	if err != nil {
		s.t.Fatal(err)
	}
	if len(unsent) > 0 {
		s.fail("quiescence: refunds with an address not confirmed: %v", unsent)
	}
	// Every deposit that is final is home: swept once, by a sweep done
	// (a deposit of a token the catalogue does not list stays; so does
	// one whose payout still owes a refund it has no address for).
	unswept, err := s.strings(`SELECT 'sweep ' || id || ' ' || state FROM payout_sweeps WHERE state <> 'swept'
		UNION ALL SELECT 'deposit ' || d.tx_hash || ' of ' || p.id || ' (' || p.status || ')' FROM payout_deposits d JOIN payouts p ON p.id = d.payout_id
		JOIN (VALUES ` + simTokens() + `) t (address, symbol) ON t.address = lower(d.token)
		WHERE d.sweep_id IS NULL AND p.status IN ('completed', 'failed', 'returned', 'expired')
		AND NOT EXISTS (SELECT 1 FROM payout_refunds r WHERE r.payout_id = p.id AND r.status <> 'confirmed' AND r.crypto_currency NOT LIKE '0x%')`)
	if err != nil {
		s.t.Fatal(err)
	}
	if len(unswept) > 0 {
		s.fail("quiescence: final deposits not home: %v", unswept)
	}
}

// tally says what the seed did, by kind.
func (s *sim) tally() string {
	var out []string
	for _, k := range []string{"execute", "keyed", "killed", "lapse", "retry", "race", "deposit", "address", "provider", "fault", "watch", "move",
		"sign", "mine", "reorg", "time", "restart", "crash"} {
		out = append(out, fmt.Sprintf("%d %s", s.counts[k], k))
	}
	var refunds, confirmed int
	if err := s.f.db.QueryRow(s.ctx, `SELECT count(*), count(*) FILTER (WHERE status = 'confirmed') FROM payout_refunds`).Scan(&refunds,
		&confirmed); err == nil {
		out = append(out, fmt.Sprintf("%d refunds (%d confirmed)", refunds, confirmed))
	}
	return strings.Join(out, ", ")
}

// simChecks are the money rules, each a query answering what breaks it
// (no row: it holds).
var simChecks = []struct{ name, query string }{
	{"a quote pays one beneficiary", `SELECT quote_id FROM payouts GROUP BY quote_id HAVING count(*) > 1`},
	{"statuses move only along the arrows, each with its history row", `
		WITH h AS (SELECT payout_id, status, lag(status) OVER (PARTITION BY payout_id ORDER BY at, ord) AS prev,
			row_number() OVER (PARTITION BY payout_id ORDER BY at DESC, ord DESC) AS last
			FROM (SELECT payout_id, status, at, CASE status WHEN 'awaiting_deposit' THEN 0 WHEN 'processing' THEN 1
				WHEN 'expired' THEN 1 WHEN 'completed' THEN 2 WHEN 'failed' THEN 2 ELSE 3 END AS ord FROM payout_history) x)
		SELECT payout_id || ': ' || coalesce(prev, '(none)') || ' → ' || status FROM h
		WHERE (prev IS NULL AND status <> 'awaiting_deposit') OR (prev IS NOT NULL AND (prev, status) NOT IN (` + simMoves() + `))
		UNION ALL
		SELECT p.id || ': is ' || p.status || ', its history ends at ' || coalesce(h.status, '(none)') FROM payouts p
			LEFT JOIN h ON h.payout_id = p.id AND h.last = 1 WHERE h.status IS DISTINCT FROM p.status`},
	{"the history a payout's row keeps is its history rows, in order", `
		SELECT p.id || ': keeps ' || p.history_statuses::text || ', has ' || coalesce(h.statuses::text, '(none)') FROM payouts p
			LEFT JOIN (SELECT payout_id, array_agg(status ORDER BY at, ord) AS statuses, array_agg(at ORDER BY at, ord) AS times
				FROM (SELECT payout_id, status, at, CASE status WHEN 'awaiting_deposit' THEN 0 WHEN 'processing' THEN 1
					WHEN 'expired' THEN 1 WHEN 'completed' THEN 2 WHEN 'failed' THEN 2 ELSE 3 END AS ord FROM payout_history) x
				GROUP BY payout_id) h ON h.payout_id = p.id
		WHERE (p.history_statuses, p.history_times) IS DISTINCT FROM (h.statuses, h.times)`},
	{"what arrived is what was kept plus every refund owed, per token", `
		WITH arrived AS (SELECT d.payout_id, t.symbol, sum(d.amount) / 1000000 AS amount FROM payout_deposits d
				JOIN (VALUES ` + simTokens() + `) t (address, symbol) ON t.address = lower(d.token) GROUP BY 1, 2),
			owed AS (SELECT payout_id, crypto_currency AS symbol, sum(amount::numeric) AS amount FROM payout_refunds GROUP BY 1, 2),
			kept AS (SELECT id AS payout_id, crypto_currency AS symbol, '` + simOwed + `'::numeric AS amount FROM payouts
				WHERE deposit_tx_hash IS NOT NULL AND status IN ('awaiting_deposit', 'processing', 'completed'))
		SELECT coalesce(a.payout_id, o.payout_id, k.payout_id) || ' ' || coalesce(a.symbol, o.symbol, k.symbol) || ': arrived ' ||
			coalesce(a.amount, 0) || ', kept ' || coalesce(k.amount, 0) || ', refunds ' || coalesce(o.amount, 0)
		FROM arrived a FULL JOIN owed o USING (payout_id, symbol) FULL JOIN kept k USING (payout_id, symbol)
		WHERE coalesce(a.amount, 0) <> coalesce(k.amount, 0) + coalesce(o.amount, 0)`},
	{"no refund of the payout's own money stands beside a completed payout", `
		SELECT p.id || ' ' || r.reason FROM payouts p JOIN payout_refunds r ON r.payout_id = p.id
		WHERE p.status = 'completed' AND r.reason IN ('payout_failed', 'payout_returned', 'deposit_short', 'deposit_late')`},
	{"every status has its event, once", `
		SELECT h.payout_id || ' ' || h.status || ': ' || count(DISTINCT h.at) || ' entries, ' ||
			(SELECT count(*) FROM payout_events e WHERE e.object_id = h.payout_id AND e.type = 'payout.' || h.status) || ' events'
		FROM payout_history h GROUP BY h.payout_id, h.status
		HAVING count(*) <> (SELECT count(*) FROM payout_events e WHERE e.object_id = h.payout_id AND e.type = 'payout.' || h.status)`},
	{"every refund has the event of its status, once", `
		SELECT r.id || ' ' || r.status || ': ' || coalesce(e.n, 0) || ' events' FROM payout_refunds r
			LEFT JOIN (SELECT data->>'refundId' AS refund_id, type, count(*) AS n FROM payout_events
				WHERE type LIKE 'payout.refund.%' GROUP BY 1, 2) e ON e.refund_id = r.id AND e.type = 'payout.refund.' || r.status
		WHERE coalesce(e.n, 0) <> 1`},
	{"a refund sent is sent once: one live transaction a refund", `
		SELECT refund_id FROM payout_chain_sends WHERE purpose = 'refund' AND state <> 'dropped' GROUP BY refund_id HAVING count(*) > 1`},
	{"a deposit is swept once", `
		SELECT tx_hash FROM payout_deposits d WHERE sweep_id IS NOT NULL AND NOT EXISTS (SELECT 1 FROM payout_sweeps w WHERE w.id = d.sweep_id)`},
}

// simTokens is the chain's tokens as SQL pairs of their contract (lower
// case) and symbol.
func simTokens() string {
	c, _ := catalog.ChainsFor(environment.Sandbox).Chain(84532)
	var out []string
	for _, t := range c.Tokens {
		out = append(out, fmt.Sprintf("('%s', '%s')", strings.ToLower(t.Address), t.Symbol))
	}
	return strings.Join(out, ", ")
}

// simOwed is what every simulated payout owes (record.Owed).
const simOwed = "1234567.89"

// simMoves is lifecycle.PayoutMoves as SQL pairs.
func simMoves() string {
	var out []string
	for _, m := range lifecycle.PayoutMoves {
		out = append(out, fmt.Sprintf("('%s', '%s')", m[0], m[1]))
	}
	return strings.Join(out, ", ")
}

// check runs every money rule, and the provider's: a payout is handed
// over again only when the provider does not know it and we never knew it
// took it (its answer lost, then the provider restarted empty): one we
// knew it took is never sent again, even to a provider that forgot it.
func (s *sim) check(i int) {
	s.t.Helper()
	for _, c := range simChecks {
		broken, err := s.strings(c.query)
		if err != nil {
			s.t.Fatalf("check %q: %v", c.name, err)
		}
		if len(broken) > 0 {
			s.fail("after step %d, %q does not hold: %v", i, c.name, broken)
		}
	}
	if len(s.resent) > 0 {
		s.fail("after step %d, payouts handed to the provider again though we knew it had taken them: %v", i, s.resent)
	}
	// What the provider holds, we hold as handed over; what we hold as
	// handed over, the provider took.
	words, taken := map[string]string{}, map[string]int{}
	s.f.provider.set(func(f *fakeProvider) {
		for ref := range f.payouts {
			words[ref] = f.word[ref].Status
		}
		for ref, n := range f.taken {
			taken[ref] = n
		}
	})
	rows, err := s.f.db.Query(s.ctx, `SELECT id, status, handed_over_at IS NOT NULL FROM payouts`)
	if err != nil {
		s.t.Fatal(err)
	}
	defer rows.Close()
	var broken []string
	for rows.Next() {
		var id, status string
		var handed bool
		if err := rows.Scan(&id, &status, &handed); err != nil {
			s.t.Fatal(err)
		}
		if w := words[id]; (w == "processing" || w == "completed") && (status == "failed" || status == "expired") {
			broken = append(broken, fmt.Sprintf("%s is %s, and the provider has it %s: paid and refunded", id, status, w))
		}
		if handed && taken[id] == 0 {
			broken = append(broken, fmt.Sprintf("%s is handed over (%s), and the provider never took it", id, status))
		}
	}
	if err := rows.Err(); err != nil {
		s.t.Fatal(err)
	}
	if len(broken) > 0 {
		s.fail("after step %d, we and the provider disagree: %v", i, broken)
	}
}

// strings are the rows of a query of one text column.
func (s *sim) strings(query string) ([]string, error) {
	rows, err := s.f.db.Query(s.ctx, query)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, pgx.RowTo[string])
}
