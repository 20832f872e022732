package payout

import (
	"context"
	"crypto/ecdsa"
	"errors"
	"math/big"
	"math/rand/v2"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ethereum/go-ethereum"
	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/core/types"
	"github.com/ethereum/go-ethereum/crypto"
	"github.com/jackc/pgx/v5"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/partnerpay/api/pkg/bankprovider"
	"github.com/partnerpay/api/pkg/environment"
	"github.com/partnerpay/api/services/payout/internal/chain"
	"github.com/partnerpay/api/services/payout/internal/store"
	"github.com/partnerpay/api/testkit/chaintest"
	"github.com/partnerpay/api/testkit/pgtest"
)

// Refunds leave on chain from the treasury, exactly once (DESIGN §10):
// signed and kept before the broadcast, broadcast again (the same bytes)
// after a crash, replaced at their nonce when not mined in time, waiting
// when the treasury cannot pay, and never two transfers for one refund.

const refundTo = "0x5aAeb6053F3E94C9b9A09f33669435E7Ef1BeAed"

// owing is a payout whose short deposit (100 USDC) it owes back to
// refundTo: its refund is pending, and no signer has run.
func (f statusFixture) owing(t *testing.T, amount string) PayoutStatus {
	t.Helper()
	st, err := f.deposit(context.Background(), acme, DepositRequest{PayoutID: f.payout(t, amount, refundTo).PayoutID, Amount: strp("100")})
	if err != nil || len(st.Refunds) != 1 || st.Refunds[0].Status != "pending" {
		t.Fatalf("a short deposit: %+v %v", st, err)
	}
	return st
}

// signerOn is a signer of the fixture's chain through client, from the
// wallet of key, as another replica or a restarted process makes it (a
// transaction not mined in a minute is replaced), with its registry.
func (f statusFixture) signerOn(t *testing.T, client chain.Client, key *ecdsa.PrivateKey, confirmations uint64) (*chain.Signer, *prometheus.Registry) {
	t.Helper()
	node, err := chain.NewNode(environment.Sandbox, 84532, client, confirmations)
	if err != nil {
		t.Fatal(err)
	}
	reg := prometheus.NewPedanticRegistry()
	s, err := chain.NewSigner(node, "0x"+common.Bytes2Hex(crypto.FromECDSA(key)), f.store(), f.clock.now,
		chain.SignerOptions{ReplaceAfter: time.Minute}, chain.NewSignerMetrics(reg), discard(), reg)
	if err != nil {
		t.Fatal(err)
	}
	return s, reg
}

// sweeperOn is the treasury's signer on client (one confirmation), which
// sweeps deposits home with the test deposit keys.
func (f statusFixture) sweeperOn(t *testing.T, client chain.Client) *chain.Signer {
	t.Helper()
	n, err := chain.NewNode(environment.Sandbox, 84532, client, 1)
	if err != nil {
		t.Fatal(err)
	}
	reg := prometheus.NewPedanticRegistry()
	s, err := chain.NewSigner(n, chaintest.Treasury.KeyHex(), f.store(), f.clock.now, chain.SignerOptions{ReplaceAfter: time.Minute, Sweep: sweepKeys},
		chain.NewSignerMetrics(reg), discard(), reg)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// completedWithDeposit is a payout of amount whose deposit arrived and
// which the provider completed: its deposit is final, to be swept home.
func (f statusFixture) completedWithDeposit(t *testing.T, amount string) Payout {
	t.Helper()
	ctx := context.Background()
	p := f.payout(t, amount, refundTo)
	if _, err := f.deposit(ctx, acme, DepositRequest{PayoutID: p.PayoutID}); err != nil {
		t.Fatal(err)
	}
	f.provider.says(p.PayoutID, bankprovider.Payout{Status: "completed", CompletedAt: "2026-11-29T12:00:03Z"})
	if _, err := f.worker.Round(ctx); err != nil {
		t.Fatal(err)
	}
	if st := f.status(t, p.PayoutID); st.Status != "completed" {
		t.Fatalf("the payout: %s", st.Status)
	}
	return p
}

// store is the fixture's store, as another process opens it.
func (f statusFixture) store() *store.Store { return store.NewStore(f.db, environment.Sandbox) }

// round runs one round of s.
func round(t *testing.T, s *chain.Signer) (int, error) {
	t.Helper()
	return s.Round(context.Background())
}

// refundOf is payout id's only refund as it now stands.
func (f statusFixture) refundOf(t *testing.T, id string) RefundAnswer {
	t.Helper()
	st := f.status(t, id)
	if len(st.Refunds) != 1 {
		t.Fatalf("%s owes %d refunds, want 1", id, len(st.Refunds))
	}
	return st.Refunds[0]
}

// transfers are the Transfer logs of token from from to to on c.
func transfers(t *testing.T, c *chaintest.Chain, token, from, to common.Address) []types.Log {
	t.Helper()
	logs, err := c.Client().FilterLogs(context.Background(), ethereum.FilterQuery{Addresses: []common.Address{token},
		Topics: [][]common.Hash{{crypto.Keccak256Hash([]byte("Transfer(address,address,uint256)"))},
			{common.BytesToHash(from.Bytes())}, {common.BytesToHash(to.Bytes())}}})
	if err != nil {
		t.Fatal(err)
	}
	return logs
}

// landedOnce checks that the treasury sent refundTo want USDC units in n
// transfers, and that refundTo holds exactly that.
func landedOnce(t *testing.T, c *chaintest.Chain, n int, want *big.Int) {
	t.Helper()
	if got := transfers(t, c, usdc, chaintest.Treasury.Address, common.HexToAddress(refundTo)); len(got) != n {
		t.Errorf("the treasury sent %d transfers to the refund address, want %d: one per refund", len(got), n)
	}
	if got := balance(t, c, usdc, common.HexToAddress(refundTo)); got.Cmp(want) != 0 {
		t.Errorf("the refund address holds %s USDC units, want %s", got, want)
	}
}

// faultyNode is a node whose broadcasts fail (refuse: nothing reaches it;
// lose: it takes the transaction and the answer is lost), or that quotes
// fees far below the chain's (lowball: a stale or lying node).
type faultyNode struct {
	chain.Client
	mu                    sync.Mutex
	refuse, lose, lowball bool
}

func (n *faultyNode) set(change func(n *faultyNode)) {
	n.mu.Lock()
	defer n.mu.Unlock()
	change(n)
}

func (n *faultyNode) SendTransaction(ctx context.Context, tx *types.Transaction) error {
	n.mu.Lock()
	refuse, lose := n.refuse, n.lose
	n.mu.Unlock()
	if refuse {
		return errors.New("dial tcp: connection refused")
	}
	if err := n.Client.SendTransaction(ctx, tx); err != nil || !lose {
		return err
	}
	return errors.New("read tcp: connection reset by peer")
}

func (n *faultyNode) HeaderByNumber(ctx context.Context, number *big.Int) (*types.Header, error) {
	h, err := n.Client.HeaderByNumber(ctx, number)
	n.mu.Lock()
	defer n.mu.Unlock()
	if err != nil || !n.lowball {
		return h, err
	}
	h = types.CopyHeader(h)
	h.BaseFee = big.NewInt(1)
	return h, nil
}

func (n *faultyNode) SuggestGasTipCap(ctx context.Context) (*big.Int, error) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.lowball {
		return big.NewInt(1), nil
	}
	return n.Client.SuggestGasTipCap(ctx)
}

