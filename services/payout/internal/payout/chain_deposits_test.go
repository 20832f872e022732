package payout

import (
	"context"
	"fmt"
	"math/big"
	"strings"
	"testing"
	"time"

	"github.com/ethereum/go-ethereum"
	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/core/types"
	"github.com/ethereum/go-ethereum/crypto"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/partnerpay/api/pkg/environment"
	"github.com/partnerpay/api/pkg/worker"
	"github.com/partnerpay/api/services/payout/internal/chain"
	"github.com/partnerpay/api/services/payout/internal/store"
	"github.com/partnerpay/api/testkit/chaintest"
	"github.com/partnerpay/api/testkit/pgtest"
)

// usdcUnits is amount of USDC (6 decimals) in its smallest unit.
func usdcUnits(t testing.TB, amount string) *big.Int {
	t.Helper()
	u, err := chain.Units(amount, 6)
	if err != nil {
		t.Fatal(err)
	}
	return u
}

var usdc = common.HexToAddress("0x036CbD53842c5426634e7929541eC2318f3dCF7e")

// A partner pays a payout the way a wallet does: a transfer from its own
// wallet to deposit.address. The watcher records it once confirmed, and
// the payout takes it (its depositTxHash is the transfer's) and is handed
// over.
func TestATransferFromAWalletPaysThePayout(t *testing.T) {
	t.Parallel()
	f := newStatusFixture(t, pgtest.Open(t, migrationSets...))
	ctx := context.Background()
	p := f.payout(t, "20")
	tx, err := f.chain.chain.Transfer(ctx, chaintest.Partner, usdc, common.HexToAddress(p.Deposit.Address), usdcUnits(t, p.Deposit.Amount))
	if err != nil {
		t.Fatal(err)
	}
	if st := f.status(t, p.PayoutID); st.Status != "awaiting_deposit" {
		t.Fatalf("before the transfer is mined: %s", st.Status)
	}
	f.work(t)
	st := f.status(t, p.PayoutID)
	if st.Status != "processing" || st.DepositTxHash != tx.Hash().Hex() || len(st.Refunds) != 0 {
		t.Fatalf("after the transfer: %+v", st)
	}
	if creates, _, _ := f.provider.counts(); creates != 1 {
		t.Fatalf("handed over %d times, want once", creates)
	}
}

// Every deposit address is a key we hold: the private key derived from the
// seed at the payout's index moves the funds that arrived there.
func TestADepositAddressIsAKeyWeHold(t *testing.T) {
	t.Parallel()
	f := newStatusFixture(t, pgtest.Open(t, migrationSets...))
	ctx := context.Background()
	p := f.payout(t, "21")
	var index int64
	if err := f.db.QueryRow(ctx, `SELECT deposit_index FROM payouts WHERE id = $1`, p.PayoutID).Scan(&index); err != nil {
		t.Fatal(err)
	}
	key, err := testKeys.Key(uint32(index))
	if err != nil {
		t.Fatal(err)
	}
	deposit := common.HexToAddress(p.Deposit.Address)
	if got := crypto.PubkeyToAddress(key.PublicKey); got != deposit {
		t.Fatalf("the key at index %d is %s's, not the deposit address %s", index, got, deposit)
	}
	c := f.chain.chain
	if _, err := c.Transfer(ctx, chaintest.Partner, usdc, deposit, usdcUnits(t, "7.5")); err != nil {
		t.Fatal(err)
	}
	sendGas(t, c, deposit)
	c.Commit()
	tx, err := c.Transfer(ctx, chaintest.Wallet{Key: key, Address: deposit}, usdc, chaintest.Treasury.Address, usdcUnits(t, "7.5"))
	if err != nil {
		t.Fatal(err)
	}
	c.Commit()
	r, err := c.Client().TransactionReceipt(ctx, tx.Hash())
	if err != nil || r.Status != types.ReceiptStatusSuccessful {
		t.Fatalf("the deposit key's transfer home: %+v %v", r, err)
	}
	if b := balance(t, c, usdc, chaintest.Treasury.Address); new(big.Int).Sub(b, chaintest.TokenUnits).Cmp(usdcUnits(t, "7.5")) != 0 {
		t.Fatalf("the treasury holds %s, want 7.5 USDC more than it had", b)
	}
}

