package e2e

import (
	"context"
	"crypto/ecdsa"
	"encoding/json"
	"fmt"
	"math/big"
	"strings"
	"testing"
	"time"

	"github.com/ethereum/go-ethereum"
	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/core/types"
	"github.com/ethereum/go-ethereum/crypto"
	"github.com/ethereum/go-ethereum/ethclient"
	"github.com/jackc/pgx/v5"

	"github.com/partnerpay/api/devstack"
	"github.com/partnerpay/api/testkit/chaintest"
)

// The stablecoins move on a real chain (DESIGN §10): make run's local
// testnet. A partner pays a payout from the printed wallet with a plain
// ERC-20 transfer to deposit.address, through no API of ours, and the
// payout completes; the faucet's txHash is a transaction on that chain,
// with its Transfer log to the payout's address.
func TestAPayoutIsPaidFromAWalletOnTheLocalChain(t *testing.T) {
	// Not parallel: a stack of its own, killed or failed over and timed
	// against bounds (package e2e: one stack at a time).
	s := startStack(t)
	key := s.issue("acme", "--products", "bank", "--source-chains", "84532", "--rate", "1000", "--max-execution-usd", "1000000")
	ctx := context.Background()
	node, err := ethclient.Dial(s.ChainURLs[84532])
	if err != nil {
		t.Fatal(err)
	}
	defer node.Close()
	deposit := func(id string) (address common.Address, amount string) {
		t.Helper()
		var p struct {
			Deposit struct{ Address, Amount, Token string }
		}
		if r := s.post("/v1/bank/payout/status", key, `{"payoutId":"`+id+`"}`); r.Status != 200 || json.Unmarshal([]byte(r.Body), &p) != nil {
			t.Fatalf("status: %d %s", r.Status, r.Body)
		}
		if !common.IsHexAddress(p.Deposit.Address) || !strings.EqualFold(p.Deposit.Token, baseUSDC) {
			t.Fatalf("deposit: %+v", p.Deposit)
		}
		return common.HexToAddress(p.Deposit.Address), p.Deposit.Amount
	}
	units := func(amount string) *big.Int {
		r, _ := new(big.Rat).SetString(amount)
		r.Mul(r, big.NewRat(1_000_000, 1))
		return r.Num()
	}

	// From the printed wallet, as any wallet tool sends it.
	id := s.newPayout(key, "77", "")
	to, amount := deposit(id)
	tx, err := chaintest.SendTransfer(ctx, node, big.NewInt(84532), devstack.TestWallet.Key, common.HexToAddress(baseUSDC), to, units(amount))
	if err != nil {
		t.Fatal(err)
	}
	var st payoutStatus
	if !eventually(30*time.Second, func() bool {
		st = s.payoutStatus(key, id)
		return st.Status == "completed"
	}) || st.DepositTxHash != tx.Hash().Hex() || len(st.Refunds) != 0 {
		t.Fatalf("the wallet's transfer %s: %+v, want the payout completed with it as its deposit", tx.Hash().Hex(), st)
	}

	// The faucet's transfer is on the chain.
	id = s.newPayout(key, "78", "")
	to, _ = deposit(id)
	dep := decodeStatus(t, s.post("/v1/sandbox/payouts/deposit", key, `{"payoutId":"`+id+`"}`))
	var receipt *types.Receipt
	if !eventually(10*time.Second, func() bool {
		receipt, err = node.TransactionReceipt(ctx, common.HexToHash(dep.TxHash))
		return err == nil
	}) {
		t.Fatalf("eth_getTransactionReceipt(%s): %v", dep.TxHash, err)
	}
	transfer := crypto.Keccak256Hash([]byte("Transfer(address,address,uint256)"))
	if receipt.Status != types.ReceiptStatusSuccessful || len(receipt.Logs) != 1 || receipt.Logs[0].Address != common.HexToAddress(baseUSDC) ||
		receipt.Logs[0].Topics[0] != transfer || common.BytesToAddress(receipt.Logs[0].Topics[2].Bytes()) != to {
		t.Fatalf("the faucet's transaction: %+v", receipt)
	}
	if !eventually(30*time.Second, func() bool { return s.payoutStatus(key, id).Status == "completed" }) {
		t.Fatalf("the faucet's deposit: %+v", s.payoutStatus(key, id))
	}
}