// A refund goes pending → sent → confirmed, its txHash the transfer the
// chain mined, and the refund address holds it; a round after that sends
// nothing more.
func TestARefundLandsOnChainOnce(t *testing.T) {
	t.Parallel()
	f := newStatusFixture(t, pgtest.Open(t, migrationSets...))
	p := f.owing(t, "60")
	s, reg := f.signerOn(t, f.chain.chain.Client(), chaintest.Treasury.Key, 1)
	if _, err := round(t, s); err != nil {
		t.Fatal(err)
	}
	sent := f.refundOf(t, p.PayoutID)
	if sent.Status != "sent" || len(sent.TxHash) != 66 || sent.SentAt == "" || sent.ConfirmedAt != "" {
		t.Fatalf("broadcast, not yet mined: %+v", sent)
	}
	f.chain.chain.Commit()
	if _, err := round(t, s); err != nil {
		t.Fatal(err)
	}
	done := f.refundOf(t, p.PayoutID)
	if done.Status != "confirmed" || done.TxHash != sent.TxHash || done.ConfirmedAt == "" || done.SentAt != sent.SentAt {
		t.Fatalf("mined with its confirmation: %+v", done)
	}
	for range 3 {
		f.chain.chain.Commit()
		if n, err := round(t, s); err != nil || n != 0 {
			t.Fatalf("a round with nothing to do: %d %v", n, err)
		}
	}
	landedOnce(t, f.chain.chain, 1, usdcUnits(t, "100"))
	if v := testutilValue(t, reg, "partnerapi_treasury_refunds_sent_total"); v != 1 {
		t.Errorf("partnerapi_treasury_refunds_sent_total = %v, want 1", v)
	}
	if v := testutilValue(t, reg, "partnerapi_treasury_sends_unconfirmed"); v != 0 {
		t.Errorf("partnerapi_treasury_sends_unconfirmed = %v, want 0", v)
	}
}

// Killed between keeping the signed transaction and its broadcast, or
// after the broadcast and before the refund was marked sent (the node's
// answer lost): the next process broadcasts the same bytes, and the refund
// lands once.
func TestAKilledSignerBroadcastsTheSameTransactionAgain(t *testing.T) {
	t.Parallel()
	f := newStatusFixture(t, pgtest.Open(t, migrationSets...))
	for _, fault := range []string{"refused", "answer lost"} {
		p := f.owing(t, "61")
		node := &faultyNode{Client: f.chain.chain.Client(), refuse: fault == "refused", lose: fault == "answer lost"}
		s, _ := f.signerOn(t, node, chaintest.Treasury.Key, 1)
		if _, err := round(t, s); err == nil {
			t.Fatalf("%s: the round's broadcast failed, and the round said nothing", fault)
		}
		var kept string
		if err := f.db.QueryRow(context.Background(), `SELECT v.hash FROM payout_chain_sends s JOIN payout_chain_send_versions v
			USING (chain, sender, nonce) WHERE s.refund_id = $1 AND s.state = 'signed'`, f.refundOf(t, p.PayoutID).RefundID).Scan(&kept); err != nil {
			t.Fatalf("%s: the signed transaction is not kept: %v", fault, err)
		}
		if r := f.refundOf(t, p.PayoutID); r.Status != "pending" {
			t.Fatalf("%s: a refund whose broadcast failed: %+v", fault, r)
		}
		// The process dies here; another starts.
		again, _ := f.signerOn(t, f.chain.chain.Client(), chaintest.Treasury.Key, 1)
		if _, err := round(t, again); err != nil {
			t.Fatal(err)
		}
		if r := f.refundOf(t, p.PayoutID); r.Status != "sent" || r.TxHash != kept {
			t.Fatalf("%s: after the restart: %+v, want sent as the kept transaction %s", fault, r, kept)
		}
		f.chain.chain.Commit()
		if _, err := round(t, again); err != nil {
			t.Fatal(err)
		}
		if r := f.refundOf(t, p.PayoutID); r.Status != "confirmed" || r.TxHash != kept {
			t.Fatalf("%s: %+v, want confirmed as %s", fault, r, kept)
		}
	}
	landedOnce(t, f.chain.chain, 2, usdcUnits(t, "200"))
}

