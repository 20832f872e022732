package chain

import (
	"context"
	"crypto/ecdsa"
	"errors"
	"fmt"
	"math/big"
	"strings"
	"sync"

	"github.com/ethereum/go-ethereum"
	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/core/types"
	"github.com/ethereum/go-ethereum/crypto"
)

// Faucet is the sandbox's wallet: POST /v1/sandbox/payouts/deposit sends
// a real ERC-20 transfer from it to a payout's deposit address, on the
// local testnet, and the payout moves when the watcher sees it confirmed,
// as a partner's own transfer would (DESIGN §3, "Sandbox").
type Faucet struct {
	key   *ecdsa.PrivateKey
	from  common.Address
	nodes map[int64]*Node
	mu    sync.Mutex // one transfer at a time: each takes the next nonce
}

// NewFaucet is the faucet of the wallet whose private key is hexKey, on
// nodes.
func NewFaucet(hexKey string, nodes map[int64]*Node) (*Faucet, error) {
	k, err := crypto.HexToECDSA(strings.TrimPrefix(hexKey, "0x"))
	if err != nil {
		return nil, errors.New("SANDBOX_FAUCET_KEY is not a private key (64 hex digits)")
	}
	return &Faucet{key: k, from: crypto.PubkeyToAddress(k.PublicKey), nodes: nodes}, nil
}

// ErrTooPrecise is an amount with more decimals than its token has.
var ErrTooPrecise = errors.New("the amount has more decimals than the token")

// Units is amount (a positive decimal, major units) in the smallest unit
// of a token with decimals.
func Units(amount string, decimals int) (*big.Int, error) {
	r, ok := new(big.Rat).SetString(amount)
	if !ok || r.Sign() <= 0 {
		return nil, fmt.Errorf("amount %q is not a positive decimal", amount)
	}
	r.Mul(r, new(big.Rat).SetInt(new(big.Int).Exp(big.NewInt(10), big.NewInt(int64(decimals)), nil)))
	if !r.IsInt() {
		return nil, ErrTooPrecise
	}
	return new(big.Int).Set(r.Num()), nil
}

// Sends keeps the faucet's transfers of requests with an Idempotency-Key,
// each signed transaction before it is broadcast (intent first): a request
// retried after a crash broadcasts the same transaction again, never a
// second one.
type Sends interface {
	FaucetSend(ctx context.Context, id string) (raw []byte, found bool, err error)
	KeepFaucetSend(ctx context.Context, id string, chain int64, raw []byte) error
}

// Send transfers amount (major units) of the token symbol on chain to
// to, and answers the transaction's hash once the node took it. With
// kept and an id (a request with an Idempotency-Key), the transaction
// kept for id is broadcast again instead, if there is one.
func (f *Faucet) Send(ctx context.Context, chain int64, symbol, to, amount, id string, kept Sends) (string, error) {
	n, ok := f.nodes[chain]
	if !ok {
		return "", ErrNoChain
	}
	t, ok := n.Chain.Token(symbol)
	if !ok {
		return "", fmt.Errorf("no token %s on chain %d", symbol, chain)
	}
	units, err := Units(amount, t.Decimals)
	if err != nil {
		return "", err
	}
	token, dest := common.HexToAddress(t.Address), common.HexToAddress(to)
	f.mu.Lock()
	defer f.mu.Unlock()
	if kept == nil || id == "" {
		kept, id = nil, ""
	}
	if kept != nil {
		raw, found, err := kept.FaucetSend(ctx, id)
		if err != nil {
			return "", err
		}
		if found {
			if hash, ok := f.again(ctx, n, raw); ok {
				return hash, nil
			}
			// Its nonce went to another transfer and it was never mined:
			// signed again below, at the next nonce.
		}
	}
	var last error
	// Another replica's faucet may take the same nonce: the loser asks
	// for the next one.
	for range 3 {
		tx, err := f.sign(ctx, n, token, dest, units)
		if err != nil {
			return "", err
		}
		if kept != nil {
			raw, err := tx.MarshalBinary()
			if err != nil {
				return "", err
			}
			if err := kept.KeepFaucetSend(ctx, id, chain, raw); err != nil {
				return "", err
			}
		}
		err = n.Client.SendTransaction(ctx, tx)
		if err == nil {
			return strings.ToLower(tx.Hash().Hex()), nil
		}
		last = err
		if !nonceTaken(err) {
			break
		}
	}
	return "", last
}

// again broadcasts a kept transaction once more, and reports whether the
// chain has it (taken now, waiting already, or mined).
func (f *Faucet) again(ctx context.Context, n *Node, raw []byte) (string, bool) {
	var tx types.Transaction
	if err := tx.UnmarshalBinary(raw); err != nil {
		return "", false
	}
	hash := strings.ToLower(tx.Hash().Hex())
	err := n.Client.SendTransaction(ctx, &tx)
	if err == nil || strings.Contains(strings.ToLower(err.Error()), "already known") {
		return hash, true
	}
	if r, rerr := n.Client.TransactionReceipt(ctx, tx.Hash()); rerr == nil && r != nil {
		return hash, true // mined already
	}
	return "", false
}

func nonceTaken(err error) bool {
	s := strings.ToLower(err.Error())
	return strings.Contains(s, "nonce too low") || strings.Contains(s, "already known") || strings.Contains(s, "replacement transaction underpriced")
}

// sign signs transfer(to, units) on token, at the wallet's next pending
// nonce, with the node's suggested tip and twice its base fee.
func (f *Faucet) sign(ctx context.Context, n *Node, token, to common.Address, units *big.Int) (*types.Transaction, error) {
	c := n.Client
	nonce, err := c.PendingNonceAt(ctx, f.from)
	if err != nil {
		return nil, err
	}
	tip, err := c.SuggestGasTipCap(ctx)
	if err != nil {
		return nil, err
	}
	head, err := c.HeaderByNumber(ctx, nil)
	if err != nil {
		return nil, err
	}
	if head.BaseFee == nil {
		return nil, errors.New("the chain has no base fee (EIP-1559)")
	}
	data := transferData(to, units)
	gas, err := c.EstimateGas(ctx, ethereum.CallMsg{From: f.from, To: &token, Data: data})
	if err != nil {
		return nil, err
	}
	chainID := big.NewInt(n.Chain.ID)
	return types.SignNewTx(f.key, types.LatestSignerForChainID(chainID), &types.DynamicFeeTx{ChainID: chainID, Nonce: nonce,
		GasTipCap: tip, GasFeeCap: new(big.Int).Add(tip, new(big.Int).Mul(head.BaseFee, big.NewInt(2))), Gas: gas + gas/5, To: &token, Data: data})
}

// transferData is the calldata of ERC-20 transfer(to, units).
func transferData(to common.Address, units *big.Int) []byte {
	data := make([]byte, 0, 4+64)
	data = append(data, crypto.Keccak256([]byte("transfer(address,uint256)"))[:4]...)
	data = append(data, common.LeftPadBytes(to.Bytes(), 32)...)
	return append(data, common.LeftPadBytes(units.Bytes(), 32)...)
}
