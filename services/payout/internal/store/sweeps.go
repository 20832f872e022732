package store

import (
	"context"
	"fmt"
	"math/big"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
)

// Sweeps (DESIGN §10): the final deposits of each deposit address moved
// to the treasury, each deposit once.

// A Sweep moves the final deposits of one token at one deposit address.
type Sweep struct {
	ID           int64
	Chain        int64
	Address      string // 0x and 40 lower-case hex digits
	DepositIndex int64
	Token        string
	Units        *big.Int
	State        string
	Gas          uint64 // the transfer's gas limit, once funded
	Raw          []byte // the signed transfer, once kept
	TxHash       string
	Earlier      []string // the hashes of transfers signed before it (one may yet be mined)
}

// PlanSweeps gathers up to limit final, unswept deposits of the chain in
// the tokens of listed (the catalogue's contracts, lower-case) into
// sweeps, one per address and token (an address with a sweep open waits
// for it), each deposit marked with its sweep in the same transaction, and
// returns how many sweeps it made. A deposit is final when its payout owes
// no refund in a listed token that is not confirmed, and its payout is
// completed, failed, returned or expired, or its own refund is confirmed.
// A deposit of a token the catalogue does not list is never swept (the
// gas would be spent on whatever anyone sends), nor does its refund hold
// the others (see UnlistedRefunds). Addresses of payouts made before
// deposit indexes (no key behind them) are never swept.
func (s *Store) PlanSweeps(ctx context.Context, chain int64, listed []string, limit int, at time.Time) (int, error) {
	made := 0
	err := s.db.Tx(ctx, func(tx pgx.Tx) error {
		made = 0
		rows, err := tx.Query(ctx, `SELECT d.tx_hash, d.log_index, lower(p.deposit_address), p.deposit_index, lower(d.token), d.amount::text
			FROM payout_deposits d JOIN payouts p ON p.id = d.payout_id
			WHERE d.chain = $1 AND d.sweep_id IS NULL AND p.deposit_index IS NOT NULL AND lower(d.token) = ANY($3::text[])
			AND NOT EXISTS (SELECT 1 FROM payout_refunds r WHERE r.payout_id = p.id AND r.status <> 'confirmed'
				AND r.crypto_currency NOT LIKE '0x%')
			AND (p.status IN ('completed', 'failed', 'returned', 'expired') OR EXISTS (SELECT 1 FROM payout_refunds r
				WHERE r.payout_id = p.id AND r.deposit_tx_hash = d.tx_hash AND r.deposit_log_index = d.log_index AND r.status = 'confirmed'))
			AND NOT EXISTS (SELECT 1 FROM payout_sweeps w WHERE w.chain = d.chain AND w.address = lower(p.deposit_address) AND w.state <> 'swept')
			ORDER BY d.recorded_at LIMIT $2 FOR UPDATE OF d SKIP LOCKED`, chain, limit, orNone(listed))
		if err != nil {
			return err
		}
		type final struct {
			txHash   string
			logIndex int
			address  string
			index    int64
			token    string
			units    string
		}
		finals, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (final, error) {
			var f final
			return f, row.Scan(&f.txHash, &f.logIndex, &f.address, &f.index, &f.token, &f.units)
		})
		if err != nil {
			return err
		}
		type group struct{ address, token string }
		sums, deposits, index := map[group]*big.Int{}, map[group][]final{}, map[string]int64{}
		var order []group
		for _, f := range finals {
			g := group{f.address, f.token}
			u, ok := new(big.Int).SetString(f.units, 10)
			if !ok {
				return fmt.Errorf("deposit %s/%d: amount %q", f.txHash, f.logIndex, f.units)
			}
			if sums[g] == nil {
				sums[g] = new(big.Int)
				order = append(order, g)
			}
			sums[g].Add(sums[g], u)
			deposits[g] = append(deposits[g], f)
			index[f.address] = f.index
		}
		opened := map[string]bool{}
		for _, g := range order {
			if opened[g.address] {
				continue // one open sweep per address: the next token next time
			}
			opened[g.address] = true
			var id int64
			if err := tx.QueryRow(ctx, `INSERT INTO payout_sweeps (chain, address, deposit_index, token, units, state, created_at)
				VALUES ($1, $2, $3, $4, $5::numeric, 'funding', $6) RETURNING id`,
				chain, g.address, index[g.address], g.token, sums[g].String(), at).Scan(&id); err != nil {
				return fmt.Errorf("sweep of %s: %w", g.address, err)
			}
			for _, f := range deposits[g] {
				if _, err := tx.Exec(ctx, `UPDATE payout_deposits SET sweep_id = $4 WHERE chain = $1 AND tx_hash = $2 AND log_index = $3`,
					chain, f.txHash, f.logIndex, id); err != nil {
					return err
				}
			}
			made++
		}
		return nil
	})
	return made, err
}

