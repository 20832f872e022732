package e2e

import (
	"context"
	"encoding/json"
	"math/big"
	"strings"
	"testing"
	"time"

	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/core/types"
	"github.com/ethereum/go-ethereum/crypto"
	"github.com/ethereum/go-ethereum/ethclient"

	"github.com/partnerpay/api/devstack"
	"github.com/partnerpay/api/testkit/chaintest"
)

// The stablecoins move on a real chain (DESIGN §10): make run's local
// testnet. A partner pays a payout from the printed wallet with a plain
// ERC-20 transfer to deposit.address, through no API of ours, and the
// payout completes; the faucet's txHash is a transaction on that chain,
// with its Transfer log to the payout's address.
func TestAPayoutIsPaidFromAWalletOnTheLocalChain(t *testing.T) {
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
