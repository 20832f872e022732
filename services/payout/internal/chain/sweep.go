package chain

import (
	"context"
	"errors"
	"fmt"
	"math/big"
	"strconv"
	"strings"

	"github.com/ethereum/go-ethereum"
	"github.com/ethereum/go-ethereum/common"
	"github.com/ethereum/go-ethereum/core/types"
	"github.com/ethereum/go-ethereum/rpc"

	"github.com/partnerpay/api/pkg/worker"
	"github.com/partnerpay/api/services/payout/internal/store"
)

// sweep moves final deposits home to the treasury (DESIGN §10), each
// sweep through its states in turn: planned (the final deposits of one
// token at one address, each taken once), funded (the treasury tops the
// address up with gas for its transfer, a send of its own, kept before
// its broadcast like a refund's), signed and kept before its broadcast,
// then confirmed. It returns how many sweeps moved. A sweep the database
// fails to move, or whose transfer the node says would fail, waits alone.
func (s *Signer) sweep(ctx context.Context, head *types.Header) (int, error) {
	chain := s.node.Chain.ID
	n, err := s.store.PlanSweeps(ctx, chain, s.listed, s.opts.Batch, s.now())
	if err != nil {
		return n, err
	}
	tip, err := s.node.Client.SuggestGasTipCap(ctx)
	if err != nil {
		return n, s.rpc(err)
	}
	feeCap := new(big.Int).Add(tip, new(big.Int).Mul(head.BaseFee, big.NewInt(2)))
	funded, err := s.fund(ctx, tip, feeCap)
	n += funded
	if isRPC(err) {
		return n, err
	}
	signed, err2 := s.signSweeps(ctx, head, tip, feeCap)
	n += signed
	if isRPC(err2) {
		return n, errors.Join(err, err2)
	}
	done, err3 := s.followSweeps(ctx, head)
	return n + done, errors.Join(err, err2, err3)
}

// sweepID names a sweep in a log line and the failure count.
func sweepID(w store.Sweep) string { return "sweep " + strconv.FormatInt(w.ID, 10) }

// fund gives each sweep still funding the gas its transfer needs: one
// that holds enough is funded at once; the others get a gas send from the
// treasury (twice the transfer's fee at today's prices, so a rise does not
// strand it), as far as the treasury's gas goes.
func (s *Signer) fund(ctx context.Context, tip, feeCap *big.Int) (int, error) {
	sweeps, err := s.store.Sweeps(ctx, s.node.Chain.ID, "funding", s.opts.Batch)
	if err != nil || len(sweeps) == 0 {
		return 0, err
	}
	treasury, err := s.node.Client.BalanceAt(ctx, s.from, nil)
	if err != nil {
		return 0, s.rpc(err)
	}
	n, errs := 0, []error(nil)
	var needy []store.Sweep
	gas, value := map[int64]uint64{}, map[int64]*big.Int{}
	for _, w := range sweeps {
		address, token := common.HexToAddress(w.Address), common.HexToAddress(w.Token)
		g, err := s.node.Client.EstimateGas(ctx, ethereum.CallMsg{From: address, To: &token, Data: transferData(s.from, w.Units)})
		var answer rpc.Error
		if errors.As(err, &answer) {
			// The node answered that the transfer would fail: this sweep
			// waits, alone.
			errs = append(errs, s.alone(ctx, sweepID(w), worker.ReasonProvider, fmt.Errorf("a sweep's transfer would fail: %w", err)))
			continue
		}
		if err != nil {
			return n, errors.Join(append(errs, s.rpc(err))...)
		}
		limit := g + g/5
		need := new(big.Int).Mul(new(big.Int).SetUint64(limit), feeCap)
		held, err := s.node.Client.BalanceAt(ctx, address, nil)
		if err != nil {
			return n, errors.Join(append(errs, s.rpc(err))...)
		}
		if held.Cmp(need) >= 0 {
			if err := s.stored(ctx, sweepID(w), s.store.Funded(ctx, w.ID, limit)); err != nil {
				errs = append(errs, err)
				continue
			}
			n++
			continue
		}
		top := new(big.Int).Sub(new(big.Int).Mul(need, big.NewInt(2)), held)
		cost := new(big.Int).Add(top, new(big.Int).Mul(big.NewInt(21_000), feeCap))
		if treasury.Cmp(cost) < 0 {
			break // the treasury is short of gas: TreasuryLow says so
		}
		treasury.Sub(treasury, cost)
		needy = append(needy, w)
		gas[w.ID], value[w.ID] = limit, top
	}
	if len(needy) == 0 {
		return n, errors.Join(errs...)
	}
	nonce, err := s.node.Client.NonceAt(ctx, s.from, nil)
	if err != nil {
		return n, errors.Join(append(errs, s.rpc(err))...)
	}
	chainID := big.NewInt(s.node.Chain.ID)
	signed, err := s.store.SignGas(ctx, s.node.Chain.ID, s.sender, nonce, needy, gas, func(w store.Sweep, nonce uint64) (store.Send, store.Version, error) {
		to := common.HexToAddress(w.Address)
		tx, err := types.SignNewTx(s.key, types.LatestSignerForChainID(chainID), &types.DynamicFeeTx{ChainID: chainID, Nonce: nonce,
			GasTipCap: tip, GasFeeCap: feeCap, Gas: 21_000, To: &to, Value: value[w.ID]})
		if err != nil {
			return store.Send{}, store.Version{}, err
		}
		raw, err := tx.MarshalBinary()
		if err != nil {
			return store.Send{}, store.Version{}, err
		}
		return store.Send{Chain: s.node.Chain.ID, Sender: s.sender, Nonce: nonce, Token: store.NativeCoin, Recipient: w.Address, Units: value[w.ID]},
			store.Version{Hash: strings.ToLower(tx.Hash().Hex()), Raw: raw, Gas: 21_000, TipCap: tip, FeeCap: feeCap, SignedAt: s.now()}, nil
	})
	return n + signed, errors.Join(append(errs, err)...)
}