// sendGas sends to some ETH for gas from the partner wallet.
func sendGas(t *testing.T, c *chaintest.Chain, to common.Address) {
	t.Helper()
	ctx := context.Background()
	cl := c.Client()
	nonce, err := cl.PendingNonceAt(ctx, chaintest.Partner.Address)
	if err != nil {
		t.Fatal(err)
	}
	head, err := cl.HeaderByNumber(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	tip := big.NewInt(1_000_000_000)
	tx, err := types.SignNewTx(chaintest.Partner.Key, types.LatestSignerForChainID(big.NewInt(c.ID)), &types.DynamicFeeTx{
		ChainID: big.NewInt(c.ID), Nonce: nonce, GasTipCap: tip, GasFeeCap: new(big.Int).Add(tip, new(big.Int).Mul(head.BaseFee, big.NewInt(2))),
		Gas: 21_000, To: &to, Value: big.NewInt(1e17)})
	if err != nil {
		t.Fatal(err)
	}
	if err := cl.SendTransaction(ctx, tx); err != nil {
		t.Fatal(err)
	}
	if err := chaintest.AwaitPending(ctx, cl, chaintest.Partner.Address, nonce); err != nil {
		t.Fatal(err)
	}
}

// balance is an ERC-20 balance, read with eth_call.
func balance(t testing.TB, c *chaintest.Chain, token, owner common.Address) *big.Int {
	t.Helper()
	data := append(crypto.Keccak256([]byte("balanceOf(address)"))[:4], common.LeftPadBytes(owner.Bytes(), 32)...)
	out, err := c.Client().CallContract(context.Background(), ethereum.CallMsg{To: &token, Data: data}, nil)
	if err != nil {
		t.Fatal(err)
	}
	return new(big.Int).SetBytes(out)
}

// A reorganisation (DESIGN §10): a transfer that vanished before its
// confirmations is never recorded, and one recorded, mined again in
// another block after a reorganisation deeper than its confirmations, is
// never recorded twice; the watcher goes back to the last block it passed
// that the chain still has.
func TestAReorganisationNeverCountsATransferTwiceNorOneThatVanished(t *testing.T) {
	t.Parallel()
	f := newStatusFixture(t, pgtest.Open(t, migrationSets...))
	ctx := context.Background()
	c := f.chain.chain
	w, reg := f.watcherWith(t, 2)
	watch := func() { t.Helper(); watchAll(t, w) }
	recorded := func(id string) int {
		t.Helper()
		var n int
		if err := f.db.QueryRow(ctx, `SELECT count(*) FROM payout_deposits WHERE payout_id = $1`, id).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	head := func() *types.Header {
		t.Helper()
		h, err := c.Client().HeaderByNumber(ctx, nil)
		if err != nil {
			t.Fatal(err)
		}
		return h
	}
	c.Commit()
	watch() // the watcher's place: the chain as it is

	// A transfer mined in one block, one confirmation short, then the
	// block leaves the chain and the transfer with it.
	x := f.payout(t, "22")
	before := head()
	if _, err := f.svc.SandboxDeposit(ctx, acme, DepositRequest{PayoutID: x.PayoutID}); err != nil {
		t.Fatal(err)
	}
	c.Commit()
	watch()
	if n := recorded(x.PayoutID); n != 0 {
		t.Fatalf("a transfer with one confirmation of two was recorded (%d)", n)
	}
	if err := c.Fork(before.Hash()); err != nil {
		t.Fatal(err)
	}
	c.Rollback() // it is not mined again
	c.Commit()
	c.Commit()
	c.Commit()
	watch()
	if st := f.status(t, x.PayoutID); recorded(x.PayoutID) != 0 || st.Status != "awaiting_deposit" || st.DepositTxHash != "" || len(st.Refunds) != 0 {
		t.Fatalf("a transfer that vanished before its confirmations: %d recorded, %+v", recorded(x.PayoutID), st)
	}

	// A transfer recorded with its confirmations, then a reorganisation
	// deeper than them mines it again in another block.
	y := f.payout(t, "23")
	before = head()
	if _, err := f.svc.SandboxDeposit(ctx, acme, DepositRequest{PayoutID: y.PayoutID}); err != nil {
		t.Fatal(err)
	}
	first := c.Commit()
	c.Commit()
	watch()
	if n := recorded(y.PayoutID); n != 1 {
		t.Fatalf("a transfer with its confirmations: recorded %d times, want once", n)
	}
	if err := c.Fork(before.Hash()); err != nil {
		t.Fatal(err)
	}
	if again := c.Commit(); again == first {
		t.Fatal("the reorganisation mined the same block")
	}
	c.Commit()
	c.Commit()
	watch()
	if _, err := f.worker.HandOverRound(ctx); err != nil {
		t.Fatal(err)
	}
	st := f.status(t, y.PayoutID)
	if n := recorded(y.PayoutID); n != 1 || len(st.Refunds) != 0 || st.Status != "processing" {
		t.Fatalf("after a reorganisation that mined it again: recorded %d times, %+v", n, st)
	}
	if n := testutilValue(t, reg, "partnerapi_chain_reorgs_total"); n < 1 {
		t.Fatalf("partnerapi_chain_reorgs_total = %v, want the reorganisation counted", n)
	}
	if n := testutilValue(t, reg, "partnerapi_chain_reorgs_beyond_kept_total"); n != 0 {
		t.Fatalf("partnerapi_chain_reorgs_beyond_kept_total = %v, want none: the watcher kept the blocks it went back to", n)
	}
}

// A chain started again from its genesis (a testnet reset; make run's
// local chain, before it was kept) is shorter than the watcher's place,
// and has none of the blocks it passed: the watcher reads it again from
// its start, as a chain never watched, and sees the deposits made on it.
// It failed every round before ("chain 84532: not found").
func TestAChainStartedAgainIsReadFromItsStart(t *testing.T) {
	t.Parallel()
	f := newStatusFixture(t, pgtest.Open(t, migrationSets...))
	ctx := context.Background()
	old := f.chain.chain
	for range 12 {
		old.Commit()
	}
	w, _ := f.watcherWith(t, 2)
	watchAll(t, w)

	again, err := chaintest.Start(chaintest.Options{ChainID: 84532, Manual: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { again.Close() })
	w2, reg := f.watcherOf(t, again, 2)
	f.clock.add(time.Minute) // the first watcher's lease is past: a replica on the new chain takes over

	p := f.payout(t, "25")
	tx, err := again.Transfer(ctx, chaintest.Partner, usdc, common.HexToAddress(p.Deposit.Address), usdcUnits(t, p.Deposit.Amount))
	if err != nil {
		t.Fatal(err)
	}
	for range 3 {
		again.Commit()
	}
	watchAll(t, w2)
	var n int
	var hash string
	if err := f.db.QueryRow(ctx, `SELECT count(*), coalesce(max(tx_hash), '') FROM payout_deposits WHERE payout_id = $1`, p.PayoutID).Scan(&n, &hash); err != nil {
		t.Fatal(err)
	}
	if n != 1 || !strings.EqualFold(hash, tx.Hash().Hex()) {
		t.Fatalf("the new chain's transfer: recorded %d times (%s), want once (%s)", n, hash, tx.Hash().Hex())
	}
	for _, name := range []string{"partnerapi_chain_reorgs_total", "partnerapi_chain_reorgs_beyond_kept_total"} {
		if r := testutilValue(t, reg, name); r != 1 {
			t.Fatalf("%s = %v, want the chain's new start counted once", name, r)
		}
	}
}

// testutilValue is the sum of a metric's series in reg.
func testutilValue(t *testing.T, reg *prometheus.Registry, name string) float64 {
	t.Helper()
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	sum := 0.0
	for _, mf := range families {
		if mf.GetName() == name {
			for _, m := range mf.GetMetric() {
				sum += m.GetCounter().GetValue() + m.GetGauge().GetValue()
			}
		}
	}
	return sum
}

// watcherWith is a watcher of the fixture's chain waiting for
// confirmations, with its registry.
func (f statusFixture) watcherWith(t *testing.T, confirmations uint64) (*chain.Watcher, *prometheus.Registry) {
	t.Helper()
	return f.watcherOf(t, f.chain.chain, confirmations)
}

// watcherOf is a watcher of c (the fixture's chain, or another in its
// place) on the fixture's store, with its registry.
func (f statusFixture) watcherOf(t *testing.T, c *chaintest.Chain, confirmations uint64) (*chain.Watcher, *prometheus.Registry) {
	t.Helper()
	node, err := chain.NewNode(environment.Sandbox, 84532, c.Client(), confirmations)
	if err != nil {
		t.Fatal(err)
	}
	reg := prometheus.NewPedanticRegistry()
	return chain.NewWatcher(node, f.svc.(*service).payouts.(*store.Store), f.clock.now, nil, chain.NewMetrics(reg),
		worker.NewRows("payout", discard(), reg), discard(), reg), reg
}

// watchAll runs w's rounds until it has read every confirmed block.
func watchAll(t *testing.T, w *chain.Watcher) {
	t.Helper()
	for range 10 {
		if n, err := w.Round(context.Background()); err != nil {
			t.Fatal(err)
		} else if n == 0 {
			return
		}
	}
	t.Fatal("the watcher still had blocks to read after 10 rounds")
}

// A transfer mined before the window closed is in time, however long its
// confirmations take: the payout's expiry waits for them, and the payout
// takes the deposit once they are there (not refunded as late).
func TestATransferMinedInTimeIsNotLateForItsConfirmations(t *testing.T) {
	t.Parallel()
	f := newStatusFixture(t, pgtest.Open(t, migrationSets...))
	ctx := context.Background()
	c := f.chain.chain
	w, _ := f.watcherWith(t, 2)
	c.Commit()
	watchAll(t, w)
	p := f.payout(t, "24")
	if _, err := f.svc.SandboxDeposit(ctx, acme, DepositRequest{PayoutID: p.PayoutID}); err != nil {
		t.Fatal(err)
	}
	c.Commit() // mined, one confirmation of two
	watchAll(t, w)
	f.clock.add(DepositWindow + time.Second) // the window closes before the second
	if _, err := f.worker.ExpiryRound(ctx); err != nil {
		t.Fatal(err)
	}
	if st := f.status(t, p.PayoutID); st.Status != "awaiting_deposit" {
		t.Fatalf("expired with a transfer mined in time on its way: %+v", st)
	}
	c.Commit()
	watchAll(t, w)
	if _, err := f.worker.HandOverRound(ctx); err != nil {
		t.Fatal(err)
	}
	if st := f.status(t, p.PayoutID); st.Status != "processing" || len(st.Refunds) != 0 {
		t.Fatalf("a transfer mined in time, confirmed after the window: %+v", st)
	}
}

// batchingNode is a node whose every Transfer log comes with a twin in the
// same transaction (the next log index, the same transfer): as a batch
// payment (a disperse contract, a smart wallet's multicall) sends two
// transfers in one transaction.
type batchingNode struct{ chain.Client }

func (n batchingNode) FilterLogs(ctx context.Context, q ethereum.FilterQuery) ([]types.Log, error) {
	logs, err := n.Client.FilterLogs(ctx, q)
	var out []types.Log
	for _, l := range logs {
		twin := l
		twin.Index = l.Index + 1
		out = append(out, l, twin)
	}
	return out, err
}

// Two transfers to a deposit address in one transaction are two deposits
// (a deposit is a transfer log: its transaction and its log index): the
// first pays the payout, the second is refunded as unexpected, and neither
// is taken for the other.
func TestTwoTransfersInOneTransactionAreTwoDeposits(t *testing.T) {
	t.Parallel()
	f := newStatusFixture(t, pgtest.Open(t, migrationSets...))
	ctx := context.Background()
	node, err := chain.NewNode(environment.Sandbox, 84532, batchingNode{f.chain.chain.Client()}, 1)
	if err != nil {
		t.Fatal(err)
	}
	reg := prometheus.NewPedanticRegistry()
	w := chain.NewWatcher(node, f.store(), f.clock.now, nil, chain.NewMetrics(reg), worker.NewRows("payout", discard(), reg), discard(), reg)
	f.chain.chain.Commit()
	watchAll(t, w)
	p := f.payout(t, "25", refundTo)
	d, err := f.svc.SandboxDeposit(ctx, acme, DepositRequest{PayoutID: p.PayoutID})
	if err != nil {
		t.Fatal(err)
	}
	f.chain.chain.Commit()
	watchAll(t, w)
	if _, err := f.worker.HandOverRound(ctx); err != nil {
		t.Fatal(err)
	}
	rows, err := f.db.Query(ctx, `SELECT tx_hash, log_index FROM payout_deposits WHERE payout_id = $1 ORDER BY log_index`, p.PayoutID)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for rows.Next() {
		var hash string
		var index int
		if err := rows.Scan(&hash, &index); err != nil {
			t.Fatal(err)
		}
		got = append(got, fmt.Sprintf("%s/%d", hash, index))
	}
	if want := []string{d.TxHash + "/0", d.TxHash + "/1"}; !equal(got, want) {
		t.Fatalf("deposits recorded %v, want %v: one per transfer log", got, want)
	}
	st := f.status(t, p.PayoutID)
	if st.Status != "processing" || st.DepositTxHash != d.TxHash || !equal(refunds(st), strs("deposit_unexpected/pending/1234567.89/USDC/"+refundTo)) {
		t.Fatalf("two transfers in one transaction: %+v %v", st, refunds(st))
	}
	var index int
	if err := f.db.QueryRow(ctx, `SELECT deposit_log_index FROM payout_refunds WHERE payout_id = $1`, p.PayoutID).Scan(&index); err != nil || index != 1 {
		t.Errorf("the refund returns the transfer at log index %d (%v), want 1", index, err)
	}
}

// A transfer of nothing (anyone may send one to any address, from any
// token contract) is no deposit: it owes no refund, is not held, and the
// payout takes the transfer that pays it.
func TestATransferOfNothingIsNoDeposit(t *testing.T) {
	t.Parallel()
	f := newStatusFixture(t, pgtest.Open(t, migrationSets...))
	ctx := context.Background()
	p := f.payout(t, "26", refundTo)
	to := common.HexToAddress(p.Deposit.Address)
	if _, err := f.chain.chain.Transfer(ctx, chaintest.Partner, usdc, to, new(big.Int)); err != nil {
		t.Fatal(err)
	}
	f.work(t)
	paid, err := f.chain.chain.Transfer(ctx, chaintest.Partner, usdc, to, usdcUnits(t, p.Deposit.Amount))
	if err != nil {
		t.Fatal(err)
	}
	f.work(t)
	st := f.status(t, p.PayoutID)
	if st.Status != "processing" || st.DepositTxHash != paid.Hash().Hex() || len(st.Refunds) != 0 {
		t.Fatalf("a transfer of nothing, then the payment: %+v %v", st, refunds(st))
	}
	var deposits, held int
	if err := f.db.QueryRow(ctx, `SELECT (SELECT count(*) FROM payout_deposits), (SELECT count(*) FROM payout_deposits_held)`).Scan(&deposits,
		&held); err != nil || deposits != 1 || held != 0 {
		t.Errorf("%d deposits and %d held (%v), want 1 and 0", deposits, held, err)
	}
	if n := f.failures(t, "chain_84532", "refused"); n != 0 {
		t.Errorf("row failures {chain_84532, refused} = %v, want 0: a transfer of nothing is no deposit to refuse", n)
	}
	if n := f.metric(t, "partnerapi_chain_lag_blocks", "chain", "84532"); n != 0 {
		t.Errorf("partnerapi_chain_lag_blocks = %v, want 0", n)
	}
}

// A deposit the database refuses does not hold the watcher (DESIGN §3,
// "Rows fail alone"): it is held alone, counted and logged once, and the
// watcher moves on, so a deposit in a later block pays its payout at once.
// The held one is tried again after its wait, with no new block needed,
// and once the database takes it, it pays its payout, recorded once.
func TestARefusedDepositDoesNotHoldTheWatcher(t *testing.T) {
	t.Parallel()
	f := newStatusFixture(t, pgtest.Open(t, migrationSets...))
	ctx := context.Background()
	c := f.chain.chain
	a, b := f.payout(t, "27", refundTo), f.payout(t, "28", refundTo)
	lift := refuseWrite(t, f, "payout_deposits", `NEW.payout_id = '`+a.PayoutID+`'`)
	first, err := c.Transfer(ctx, chaintest.Partner, usdc, common.HexToAddress(a.Deposit.Address), usdcUnits(t, a.Deposit.Amount))
	if err != nil {
		t.Fatal(err)
	}
	f.work(t)
	second, err := c.Transfer(ctx, chaintest.Partner, usdc, common.HexToAddress(b.Deposit.Address), usdcUnits(t, b.Deposit.Amount))
	if err != nil {
		t.Fatal(err)
	}
	f.work(t)
	if st := f.status(t, b.PayoutID); st.Status != "processing" || st.DepositTxHash != second.Hash().Hex() {
		t.Fatalf("the deposit in a block after a refused one: %s %s, want processing with its transfer", st.Status, st.DepositTxHash)
	}
	if st := f.status(t, a.PayoutID); st.Status != "awaiting_deposit" {
		t.Fatalf("the refused deposit's payout: %s", st.Status)
	}
	if n := f.metric(t, "partnerapi_chain_deposits_held", "chain", "84532"); n != 1 {
		t.Errorf("partnerapi_chain_deposits_held = %v, want 1", n)
	}
	if n := f.metric(t, "partnerapi_chain_lag_blocks", "chain", "84532"); n != 0 {
		t.Errorf("partnerapi_chain_lag_blocks = %v, want 0: the watcher moved on", n)
	}
	for range 5 {
		if _, err := f.chain.watcher.Round(ctx); err != nil {
			t.Fatal(err)
		}
	}
	if n := f.failures(t, "chain_84532", "refused"); n != 1 {
		t.Errorf("row failures {chain_84532, refused} = %v, want 1: tried again only after its wait", n)
	}
	lift()
	f.advance(t, time.Second)
	if _, err := f.chain.watcher.Round(ctx); err != nil { // no new block
		t.Fatal(err)
	}
	if _, err := f.worker.HandOverRound(ctx); err != nil {
		t.Fatal(err)
	}
	if st := f.status(t, a.PayoutID); st.Status != "processing" || st.DepositTxHash != first.Hash().Hex() || len(st.Refunds) != 0 {
		t.Fatalf("the held deposit once the database takes it: %+v %v", st, refunds(st))
	}
	if n := f.metric(t, "partnerapi_chain_deposits_held", "chain", "84532"); n != 0 {
		t.Errorf("partnerapi_chain_deposits_held = %v, want 0", n)
	}
	var deposits int
	if err := f.db.QueryRow(ctx, `SELECT count(*) FROM payout_deposits`).Scan(&deposits); err != nil || deposits != 2 {
		t.Errorf("%d deposits (%v), want 2: each once", deposits, err)
	}
}
