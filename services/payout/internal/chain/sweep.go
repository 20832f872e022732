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
	funded, err := s.fund(ctx, head, tip, feeCap)
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
func (s *Signer) fund(ctx context.Context, head *types.Header, tip, feeCap *big.Int) (int, error) {
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
		if pass, stop := s.passEarlier(ctx, head, w, &n, &errs); stop {
			return n, errors.Join(errs...)
		} else if pass {
			continue
		}
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
		if held.Cmp(need) >= 0 && !s.refueled[w.ID] {
			if err := s.stored(ctx, sweepID(w), s.store.Funded(ctx, w.ID, limit)); err != nil {
				errs = append(errs, err)
				continue
			}
			n++
			continue
		}
		top := new(big.Int).Sub(new(big.Int).Mul(need, big.NewInt(2)), held)
		if s.refueled[w.ID] || top.Sign() <= 0 {
			// On top of what it holds: its next transfer must offer more
			// than its last.
			top = new(big.Int).Mul(need, big.NewInt(2))
		}
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
		if pass, stop := s.passEarlier(ctx, head, w, &n, &errs); stop {
			return n, errors.Join(errs...)
		} else if pass {
			continue
		}
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
		// What the address can pay per gas, at most today's fee cap. A
		// transfer signed again (the last one not mined) offers all of it,
		// so it replaces the last at its nonce.
		most := new(big.Int).Div(held, new(big.Int).SetUint64(w.Gas))
		fc, tc := bigMin(feeCap, most), tip
		if s.refueled[w.ID] {
			fc = most
			tc = new(big.Int).Sub(fc, head.BaseFee)
		}
		if fc.Cmp(new(big.Int).Add(head.BaseFee, tip)) < 0 {
			// Its gas no longer pays today's fees: topped up again first.
			if err := s.stored(ctx, sweepID(w), s.store.Refuel(ctx, w.ID, "funded")); err != nil {
				errs = append(errs, err)
			}
			s.refueled[w.ID] = true
			continue
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
		delete(s.refueled, w.ID)
		s.unmined[w.ID] = s.now()
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
			since, ok := s.unmined[w.ID]
			if !ok {
				s.unmined[w.ID] = s.now() // (a replica that did not sign it starts counting now)
				since = s.now()
			}
			if s.now().Sub(since) >= s.opts.ReplaceAfter {
				// Not mined in time (its fee below what the chain takes now,
				// or its address short of it): topped up and signed again at
				// its nonce, offering all its gas.
				if err := s.stored(ctx, sweepID(w), s.store.Refuel(ctx, w.ID, "sweeping")); err != nil {
					errs = append(errs, err)
					continue
				}
				s.refueled[w.ID] = true
				delete(s.unmined, w.ID)
				s.log.Warn("a sweep's transfer was not mined in time: its address is topped up and it is signed again at its nonce",
					"chain", s.label, "sweep", w.ID, "tx_hash", w.TxHash)
				n++
				continue
			}
			if _, _, err := s.node.Client.TransactionByHash(ctx, hash); errors.Is(err, ethereum.NotFound) {
				if err := s.send(ctx, w.Raw); err != nil && !spent(err) {
					return n, errors.Join(append(errs, s.rpc(err))...)
				}
			}
			continue
		}
		delete(s.unmined, w.ID)
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

// passEarlier is a step's handling of sweep w's earlier transfers (see
// sweptEarlier): pass, the step goes on to the next sweep (n counts one
// done, errs one failed alone); stop, a node failed, and the step ends
// with errs.
func (s *Signer) passEarlier(ctx context.Context, head *types.Header, w store.Sweep, n *int, errs *[]error) (pass, stop bool) {
	done, err := s.sweptEarlier(ctx, head, w)
	switch {
	case isRPC(err):
		*errs = append(*errs, err)
		return true, true
	case err != nil:
		*errs = append(*errs, err)
		return true, false
	case done:
		*n++
		return true, false
	}
	return false, false
}

// sweptEarlier reports whether one of sweep w's earlier transfers (signed
// before it went back to funding) was mined after all, and if so, with its
// confirmations, marks the sweep swept by it; one mined without them yet
// holds the sweep (done, no error) until they come.
func (s *Signer) sweptEarlier(ctx context.Context, head *types.Header, w store.Sweep) (bool, error) {
	for _, h := range w.Earlier {
		r, err := s.node.Client.TransactionReceipt(ctx, common.HexToHash(h))
		if errors.Is(err, ethereum.NotFound) {
			continue
		}
		if err != nil {
			return false, s.rpc(err)
		}
		if r.Status != types.ReceiptStatusSuccessful {
			continue // reverted: it moved nothing
		}
		if head.Number.Uint64()+1 < r.BlockNumber.Uint64()+s.node.Confirmations {
			return true, nil // mined; its confirmations are coming
		}
		tx, _, err := s.node.Client.TransactionByHash(ctx, common.HexToHash(h))
		if err != nil {
			return false, s.rpc(err)
		}
		raw, err := tx.MarshalBinary()
		if err != nil {
			return false, err
		}
		if err := s.stored(ctx, sweepID(w), s.store.SweptBy(ctx, w.ID, raw, h, s.now())); err != nil {
			return false, err
		}
		delete(s.refueled, w.ID)
		s.metrics.swept.WithLabelValues(s.label).Inc()
		s.log.Info("a sweep's earlier transfer was mined after all: the sweep is done by it", "chain", s.label, "sweep", w.ID, "tx_hash", h)
		return true, nil
	}
	return false, nil
}

func bigMin(a, b *big.Int) *big.Int {
	if a.Cmp(b) <= 0 {
		return a
	}
	return b
}