// The watcher is killed (SIGKILL, with its whole payout service) again
// and again while 500 transfers land, in batches, in about 100 blocks:
// every transfer is recorded exactly once, and each payout took its own
// deposit (none recorded twice, so none refunded as unexpected).
func TestAKilledWatcherCountsEveryTransferOnce(t *testing.T) {
	// Not parallel: a stack of its own, killed or failed over and timed
	// against bounds (package e2e: one stack at a time).
	s := startStack(t)
	key := s.issue("acme", "--products", "bank", "--source-chains", "84532", "--rate", "100000", "--max-execution-usd", "1000000000")
	ctx := context.Background()
	node, err := ethclient.Dial(s.ChainURLs[84532])
	if err != nil {
		t.Fatal(err)
	}
	defer node.Close()
	const n, batch = 500, 5
	ids := make([]string, n)
	to := make([]common.Address, n)
	for i := range n {
		ids[i] = s.newPayout(key, fmt.Sprintf("%d.%02d", 100+i/100, i%100), "")
		var p struct{ Deposit struct{ Address string } }
		if r := s.post("/v1/bank/payout/status", key, `{"payoutId":"`+ids[i]+`"}`); r.Status != 200 || json.Unmarshal([]byte(r.Body), &p) != nil {
			t.Fatalf("status: %d %s", r.Status, r.Body)
		}
		to[i] = common.HexToAddress(p.Deposit.Address)
	}
	units := new(big.Int).Mul(big.NewInt(123456789), big.NewInt(10_000)) // 1234567.89 USDC
	// The wallet's nonces are counted here, from its first: a node's
	// pending nonce can lag the transactions just sent to it, and a second
	// transaction at a taken nonce is refused as an underpriced
	// replacement.
	nonce, err := node.PendingNonceAt(ctx, devstack.TestWallet.Address)
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		for i := 0; i < n; i += batch {
			dests := to[i:min(i+batch, n)]
			if _, err := sendBatch(ctx, node, devstack.TestWallet.Key, nonce, common.HexToAddress(baseUSDC), dests, units); err != nil {
				t.Errorf("transfers %d: %v", i, err)
				return
			}
			nonce += uint64(len(dests))
			time.Sleep(100 * time.Millisecond) // about a block each, over ten seconds of kills
		}
	}()
	kills := 0
	for {
		select {
		case <-done:
		default:
			time.Sleep(1500 * time.Millisecond)
			s.killAndRestart("payout")
			kills++
			continue
		}
		break
	}
	s.killAndRestart("payout")
	kills++
	c, err := pgx.Connect(ctx, s.DatabaseURL)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close(ctx)
	var recorded, payouts, refunds int
	if !eventually(60*time.Second, func() bool {
		err := c.QueryRow(ctx, `SELECT (SELECT count(*) FROM payout_deposits), (SELECT count(DISTINCT payout_id) FROM payout_deposits),
			(SELECT count(*) FROM payout_refunds)`).Scan(&recorded, &payouts, &refunds)
		return err == nil && recorded >= n
	}) {
		t.Fatalf("%d transfers of %d recorded within 60 s of the last kill", recorded, n)
	}
	t.Logf("%d transfers recorded through %d kills of the watcher's service", recorded, kills)
	if recorded != n || payouts != n || refunds != 0 {
		t.Fatalf("%d deposits recorded for %d payouts, %d refunds; want %d each once, no refund", recorded, payouts, refunds, n)
	}
}

// sendBatch sends value of token from key to each of to at consecutive
// nonces from nonce.
func sendBatch(ctx context.Context, node *ethclient.Client, key *ecdsa.PrivateKey, nonce uint64, token common.Address, to []common.Address, value *big.Int) ([]common.Hash, error) {
	head, err := node.HeaderByNumber(ctx, nil)
	if err != nil {
		return nil, err
	}
	tip := big.NewInt(1_000_000_000)
	chainID := big.NewInt(84532)
	var out []common.Hash
	for i, dest := range to {
		tx, err := types.SignNewTx(key, types.LatestSignerForChainID(chainID), &types.DynamicFeeTx{ChainID: chainID, Nonce: nonce + uint64(i),
			GasTipCap: tip, GasFeeCap: new(big.Int).Add(tip, new(big.Int).Mul(head.BaseFee, big.NewInt(4))), Gas: 300_000, To: &token,
			Data: chaintest.TransferData(dest, value)})
		if err != nil {
			return nil, err
		}
		if err := node.SendTransaction(ctx, tx); err != nil {
			return nil, err
		}
		out = append(out, tx.Hash())
	}
	return out, nil
}

// tokenBalance is owner's balance of token (balanceOf) on node, in units.
func tokenBalance(t *testing.T, node *ethclient.Client, token, owner string) *big.Int {
	t.Helper()
	to := common.HexToAddress(token)
	data := append(crypto.Keccak256([]byte("balanceOf(address)"))[:4:4], common.LeftPadBytes(common.HexToAddress(owner).Bytes(), 32)...)
	out, err := node.CallContract(context.Background(), ethereum.CallMsg{To: &to, Data: data}, nil)
	if err != nil || len(out) != 32 {
		t.Fatalf("balanceOf(%s) on %s: %x %v", owner, token, out, err)
	}
	return new(big.Int).SetBytes(out)
}

// unitsOf is the sum of amounts ("1.5+2"), in major units of a token with 6
// decimals, in units.
func unitsOf(amounts string) *big.Int {
	sum := new(big.Rat)
	for _, a := range strings.Split(amounts, "+") {
		r, ok := new(big.Rat).SetString(a)
		if !ok {
			panic("unitsOf: " + a)
		}
		sum.Add(sum, r)
	}
	return sum.Mul(sum, big.NewRat(1_000_000, 1)).Num()
}
