package chaintest

import (
	"context"
	"math/big"
	"net"
	"testing"
	"time"

	"github.com/ethereum/go-ethereum"
	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/crypto"
	"github.com/ethereum/go-ethereum/ethclient"
)

// balanceOf reads an ERC-20 balance with eth_call.
func balanceOf(t *testing.T, c ethereum.ContractCaller, token, owner common.Address) *big.Int {
	t.Helper()
	data := append(crypto.Keccak256([]byte("balanceOf(address)"))[:4], common.LeftPadBytes(owner.Bytes(), 32)...)
	out, err := c.CallContract(context.Background(), ethereum.CallMsg{To: &token, Data: data}, nil)
	if err != nil {
		t.Fatal(err)
	}
	return new(big.Int).SetBytes(out)
}

// The local testnet as a wallet tool sees it over JSON-RPC: the
// catalogue's chain id, the tokens at their published addresses with six
// decimals and the funded balances, and a transfer mined at once with its
// Transfer log.
func TestTheTestnetIsAChainAWalletCanUse(t *testing.T) {
	t.Parallel()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	chain, err := Start(Options{ChainID: 84532, Addr: addr})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { chain.Close() })
	ctx := context.Background()
	c, err := ethclient.Dial(chain.URL)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if id, err := c.ChainID(ctx); err != nil || id.Int64() != 84532 {
		t.Fatalf("eth_chainId = %v %v, want 84532", id, err)
	}
	usdc := common.HexToAddress("0x036CbD53842c5426634e7929541eC2318f3dCF7e")
	if chain.Tokens["USDC"] != usdc {
		t.Fatalf("USDC at %s", chain.Tokens["USDC"])
	}
	dec, err := c.CallContract(ctx, ethereum.CallMsg{To: &usdc, Data: crypto.Keccak256([]byte("decimals()"))[:4]}, nil)
	if err != nil || new(big.Int).SetBytes(dec).Int64() != 6 {
		t.Fatalf("decimals() = %x %v, want 6", dec, err)
	}
	if b := balanceOf(t, c, usdc, Partner.Address); b.Cmp(TokenUnits) != 0 {
		t.Fatalf("the partner wallet holds %s USDC units, want %s", b, TokenUnits)
	}
	to := common.HexToAddress("0x00000000000000000000000000000000000000aa")
	tx, err := SendTransfer(ctx, c, big.NewInt(84532), Partner.Key, usdc, to, big.NewInt(1_500_000))
	if err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		r, err := c.TransactionReceipt(ctx, tx.Hash())
		if err == nil {
			if r.Status != 1 || len(r.Logs) != 1 || r.Logs[0].Topics[0] != crypto.Keccak256Hash([]byte("Transfer(address,address,uint256)")) {
				t.Fatalf("receipt: status %d, logs %+v", r.Status, r.Logs)
			}
			if common.BytesToAddress(r.Logs[0].Topics[2].Bytes()) != to {
				t.Fatalf("the Transfer log names %s", r.Logs[0].Topics[2])
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the transfer was not mined within 10s: %v", err)
		}
		time.Sleep(20 * time.Millisecond)
	}
	if b := balanceOf(t, c, usdc, to); b.Int64() != 1_500_000 {
		t.Fatalf("the recipient holds %s, want 1500000", b)
	}
}

// A transaction is mined at once and its confirmations come at the
// chain's period; then an idle chain rests until its idle period (make
// run's chain, left running, keeps a block every 12 s on disk, not one a
// second).
func TestConfirmationsComeAtThePeriodThenAnIdleChainRests(t *testing.T) {
	t.Parallel()
	const period = 30 * time.Millisecond
	chain, err := Start(Options{ChainID: 84532, Period: period, IdlePeriod: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { chain.Close() })
	ctx := context.Background()
	c := chain.Client()
	head := func() uint64 {
		t.Helper()
		n, err := c.BlockNumber(ctx)
		if err != nil {
			t.Fatal(err)
		}
		return n
	}
	tx, err := chain.Transfer(ctx, Partner, chain.Tokens["USDC"], common.HexToAddress("0x00000000000000000000000000000000000000d4"), big.NewInt(1))
	if err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(30 * time.Second)
	var mined uint64
	for {
		if r, err := c.TransactionReceipt(ctx, tx.Hash()); err == nil {
			mined = r.BlockNumber.Uint64()
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the transfer was not mined")
		}
		time.Sleep(5 * time.Millisecond)
	}
	for head() < mined+BusyBlocks {
		if time.Now().After(deadline) {
			t.Fatalf("head %d, want the %d blocks after the transfer's (%d) at the period", head(), BusyBlocks, mined)
		}
		time.Sleep(5 * time.Millisecond)
	}
	rest := head()
	time.Sleep(20 * period) // a chain mining at its period would add about 20 blocks
	if now := head(); now != rest {
		t.Fatalf("an idle chain mined %d blocks in 20 periods, want none before its idle period", now-rest)
	}
}