// A node that forgot the transaction (restarted with an empty pool) is
// given it again; one that took it into a block that then left the chain
// (a reorganisation before its confirmations) gets it again too.
func TestATransactionTheNodeForgotIsBroadcastAgain(t *testing.T) {
	t.Parallel()
	f := newStatusFixture(t, pgtest.Open(t, migrationSets...))
	c := f.chain.chain
	p := f.owing(t, "62")
	s, _ := f.signerOn(t, c.Client(), chaintest.Treasury.Key, 2)
	if _, err := round(t, s); err != nil {
		t.Fatal(err)
	}
	c.Rollback() // the pool, emptied
	if _, err := round(t, s); err != nil {
		t.Fatal(err)
	}
	before, err := c.Client().HeaderByNumber(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	c.Commit() // mined again: one confirmation of two
	if _, err := round(t, s); err != nil {
		t.Fatal(err)
	}
	if r := f.refundOf(t, p.PayoutID); r.Status != "sent" {
		t.Fatalf("one confirmation of two: %+v", r)
	}
	if err := c.Fork(before.Hash()); err != nil {
		t.Fatal(err)
	}
	c.Rollback() // the block left the chain, and its transaction with it
	c.Commit()
	if _, err := round(t, s); err != nil {
		t.Fatal(err)
	}
	c.Commit()
	c.Commit()
	if _, err := round(t, s); err != nil {
		t.Fatal(err)
	}
	if r := f.refundOf(t, p.PayoutID); r.Status != "confirmed" {
		t.Fatalf("after the node forgot it twice: %+v", r)
	}
	landedOnce(t, c, 1, usdcUnits(t, "100"))
}

// A transaction priced below the chain's fees (a node that quoted them
// low) is not mined; after CHAIN_REPLACE_AFTER it is signed again at the
// same nonce with higher fees, the refund carries the new hash, and only
// the replacement is mined.
func TestATransactionNotMinedInTimeIsReplacedAtItsNonce(t *testing.T) {
	t.Parallel()
	f := newStatusFixture(t, pgtest.Open(t, migrationSets...))
	c := f.chain.chain
	p := f.owing(t, "63")
	node := &faultyNode{Client: c.Client(), lowball: true}
	s, reg := f.signerOn(t, node, chaintest.Treasury.Key, 1)
	if _, err := round(t, s); err != nil {
		t.Fatal(err)
	}
	low := f.refundOf(t, p.PayoutID)
	c.Commit()
	if _, err := round(t, s); err != nil {
		t.Fatal(err)
	}
	if r := f.refundOf(t, p.PayoutID); r.Status != "sent" || r.TxHash != low.TxHash {
		t.Fatalf("priced too low, before its time is up: %+v", r)
	}
	node.set(func(n *faultyNode) { n.lowball = false })
	f.clock.add(time.Minute)
	if _, err := round(t, s); err != nil {
		t.Fatal(err)
	}
	high := f.refundOf(t, p.PayoutID)
	if high.Status != "sent" || high.TxHash == low.TxHash || len(high.TxHash) != 66 {
		t.Fatalf("replaced: %+v, want sent with a new hash", high)
	}
	c.Commit()
	if _, err := round(t, s); err != nil {
		t.Fatal(err)
	}
	if r := f.refundOf(t, p.PayoutID); r.Status != "confirmed" || r.TxHash != high.TxHash {
		t.Fatalf("%+v, want confirmed as the replacement %s", r, high.TxHash)
	}
	if _, err := c.Client().TransactionReceipt(context.Background(), common.HexToHash(low.TxHash)); !errors.Is(err, ethereum.NotFound) {
		t.Errorf("the replaced transaction was mined too: %v", err)
	}
	landedOnce(t, c, 1, usdcUnits(t, "100"))
	if v := testutilValue(t, reg, "partnerapi_treasury_replacements_total"); v != 1 {
		t.Errorf("partnerapi_treasury_replacements_total = %v, want 1", v)
	}
}

// A treasury without the token (or gas) leaves its refunds waiting: no
// nonce is taken, nothing is broadcast, and they are counted; once it is
// funded they are sent, each once.
func TestRefundsWaitForAnUnfundedTreasuryThenGo(t *testing.T) {
	t.Parallel()
	f := newStatusFixture(t, pgtest.Open(t, migrationSets...))
	c := f.chain.chain
	ctx := context.Background()
	key, err := crypto.GenerateKey()
	if err != nil {
		t.Fatal(err)
	}
	empty := crypto.PubkeyToAddress(key.PublicKey)
	a, b := f.owing(t, "64"), f.owing(t, "65")
	s, reg := f.signerOn(t, c.Client(), key, 1)
	for range 2 {
		if _, err := round(t, s); err != nil {
			t.Fatal(err)
		}
	}
	var sends int
	if err := f.db.QueryRow(ctx, `SELECT count(*) FROM payout_chain_sends`).Scan(&sends); err != nil || sends != 0 {
		t.Fatalf("an empty treasury kept %d sends (%v), want none: no nonce is taken for a refund it cannot pay", sends, err)
	}
	if v := testutilValue(t, reg, "partnerapi_treasury_refunds_waiting_funds"); v != 2 {
		t.Errorf("partnerapi_treasury_refunds_waiting_funds = %v, want 2", v)
	}
	for _, p := range []PayoutStatus{a, b} {
		if r := f.refundOf(t, p.PayoutID); r.Status != "pending" {
			t.Fatalf("a refund the treasury cannot pay: %+v", r)
		}
	}
	// Funded: gas, then the token.
	sendGas(t, c, empty)
	c.Commit()
	if _, err := c.Transfer(ctx, chaintest.Partner, usdc, empty, usdcUnits(t, "150")); err != nil {
		t.Fatal(err)
	}
	c.Commit()
	if _, err := round(t, s); err != nil {
		t.Fatal(err)
	}
	c.Commit()
	if _, err := round(t, s); err != nil {
		t.Fatal(err)
	}
	// 150 pays one refund of 100: the other waits.
	confirmed := 0
	for _, p := range []PayoutStatus{a, b} {
		if f.refundOf(t, p.PayoutID).Status == "confirmed" {
			confirmed++
		}
	}
	if confirmed != 1 || testutilValue(t, reg, "partnerapi_treasury_refunds_waiting_funds") != 1 {
		t.Fatalf("150 USDC for two refunds of 100: %d confirmed, %v waiting; want 1 and 1", confirmed,
			testutilValue(t, reg, "partnerapi_treasury_refunds_waiting_funds"))
	}
	if _, err := c.Transfer(ctx, chaintest.Partner, usdc, empty, usdcUnits(t, "50")); err != nil {
		t.Fatal(err)
	}
	c.Commit()
	for range 2 {
		if _, err := round(t, s); err != nil {
			t.Fatal(err)
		}
		c.Commit()
	}
	if _, err := round(t, s); err != nil {
		t.Fatal(err)
	}
	for _, p := range []PayoutStatus{a, b} {
		if r := f.refundOf(t, p.PayoutID); r.Status != "confirmed" {
			t.Fatalf("funded: %+v", r)
		}
	}
	if got := transfers(t, c, usdc, empty, common.HexToAddress(refundTo)); len(got) != 2 {
		t.Errorf("the treasury sent %d transfers, want 2: one per refund", len(got))
	}
	if v := testutilValue(t, reg, "partnerapi_treasury_balance"); v <= 0 {
		t.Errorf("partnerapi_treasury_balance = %v", v)
	}
}

// Another transaction of the treasury wallet takes the nonce a refund's
// kept transaction had (an operator's transfer): the refund's is dropped,
// the refund is signed again at the next nonce and lands once, and the
// nonces after it are not blocked.
func TestANonceSpentElsewhereIsDroppedAndTheRefundSentAgain(t *testing.T) {
	t.Parallel()
	f := newStatusFixture(t, pgtest.Open(t, migrationSets...))
	c := f.chain.chain
	ctx := context.Background()
	p := f.owing(t, "66")
	node := &faultyNode{Client: c.Client(), refuse: true}
	s, _ := f.signerOn(t, node, chaintest.Treasury.Key, 1)
	if _, err := round(t, s); err == nil {
		t.Fatal("a refused broadcast, and the round said nothing")
	}
	// The operator's transfer takes the nonce.
	elsewhere := common.HexToAddress("0x000000000000000000000000000000000000bEEF")
	if _, err := c.Transfer(ctx, chaintest.Treasury, usdc, elsewhere, usdcUnits(t, "1")); err != nil {
		t.Fatal(err)
	}
	c.Commit()
	node.set(func(n *faultyNode) { n.refuse = false })
	q := f.owing(t, "67") // a refund due after it
	for range 4 {
		if _, err := round(t, s); err != nil {
			t.Fatal(err)
		}
		c.Commit()
	}
	if _, err := round(t, s); err != nil {
		t.Fatal(err)
	}
	for _, id := range []string{p.PayoutID, q.PayoutID} {
		if r := f.refundOf(t, id); r.Status != "confirmed" {
			t.Fatalf("%s: %+v, want confirmed", id, r)
		}
	}
	landedOnce(t, c, 2, usdcUnits(t, "200"))
	var dropped int
	if err := f.db.QueryRow(ctx, `SELECT count(*) FROM payout_chain_sends WHERE state = 'dropped'`).Scan(&dropped); err != nil || dropped != 1 {
		t.Errorf("%d sends dropped (%v), want 1", dropped, err)
	}
}

// Two replicas' signers work the same refunds at once: each refund is
// sent once, at a nonce of its own, and the nonces run without a gap.
func TestTwoSignersSendEachRefundOnce(t *testing.T) {
	t.Parallel()
	f := newStatusFixture(t, pgtest.Open(t, migrationSets...))
	c := f.chain.chain
	const n = 12
	var ids []string
	for i := range n {
		ids = append(ids, f.owing(t, "7"+string(rune('0'+i%10))+string(rune('0'+i/10))).PayoutID)
	}
	one, _ := f.signerOn(t, c.Client(), chaintest.Treasury.Key, 1)
	two, _ := f.signerOn(t, c.Client(), chaintest.Treasury.Key, 1)
	confirmed := func() int {
		k := 0
		for _, id := range ids {
			if f.refundOf(t, id).Status == "confirmed" {
				k++
			}
		}
		return k
	}
	for i := 0; i < 20 && confirmed() < n; i++ {
		var wg sync.WaitGroup
		for _, s := range []*chain.Signer{one, two} {
			wg.Go(func() {
				if _, err := s.Round(context.Background()); err != nil && !errors.Is(err, context.Canceled) {
					t.Error(err)
				}
			})
		}
		wg.Wait()
		c.Commit()
	}
	if k := confirmed(); k != n {
		t.Fatalf("%d of %d refunds confirmed", k, n)
	}
	landedOnce(t, c, n, usdcUnits(t, "1200"))
	var sends, lowest, highest int
	if err := f.db.QueryRow(context.Background(), `SELECT count(*), min(nonce), max(nonce) FROM payout_chain_sends`).Scan(&sends, &lowest, &highest); err != nil ||
		sends != n || highest-lowest != n-1 {
		t.Errorf("%d sends at nonces %d..%d (%v), want %d without a gap", sends, lowest, highest, err, n)
	}
}

// Final deposits are swept home (DESIGN §10): the treasury tops each
// deposit address up with gas, and the address sends what its final
// deposits brought to the treasury, once. A deposit not yet final (its
// payout processing) stays where it landed; once final, it goes too. In
// the end every swept address holds no token, the treasury holds its
// start plus what was swept minus the refunds it sent, and of gas, its
// start minus what it sent the addresses and the fees of its own
// transactions.
func TestFinalDepositsAreSweptHomeOnce(t *testing.T) {
	t.Parallel()
	f := newStatusFixture(t, pgtest.Open(t, migrationSets...))
	ctx := context.Background()
	c := f.chain.chain
	start := balance(t, c, usdc, chaintest.Treasury.Address)
	gasStart, err := c.Client().BalanceAt(ctx, chaintest.Treasury.Address, nil)
	if err != nil {
		t.Fatal(err)
	}
	completed := f.payout(t, "81", refundTo)
	short := f.owing(t, "82") // failed: 100 refunded from the treasury
	processing := f.payout(t, "83", refundTo)
	for _, p := range []Payout{completed, processing} {
		if _, err := f.deposit(ctx, acme, DepositRequest{PayoutID: p.PayoutID}); err != nil {
			t.Fatal(err)
		}
	}
	f.provider.says(completed.PayoutID, bankprovider.Payout{Status: "completed", CompletedAt: "2026-11-29T12:00:03Z"})
	f.later(t, time.Second)
	f.work(t)
	if st := f.status(t, processing.PayoutID); st.Status != "processing" {
		t.Fatalf("the payout that stays processing: %s", st.Status)
	}
	owed := usdcUnits(t, "1234567.89")
	if got := balance(t, c, usdc, common.HexToAddress(completed.Deposit.Address)); got.Sign() != 0 {
		t.Errorf("a completed payout's deposit address holds %s USDC units after the sweep, want 0", got)
	}
	if got := balance(t, c, usdc, common.HexToAddress(short.Deposit.Address)); got.Sign() != 0 {
		t.Errorf("a short deposit's address, its refund confirmed, holds %s USDC units, want 0", got)
	}
	if got := balance(t, c, usdc, common.HexToAddress(processing.Deposit.Address)); got.Cmp(owed) != 0 {
		t.Errorf("a processing payout's deposit address holds %s USDC units, want its deposit (%s): not final, not swept", got, owed)
	}
	// treasury = start + swept (the completed deposit, the short one) - refunds (the short one's 100)
	want := new(big.Int).Add(start, owed)
	if got := balance(t, c, usdc, chaintest.Treasury.Address); got.Cmp(want) != 0 {
		t.Errorf("the treasury holds %s USDC units, want %s: its start, plus what was swept, minus the refunds", got, want)
	}
	// Final now: swept too, once.
	f.provider.says(processing.PayoutID, bankprovider.Payout{Status: "completed", CompletedAt: "2026-11-29T12:00:09Z"})
	f.later(t, time.Second)
	f.work(t)
	if got := balance(t, c, usdc, common.HexToAddress(processing.Deposit.Address)); got.Sign() != 0 {
		t.Errorf("once completed, its deposit address holds %s USDC units, want 0", got)
	}
	want.Add(want, owed)
	if got := balance(t, c, usdc, chaintest.Treasury.Address); got.Cmp(want) != 0 {
		t.Errorf("the treasury holds %s USDC units, want %s", got, want)
	}
	var sweeps, swept, deposits int
	if err := f.db.QueryRow(ctx, `SELECT (SELECT count(*) FROM payout_sweeps), (SELECT count(*) FROM payout_sweeps WHERE state = 'swept'),
		(SELECT count(*) FROM payout_deposits WHERE sweep_id IS NOT NULL)`).Scan(&sweeps, &swept, &deposits); err != nil {
		t.Fatal(err)
	}
	if sweeps != 3 || swept != 3 || deposits != 3 {
		t.Errorf("%d sweeps, %d swept, %d deposits swept; want 3, 3 and 3: each deposit once", sweeps, swept, deposits)
	}
	for range 3 {
		f.later(t, time.Second)
	}
	var again int
	if err := f.db.QueryRow(ctx, `SELECT count(*) FROM payout_sweeps`).Scan(&again); err != nil || again != 3 {
		t.Errorf("%d sweeps after more rounds (%v), want 3: nothing swept twice", again, err)
	}
	// Gas: the treasury's start, minus the gas it sent the addresses, minus
	// the fees of every transaction it sent (refunds and gas sends).
	rows, err := f.db.Query(ctx, `SELECT mined_hash, purpose, units::text FROM payout_chain_sends WHERE state = 'confirmed'`)
	if err != nil {
		t.Fatal(err)
	}
	want = new(big.Int).Set(gasStart)
	sends := 0
	for rows.Next() {
		var hash, purpose, units string
		if err := rows.Scan(&hash, &purpose, &units); err != nil {
			t.Fatal(err)
		}
		r, err := c.Client().TransactionReceipt(ctx, common.HexToHash(hash))
		if err != nil {
			t.Fatal(err)
		}
		want.Sub(want, new(big.Int).Mul(r.EffectiveGasPrice, new(big.Int).SetUint64(r.GasUsed)))
		if purpose == "gas" {
			u, _ := new(big.Int).SetString(units, 10)
			want.Sub(want, u)
		}
		sends++
	}
	if got, err := c.Client().BalanceAt(ctx, chaintest.Treasury.Address, nil); err != nil || got.Cmp(want) != 0 || sends != 4 {
		t.Errorf("the treasury holds %s wei of gas after %d transactions (%v), want %s: its start minus the gas it sent and its fees", got, sends, err, want)
	}
}

// One refund the signer cannot sign does not hold the others (DESIGN §3,
// "Rows fail alone"): of four pending refunds, one whose token the signer
// cannot read and one whose send the database refuses are held back
// alone, take no nonce and are counted once, however many rounds pass;
// the two others are sent at consecutive nonces in the same round. A send
// the database fails to confirm does not keep the next from being
// confirmed. Once mended, the held ones go, and the wallet's nonces run
// without a gap: four transfers, four nonces.
func TestOneBadRefundDoesNotHoldTheOthers(t *testing.T) {
	t.Parallel()
	f := newStatusFixture(t, pgtest.Open(t, migrationSets...))
	c := f.chain.chain
	ctx := context.Background()
	a, b, d, e := f.owing(t, "81"), f.owing(t, "82"), f.owing(t, "83"), f.owing(t, "84")
	refundID := func(p PayoutStatus) string { return p.Refunds[0].RefundID }
	// b's token: a value no refund can have (planted past the rules, as
	// a bug or a restore might leave it).
	plant := func(currency string) {
		t.Helper()
		if err := f.db.Tx(ctx, func(tx pgx.Tx) error {
			if _, err := tx.Exec(ctx, `SET LOCAL session_replication_role = replica`); err != nil {
				return err
			}
			_, err := tx.Exec(ctx, `UPDATE payout_refunds SET crypto_currency = $2 WHERE id = $1`, refundID(b), currency)
			return err
		}); err != nil {
			t.Fatal(err)
		}
	}
	plant("XYZ")
	// d's send: refused by the database (a trigger of the test's own), and
	// a's confirmation too.
	lift := refuseWrite(t, f, "payout_chain_sends", `TG_OP = 'INSERT' AND NEW.refund_id = '`+refundID(d)+`'`)
	liftConfirm := refuseWrite(t, f, "payout_chain_sends", `TG_OP = 'UPDATE' AND NEW.state = 'confirmed' AND NEW.refund_id = '`+refundID(a)+`'`)
	start, err := c.Client().NonceAt(ctx, chaintest.Treasury.Address, nil)
	if err != nil {
		t.Fatal(err)
	}
	s, reg := f.signerOn(t, c.Client(), chaintest.Treasury.Key, 1)
	failures := func(reason string) float64 {
		return metricIn(t, reg, "partnerapi_worker_row_failures_total", "queue", "treasury_84532", "reason", reason)
	}
	if _, err := round(t, s); err != nil {
		t.Fatalf("a round with two bad refunds beside two good ones: %v", err)
	}
	for _, p := range []PayoutStatus{a, e} {
		if r := f.refundOf(t, p.PayoutID); r.Status != "sent" {
			t.Errorf("%s beside the bad refunds: %s, want sent", p.PayoutID, r.Status)
		}
	}
	for _, p := range []PayoutStatus{b, d} {
		if r := f.refundOf(t, p.PayoutID); r.Status != "pending" {
			t.Errorf("%s, held back: %s, want pending", p.PayoutID, r.Status)
		}
	}
	if got, err := c.Client().PendingNonceAt(ctx, chaintest.Treasury.Address); err != nil || got != start+2 {
		t.Errorf("the treasury's pending nonce is %d (%v), want %d: the held refunds take none", got, err, start+2)
	}
	c.Commit()
	for range 3 {
		if _, err := round(t, s); err == nil {
			t.Error("a round that could not confirm a mined send said nothing")
		}
	}
	if r := f.refundOf(t, e.PayoutID); r.Status != "confirmed" {
		t.Errorf("the send after one the database did not confirm: %s, want confirmed", r.Status)
	}
	if r := f.refundOf(t, a.PayoutID); r.Status != "sent" {
		t.Errorf("the send the database did not confirm: %s", r.Status)
	}
	if n := failures("unreadable"); n != 1 {
		t.Errorf("row failures {treasury_84532, unreadable} = %v, want 1: held back, not read every round", n)
	}
	if n := failures("refused"); n != 1+3 {
		t.Errorf("row failures {treasury_84532, refused} = %v, want 4: the send once (held back), the confirmation each round", n)
	}
	// Mended: the held refunds go once their hold is over.
	lift()
	liftConfirm()
	plant("USDC")
	f.advance(t, 10*time.Minute)
	for range 3 {
		if _, err := round(t, s); err != nil {
			t.Fatal(err)
		}
		c.Commit()
	}
	if _, err := round(t, s); err != nil {
		t.Fatal(err)
	}
	for _, p := range []PayoutStatus{a, b, d, e} {
		if r := f.refundOf(t, p.PayoutID); r.Status != "confirmed" {
			t.Errorf("%s once mended: %s, want confirmed", p.PayoutID, r.Status)
		}
	}
	landedOnce(t, c, 4, usdcUnits(t, "400"))
	if got, err := c.Client().NonceAt(ctx, chaintest.Treasury.Address, nil); err != nil || got != start+4 {
		t.Errorf("the treasury's nonce is %d (%v), want %d: four transfers, no gap", got, err, start+4)
	}
}

// refuseWrite has the database refuse a write of table where cond holds
// (a trigger of the test's own, on NEW).
func refuseWrite(t *testing.T, f statusFixture, table, cond string) (lift func()) {
	t.Helper()
	ctx := context.Background()
	fn := "refuse_" + table + "_" + strconv.FormatUint(rand.Uint64(), 36)
	if _, err := f.db.Exec(ctx, `CREATE FUNCTION `+fn+`() RETURNS trigger LANGUAGE plpgsql AS $$
		BEGIN IF `+cond+` THEN RAISE EXCEPTION 'refused by the test'; END IF; RETURN NEW; END $$`); err != nil {
		t.Fatal(err)
	}
	if _, err := f.db.Exec(ctx, `CREATE TRIGGER `+fn+` BEFORE INSERT OR UPDATE ON `+table+` FOR EACH ROW EXECUTE FUNCTION `+fn+`()`); err != nil {
		t.Fatal(err)
	}
	return func() {
		if _, err := f.db.Exec(ctx, `DROP TRIGGER `+fn+` ON `+table); err != nil {
			t.Fatal(err)
		}
	}
}

// A token the catalogue does not list, sent to a deposit address (anyone
// can make one, and spam every address with it), costs the treasury
// nothing (DESIGN §10): its refund is owed and shown, but not sent, nor
// counted as the treasury being short (nothing pages), and it holds
// neither the refunds nor the sweeps of the payout's real deposit; it is
// never swept. The payout takes the USDC that pays it.
func TestAnUnlistedTokenCostsTheTreasuryNothing(t *testing.T) {
	t.Parallel()
	f := newStatusFixture(t, pgtest.Open(t, migrationSets...))
	ctx := context.Background()
	c := f.chain.chain
	p := f.payout(t, "29", refundTo)
	address := common.HexToAddress(p.Deposit.Address)
	gasStart, err := c.Client().BalanceAt(ctx, chaintest.Treasury.Address, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Transfer(ctx, chaintest.Partner, chaintest.Unlisted, address, big.NewInt(5_000_000)); err != nil {
		t.Fatal(err)
	}
	f.work(t)
	if _, err := f.deposit(ctx, acme, DepositRequest{PayoutID: p.PayoutID}); err != nil {
		t.Fatal(err)
	}
	f.provider.says(p.PayoutID, bankprovider.Payout{Status: "completed", CompletedAt: "2026-11-29T12:00:03Z"})
	f.later(t, time.Second)
	f.work(t)
	st := f.status(t, p.PayoutID)
	if want := strs("deposit_wrong_token/pending/5000000/" + chaintest.Unlisted.Hex() + "/" + refundTo); st.Status != "completed" ||
		!equal(refunds(st), want) {
		t.Fatalf("a payout paid in USDC after an unlisted token: %s %v, want completed %v", st.Status, refunds(st), want)
	}
	if got := balance(t, c, usdc, address); got.Sign() != 0 {
		t.Errorf("the completed payout's address holds %s USDC units: its deposit is swept, whatever the unlisted token owes", got)
	}
	if got := balance(t, c, chaintest.Unlisted, address); got.Cmp(big.NewInt(5_000_000)) != 0 {
		t.Errorf("the address holds %s of the unlisted token, want 5000000: never swept", got)
	}
	for name, want := range map[string]float64{"partnerapi_treasury_refunds_unlisted_token": 1, "partnerapi_treasury_refunds_waiting_funds": 0} {
		if got := f.metric(t, name, "chain", "84532"); got != want {
			t.Errorf("%s = %v, want %v", name, got, want)
		}
	}
	// The treasury's gas paid the USDC sweep's top-up and its own fees, and
	// nothing for the unlisted token: one send, the gas of the sweep.
	var sends int
	if err := f.db.QueryRow(ctx, `SELECT count(*) FROM payout_chain_sends`).Scan(&sends); err != nil || sends != 1 {
		t.Errorf("%d sends of the treasury (%v), want 1: the sweep's gas", sends, err)
	}
	if got, err := c.Client().BalanceAt(ctx, chaintest.Treasury.Address, nil); err != nil || got.Cmp(gasStart) >= 0 {
		t.Errorf("the treasury's gas: %s from %s (%v)", got, gasStart, err)
	}
}

// lyingNode says every balanceOf is vast: the signer signs transfers the
// chain then reverts (as a token reverts a transfer to a recipient it
// refuses).
type lyingNode struct {
	chain.Client
	mu    sync.Mutex
	lying bool
}

func (n *lyingNode) CallContract(ctx context.Context, msg ethereum.CallMsg, block *big.Int) ([]byte, error) {
	n.mu.Lock()
	lying := n.lying
	n.mu.Unlock()
	if lying {
		return common.LeftPadBytes(new(big.Int).Lsh(big.NewInt(1), 200).Bytes(), 32), nil
	}
	return n.Client.CallContract(ctx, msg, block)
}

// A refund whose transfer the chain mined and reverted is signed again,
// but not at once: it is held back alone for a wait that doubles, so a
// transfer the token will always refuse does not spend the treasury's gas
// every round; counted, and sent once the transfer can go.
func TestARevertedRefundIsHeldBackAlone(t *testing.T) {
	t.Parallel()
	f := newStatusFixture(t, pgtest.Open(t, migrationSets...))
	c := f.chain.chain
	ctx := context.Background()
	key, err := crypto.GenerateKey()
	if err != nil {
		t.Fatal(err)
	}
	wallet := crypto.PubkeyToAddress(key.PublicKey)
	sendGas(t, c, wallet) // gas, and no USDC
	c.Commit()
	p := f.owing(t, "68")
	node := &lyingNode{Client: c.Client(), lying: true}
	s, reg := f.signerOn(t, node, key, 1)
	for range 6 {
		if _, err := round(t, s); err != nil {
			t.Fatal(err)
		}
		c.Commit()
	}
	var sends, dropped int
	if err := f.db.QueryRow(ctx, `SELECT count(*), count(*) FILTER (WHERE state = 'dropped') FROM payout_chain_sends`).Scan(&sends,
		&dropped); err != nil || sends != 1 || dropped != 1 {
		t.Fatalf("%d sends, %d dropped (%v); want 1 and 1: the reverted transfer, not signed again every round", sends, dropped, err)
	}
	if n := metricIn(t, reg, "partnerapi_worker_row_failures_total", "queue", "treasury_84532", "reason", "provider"); n != 1 {
		t.Errorf("row failures {treasury_84532, provider} = %v, want 1", n)
	}
	// The wallet funded, and the node honest: sent again once its wait is
	// over, and confirmed.
	node.mu.Lock()
	node.lying = false
	node.mu.Unlock()
	f.advance(t, time.Minute)
	if _, err := c.Transfer(ctx, chaintest.Partner, usdc, wallet, usdcUnits(t, "100")); err != nil {
		t.Fatal(err)
	}
	c.Commit()
	for range 3 {
		if _, err := round(t, s); err != nil {
			t.Fatal(err)
		}
		c.Commit()
	}
	if r := f.refundOf(t, p.PayoutID); r.Status != "confirmed" {
		t.Fatalf("once the transfer can go: %+v", r)
	}
	if got := transfers(t, c, usdc, wallet, common.HexToAddress(refundTo)); len(got) != 1 {
		t.Errorf("%d transfers, want 1", len(got))
	}
}

// doomingNode takes the first transaction from one address and never
// mines it, nor any rebroadcast of it (a fee the chain will not take, a
// pool that evicted it): only another transaction at its nonce goes.
type doomingNode struct {
	chain.Client
	from   common.Address
	mu     sync.Mutex
	doomed common.Hash
}

func (n *doomingNode) SendTransaction(ctx context.Context, tx *types.Transaction) error {
	from, err := types.Sender(types.LatestSignerForChainID(tx.ChainId()), tx)
	if err != nil || from != n.from {
		return n.Client.SendTransaction(ctx, tx)
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.doomed == (common.Hash{}) {
		n.doomed = tx.Hash()
	}
	if tx.Hash() == n.doomed {
		return nil
	}
	return n.Client.SendTransaction(ctx, tx)
}

// sweepRound runs one round of s. A round whose broadcast the node refused
// for funds its pool has not seen yet is run again: the simulated node
// resets its pool to a new block in the background, so for a moment after
// Commit a top-up just mined is not in the balance the pool checks (seen
// once under load: "insufficient funds for gas * price + value"). The
// signer keeps what it signed and broadcasts it again next round, as it
// would for a real node's lag; the test only needs that round done.
func sweepRound(t *testing.T, s *chain.Signer) {
	t.Helper()
	for tries := 1; ; tries++ {
		_, err := s.Round(context.Background())
		if err == nil {
			return
		}
		if !strings.Contains(err.Error(), "insufficient funds") || tries == 100 {
			t.Fatal(err)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// A sweep whose transfer is never mined does not wait for good: after
// CHAIN_REPLACE_AFTER its address is topped up again and the transfer
// signed again at its nonce; or, when the earlier transfer is mined after
// all, that one completes the sweep. Either way the sweep completes once,
// and the tokens come home once.
func TestASweepNotMinedIsToppedUpAndSignedAgain(t *testing.T) {
	t.Parallel()
	for _, earlierMined := range []bool{false, true} {
		f := newStatusFixture(t, pgtest.Open(t, migrationSets...))
		ctx := context.Background()
		c := f.chain.chain
		p := f.completedWithDeposit(t, "85")
		address := common.HexToAddress(p.Deposit.Address)
		start := balance(t, c, usdc, chaintest.Treasury.Address)
		node := &doomingNode{Client: c.Client(), from: address}
		s := f.sweeperOn(t, node)
		rounds := func(k int) {
			t.Helper()
			for range k {
				sweepRound(t, s)
				c.Commit()
			}
		}
		rounds(6) // gas sent and mined, the transfer signed and doomed
		var state string
		var doomed []byte
		if err := f.db.QueryRow(ctx, `SELECT state, raw FROM payout_sweeps`).Scan(&state, &doomed); err != nil || state != "sweeping" {
			t.Fatalf("the sweep, its transfer doomed: %s (%v)", state, err)
		}
		f.advance(t, 2*time.Minute)
		sweepRound(t, s) // sent back to funding, and topped up again
		if earlierMined {
			var tx types.Transaction
			if err := tx.UnmarshalBinary(doomed); err != nil {
				t.Fatal(err)
			}
			if err := c.Client().SendTransaction(ctx, &tx); err != nil {
				t.Fatal(err)
			}
		}
		c.Commit()
		rounds(8)
		wantGas := 2 // topped up again for the transfer signed again
		if earlierMined {
			wantGas = 1 // done by the earlier transfer before the second top-up was signed
		}
		var gasSends, swept int
		var by string
		if err := f.db.QueryRow(ctx, `SELECT (SELECT count(*) FROM payout_chain_sends WHERE purpose = 'gas' AND state = 'confirmed'),
			(SELECT count(*) FROM payout_sweeps WHERE state = 'swept'), (SELECT tx_hash FROM payout_sweeps)`).Scan(&gasSends, &swept,
			&by); err != nil || gasSends != wantGas || swept != 1 {
			t.Errorf("earlier mined %v: %d gas sends confirmed, %d sweeps swept (%v); want %d and 1: swept once", earlierMined, gasSends, swept,
				err, wantGas)
		}
		if earlierMined && by != strings.ToLower(node.doomed.Hex()) {
			t.Errorf("the sweep is done by %s, want the earlier transfer %s", by, node.doomed.Hex())
		}
		if got := balance(t, c, usdc, address); got.Sign() != 0 {
			t.Errorf("earlier mined %v: the deposit address holds %s USDC units, want 0", earlierMined, got)
		}
		if got, want := balance(t, c, usdc, chaintest.Treasury.Address), new(big.Int).Add(start, usdcUnits(t, "1234567.89")); got.Cmp(want) != 0 {
			t.Errorf("earlier mined %v: the treasury holds %s USDC units, want %s: its deposit home, once", earlierMined, got, want)
		}
	}
}

// A sweep's gas send priced below the chain's fees is replaced at its
// nonce after CHAIN_REPLACE_AFTER, and the replacement moves the coin the
// first would have: the address gets its gas, and the sweep completes
// with that one send. (A replacement that dropped the value was mined
// delivering nothing; its sweep, found without gas, was funded again, and
// again, for good: issue 60's simulation, seed 7.)
func TestAGasSendReplacedAtItsNonceStillCarriesItsGas(t *testing.T) {
	t.Parallel()
	f := newStatusFixture(t, pgtest.Open(t, migrationSets...))
	ctx := context.Background()
	c := f.chain.chain
	f.completedWithDeposit(t, "87")
	start := balance(t, c, usdc, chaintest.Treasury.Address)
	node := &faultyNode{Client: c.Client(), lowball: true}
	s := f.sweeperOn(t, node)
	for range 2 { // the sweep planned, its gas send signed too cheap; broadcast, and not mined
		if _, err := round(t, s); err != nil {
			t.Fatal(err)
		}
		c.Commit()
	}
	var sends int
	var units string
	if err := f.db.QueryRow(ctx, `SELECT count(*), coalesce(max(units::text), '') FROM payout_chain_sends WHERE purpose = 'gas' AND state = 'broadcast'`).
		Scan(&sends, &units); err != nil || sends != 1 {
		t.Fatalf("%d gas sends waiting (%v), want the one priced too low", sends, err)
	}
	node.set(func(n *faultyNode) { n.lowball = false })
	f.clock.add(time.Minute)
	for range 6 { // replaced; mined; the transfer signed and mined; swept
		if _, err := round(t, s); err != nil {
			t.Fatal(err)
		}
		c.Commit()
	}
	var replaced, swept int
	if err := f.db.QueryRow(ctx, `SELECT (SELECT count(*) FROM payout_chain_send_versions v JOIN payout_chain_sends s USING (chain, sender, nonce)
			WHERE s.purpose = 'gas' AND s.nonce = (SELECT min(nonce) FROM payout_chain_sends WHERE purpose = 'gas')),
		(SELECT count(*) FROM payout_sweeps WHERE state = 'swept')`).Scan(&replaced, &swept); err != nil || replaced != 2 || swept != 1 {
		t.Fatalf("the first gas send in %d versions, %d sweeps swept (%v); want it replaced once, and the sweep swept", replaced, swept, err)
	}
	// Every gas send mined moved its coin: the replaced one too. (The
	// lowballing node quoted its fees for the first, so a second may top
	// the address up to today's.)
	rows, err := f.db.Query(ctx, `SELECT mined_hash, units::text, recipient FROM payout_chain_sends WHERE purpose = 'gas' AND state = 'confirmed' ORDER BY nonce`)
	if err != nil {
		t.Fatal(err)
	}
	mined, err := pgx.CollectRows(rows, pgx.RowToStructByPos[struct{ Hash, Units, To string }])
	if err != nil || len(mined) == 0 {
		t.Fatalf("gas sends mined: %v (%v)", mined, err)
	}
	for _, m := range mined {
		tx, _, err := c.Client().TransactionByHash(ctx, common.HexToHash(m.Hash))
		if err != nil {
			t.Fatal(err)
		}
		if tx.Value().String() != m.Units || *tx.To() != common.HexToAddress(m.To) {
			t.Errorf("gas send %s mined sending %s wei to %s, want its %s wei to %s", m.Hash, tx.Value(), tx.To(), m.Units, m.To)
		}
	}
	if got, want := balance(t, c, usdc, chaintest.Treasury.Address), new(big.Int).Add(start, usdcUnits(t, "1234567.89")); got.Cmp(want) != 0 {
		t.Errorf("the treasury holds %s USDC units, want %s: its deposit home, once", got, want)
	}
}