// Sweeps are up to limit of the chain's sweeps in state, oldest first.
// For funding, only those with no gas send on its way (signed or
// broadcast, not yet confirmed): the ones the treasury must fund, or whose
// gas must be checked again (a sweep sent back to funding, its earlier gas
// send confirmed).
func (s *Store) Sweeps(ctx context.Context, chain int64, state string, limit int) ([]Sweep, error) {
	q := `SELECT id, chain, address, deposit_index, token, units::text, state, COALESCE(gas, 0), raw, COALESCE(tx_hash, ''), earlier_tx_hashes
		FROM payout_sweeps w WHERE chain = $1 AND state = $2`
	if state == "funding" {
		q += ` AND NOT EXISTS (` + gasOnItsWay + `)`
	}
	rows, err := s.db.Query(ctx, q+` ORDER BY id LIMIT $3`, chain, state, limit)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, func(row pgx.CollectableRow) (Sweep, error) {
		var w Sweep
		var units string
		if err := row.Scan(&w.ID, &w.Chain, &w.Address, &w.DepositIndex, &w.Token, &units, &w.State, &w.Gas, &w.Raw, &w.TxHash,
			&w.Earlier); err != nil {
			return w, err
		}
		var ok bool
		if w.Units, ok = new(big.Int).SetString(units, 10); !ok {
			return w, fmt.Errorf("sweep %d: units %q", w.ID, units)
		}
		return w, nil
	})
}

// gasOnItsWay is a gas send of sweep w signed or broadcast and not yet
// confirmed (nor dropped).
const gasOnItsWay = `SELECT 1 FROM payout_chain_sends s WHERE s.sweep_id = w.id AND s.state IN ('signed', 'broadcast')`

// Refuel sends a funded or sweeping sweep (state) back to funding: its
// address is topped up again, and its transfer signed again at its nonce
// with a higher fee (a transfer the chain would not mine: its fee fell
// below what the chain takes, or its address cannot pay it).
func (s *Store) Refuel(ctx context.Context, id int64, state string) error {
	return moved(s.db.Exec(ctx, `UPDATE payout_sweeps SET state = 'funding', raw = NULL, tx_hash = NULL,
		earlier_tx_hashes = earlier_tx_hashes || CASE WHEN tx_hash IS NULL THEN '{}'::text[] ELSE ARRAY[tx_hash] END
		WHERE id = $1 AND state = $2`, id, state))
}

// Funded marks a funding sweep funded without a gas send: the address
// holds gas enough for its transfer (gas, its limit) already.
func (s *Store) Funded(ctx context.Context, id int64, gas uint64) error {
	return moved(s.db.Exec(ctx, `UPDATE payout_sweeps SET state = 'funded', gas = $2 WHERE id = $1 AND state = 'funding'`, id, gas))
}

// GasSigning signs the gas send of sweep w at nonce: the chain's native
// coin from the treasury to w's address, enough for a transfer of gas.
type GasSigning func(w Sweep, nonce uint64) (Send, Version, error)