// signSweeps signs each funded sweep's transfer home from its deposit
// address (its key derived from the deposit wallet's private side), keeps
// it, then broadcasts it.
func (s *Signer) signSweeps(ctx context.Context, head *types.Header, tip, feeCap *big.Int) (int, error) {
	sweeps, err := s.store.Sweeps(ctx, s.node.Chain.ID, "funded", s.opts.Batch)
	if err != nil {
		return 0, err
	}
	chainID := big.NewInt(s.node.Chain.ID)
	n, errs := 0, []error(nil)
	for _, w := range sweeps {
		key, err := s.opts.Sweep.Key(w.DepositIndex)
		if err != nil {
			errs = append(errs, s.alone(ctx, sweepID(w), worker.ReasonUnreadable, err))
			continue
		}
		address, token := common.HexToAddress(w.Address), common.HexToAddress(w.Token)
		nonce, err := s.node.Client.NonceAt(ctx, address, nil)
		if err != nil {
			return n, errors.Join(append(errs, s.rpc(err))...)
		}
		held, err := s.node.Client.BalanceAt(ctx, address, nil)
		if err != nil {
			return n, errors.Join(append(errs, s.rpc(err))...)
		}
		// What the address can pay per gas, at most today's fee cap.
		most := new(big.Int).Div(held, new(big.Int).SetUint64(w.Gas))
		fc, tc := bigMin(feeCap, most), tip
		if fc.Cmp(head.BaseFee) <= 0 {
			continue // its gas no longer covers the base fee: the next round, or more gas
		}
		tc = bigMin(tc, fc)
		tx, err := types.SignNewTx(key, types.LatestSignerForChainID(chainID), &types.DynamicFeeTx{ChainID: chainID, Nonce: nonce,
			GasTipCap: tc, GasFeeCap: fc, Gas: w.Gas, To: &token, Data: transferData(s.from, w.Units)})
		if err != nil {
			return n, errors.Join(append(errs, err)...)
		}
		raw, err := tx.MarshalBinary()
		if err != nil {
			return n, errors.Join(append(errs, err)...)
		}
		switch err := s.store.KeepSweep(ctx, w.ID, raw, tx.Hash().Hex()); {
		case errors.Is(err, store.ErrSendMoved):
			continue
		case err != nil:
			errs = append(errs, s.stored(ctx, sweepID(w), err))
			continue
		}
		n++
		if err := s.send(ctx, raw); err != nil && !spent(err) {
			return n, errors.Join(append(errs, s.rpc(err))...) // kept: broadcast again when followed
		}
	}
	return n, errors.Join(errs...)
}

// followSweeps confirms the sweeps whose transfer was mined with the
// chain's confirmations, sends back to funding those that reverted, and
// gives the node again what it forgot.
func (s *Signer) followSweeps(ctx context.Context, head *types.Header) (int, error) {
	sweeps, err := s.store.Sweeps(ctx, s.node.Chain.ID, "sweeping", s.opts.Batch)
	if err != nil {
		return 0, err
	}
	n, errs := 0, []error(nil)
	for _, w := range sweeps {
		hash := common.HexToHash(w.TxHash)
		r, err := s.node.Client.TransactionReceipt(ctx, hash)
		if errors.Is(err, ethereum.NotFound) {
			if _, _, err := s.node.Client.TransactionByHash(ctx, hash); errors.Is(err, ethereum.NotFound) {
				if err := s.send(ctx, w.Raw); err != nil && !spent(err) {
					return n, errors.Join(append(errs, s.rpc(err))...)
				}
			}
			continue
		}
		if err != nil {
			return n, errors.Join(append(errs, s.rpc(err))...)
		}
		if head.Number.Uint64()+1 < r.BlockNumber.Uint64()+s.node.Confirmations {
			continue
		}
		if r.Status != types.ReceiptStatusSuccessful {
			s.log.Error("a sweep's transfer was mined and reverted: it is funded and signed again", "chain", s.label, "sweep", w.ID, "tx_hash", w.TxHash)
			err = s.store.Unsweep(ctx, w.ID)
		} else {
			err = s.store.Swept(ctx, w.ID, s.now())
			if err == nil {
				s.metrics.swept.WithLabelValues(s.label).Inc()
			}
		}
		if err := s.stored(ctx, sweepID(w), err); err != nil {
			errs = append(errs, err)
			continue
		}
		n++
	}
	return n, errors.Join(errs...)
}

func bigMin(a, b *big.Int) *big.Int {
	if a.Cmp(b) <= 0 {
		return a
	}
	return b
}