// SignGas signs, from sender (the treasury), the gas send of each sweep in
// sweeps still funding with no live gas send, each at the wallet's next
// nonce, and keeps them with each sweep's transfer gas limit in one
// transaction, as SignRefunds does: the nonces are taken, and the sends
// exist, before anything is broadcast.
func (s *Store) SignGas(ctx context.Context, chain int64, sender string, chainNonce uint64, sweeps []Sweep, gas map[int64]uint64, sign GasSigning) (int, error) {
	signed := 0
	err := s.db.Tx(ctx, func(tx pgx.Tx) error {
		signed = 0
		var next uint64
		if err := tx.QueryRow(ctx, `INSERT INTO payout_chain_nonces (chain, sender, next) VALUES ($1, $2, $3)
			ON CONFLICT (chain, sender) DO UPDATE SET next = GREATEST(payout_chain_nonces.next, EXCLUDED.next) RETURNING next`,
			chain, sender, chainNonce).Scan(&next); err != nil {
			return err
		}
		at := next
		for _, w := range sweeps {
			var still bool
			if err := tx.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM payout_sweeps w WHERE id = $1 AND state = 'funding'
				AND NOT EXISTS (`+gasOnItsWay+`))`, w.ID).Scan(&still); err != nil {
				return err
			}
			if !still {
				continue // another replica funds it
			}
			send, v, err := sign(w, next)
			if err != nil {
				return err
			}
			send.Purpose, send.SweepID = PurposeGas, w.ID
			if err := insertSend(ctx, tx, send, v); err != nil {
				return err
			}
			if _, err := tx.Exec(ctx, `UPDATE payout_sweeps SET gas = $2 WHERE id = $1`, w.ID, gas[w.ID]); err != nil {
				return err
			}
			next++
			signed++
		}
		if next == at {
			return nil
		}
		_, err := tx.Exec(ctx, `UPDATE payout_chain_nonces SET next = $3 WHERE chain = $1 AND sender = $2`, chain, sender, next)
		return err
	})
	return signed, err
}

// KeepSweep keeps a funded sweep's signed transfer (raw, hash) before it
// is broadcast: the sweep is sweeping.
func (s *Store) KeepSweep(ctx context.Context, id int64, raw []byte, hash string) error {
	return moved(s.db.Exec(ctx, `UPDATE payout_sweeps SET state = 'sweeping', raw = $2, tx_hash = $3 WHERE id = $1 AND state = 'funded'`,
		id, raw, strings.ToLower(hash)))
}

// Swept marks a sweeping sweep swept at at: its transfer was mined with
// the chain's confirmations.
func (s *Store) Swept(ctx context.Context, id int64, at time.Time) error {
	return moved(s.db.Exec(ctx, `UPDATE payout_sweeps SET state = 'swept', swept_at = $2 WHERE id = $1 AND state = 'sweeping'`, id, at))
}

// SweptBy marks a sweep sent back to funding (or funded since) swept at
// at by one of its earlier transfers, raw and hash, mined with the chain's
// confirmations after all.
func (s *Store) SweptBy(ctx context.Context, id int64, raw []byte, hash string, at time.Time) error {
	return moved(s.db.Exec(ctx, `UPDATE payout_sweeps SET state = 'swept', swept_at = $4, raw = $2, tx_hash = $3
		WHERE id = $1 AND state IN ('funding', 'funded')`, id, raw, strings.ToLower(hash), at))
}

// Unsweep sends a sweeping sweep whose transfer reverted back to funding:
// its gas is checked again, and its transfer signed again.
func (s *Store) Unsweep(ctx context.Context, id int64) error {
	return moved(s.db.Exec(ctx, `UPDATE payout_sweeps SET state = 'funding', raw = NULL, tx_hash = NULL WHERE id = $1 AND state = 'sweeping'`, id))
}

// moved is ErrSendMoved when an update changed nothing: another replica
// moved the row first.
func moved(tag interface{ RowsAffected() int64 }, err error) error {
	if err == nil && tag.RowsAffected() == 0 {
		return ErrSendMoved
	}
	return err
}
