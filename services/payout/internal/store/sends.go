package store

import (
	"context"
	"errors"
	"fmt"
	"math/big"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/partnerpay/api/pkg/database"
	"github.com/partnerpay/api/pkg/events"
	"github.com/partnerpay/api/pkg/lifecycle"
)

// What the signer keeps (DESIGN §10): every transaction a wallet of ours
// sends, with its nonce and its signed bytes, committed before it is
// broadcast (intent first), and each of its versions (a replacement at the
// same nonce with a higher fee).

// A Send is one nonce of one of our wallets, taken for one refund, or for
// the gas of one sweep.
type Send struct {
	Chain       int64
	Sender      string // 0x and 40 lower-case hex digits, as every address here
	Nonce       uint64
	Purpose     string // PurposeRefund or PurposeGas
	RefundID    string
	SweepID     int64
	Token       string
	Recipient   string
	Units       *big.Int
	BroadcastAt *time.Time
	Versions    []Version // oldest first; the last is the one to broadcast
}

// What a send is for.
const (
	PurposeRefund = "refund" // a refund's transfer of its token
	PurposeGas    = "gas"    // the chain's native coin to a deposit address, for its sweep
)

// NativeCoin is the token of a gas send: the zero address.
const NativeCoin = "0x0000000000000000000000000000000000000000"

// Latest is the send's newest version.
func (s Send) Latest() Version { return s.Versions[len(s.Versions)-1] }

// A Version is one signing of a send.
type Version struct {
	Hash     string
	Raw      []byte
	Gas      uint64
	TipCap   *big.Int
	FeeCap   *big.Int
	SignedAt time.Time
}

// Cost is the most the version can cost in gas: gas × fee cap.
func (v Version) Cost() *big.Int { return new(big.Int).Mul(new(big.Int).SetUint64(v.Gas), v.FeeCap) }

// RefundToSign is a pending refund no live send carries yet.
type RefundToSign struct {
	ID             string
	Address        string
	Amount         string
	CryptoCurrency string
}

// Committed is what a wallet's open sends (signed or broadcast, not yet
// confirmed) may still take from it: units of each token (by contract)
// and gas at the most.
type Committed struct {
	Units map[string]*big.Int
	Gas   *big.Int
}

// Signing decides, for a refund, the send at nonce: signed (its first
// version), or wait (the wallet is short: nothing is taken). An error
// wrapping ErrSkip passes over that refund alone (it cannot be signed:
// nothing is taken, the others are signed); any other error undoes the
// whole signing.
type Signing func(r RefundToSign, nonce uint64, committed Committed) (s Send, v Version, wait bool, err error)

// ErrSkip, from a Signing, passes over its refund alone.
var ErrSkip = errors.New("the refund cannot be signed")

// RefundsToSign are up to limit of the chain's refunds waiting to be
// signed (pending, or whose send was dropped), but those of held (refunds
// the signer holds back: it could not read them), read without a lock:
// the signer reads the chain's balances only when there is something to
// sign, and only of the tokens these owe.
func (s *Store) RefundsToSign(ctx context.Context, chain int64, held []string, limit int) ([]RefundToSign, error) {
	rows, err := s.db.Query(ctx, refundsToSignSQL+` LIMIT $2`, chain, limit, orNone(held))
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, scanRefundToSign)
}

func scanRefundToSign(row pgx.CollectableRow) (RefundToSign, error) {
	var r RefundToSign
	return r, row.Scan(&r.ID, &r.Address, &r.Amount, &r.CryptoCurrency)
}

// refundsToSignSQL is the chain's ($1) refunds to sign, oldest first:
// pending, with no live send (a send whose nonce the chain spent without
// it leaves its refund, already sent, to be signed again), in a token of
// the catalogue (see UnlistedRefunds).
const refundsToSignSQL = `SELECT r.id, r.address, r.amount, r.crypto_currency FROM payout_refunds r
	WHERE r.chain = $1 AND r.crypto_currency NOT LIKE '0x%' AND (r.status = 'pending' OR (r.status = 'sent' AND EXISTS (
		SELECT 1 FROM payout_chain_sends d WHERE d.refund_id = r.id AND d.state = 'dropped')))
	AND NOT EXISTS (SELECT 1 FROM payout_chain_sends s WHERE s.refund_id = r.id AND s.state <> 'dropped')
	AND r.id <> ALL($3::text[])
	ORDER BY r.pending_at, r.id`

// UnlistedRefunds counts the chain's pending refunds in a token the
// catalogue does not list (its contract's address stands for it): a
// transfer of an unknown token to a deposit address. The signer does not
// send them (DESIGN §10): anyone can make a token whose transfers cost us
// gas, and spam every deposit address with it. The runbook says how an
// operator pays one whose token is real.
func (s *Store) UnlistedRefunds(ctx context.Context, chain int64) (int, error) {
	var n int
	err := s.db.QueryRow(ctx, `SELECT count(*) FROM payout_refunds WHERE chain = $1 AND status = 'pending'
		AND crypto_currency LIKE '0x%'`, chain).Scan(&n)
	return n, err
}

// orNone is ids, or an empty list for none (a nil slice is SQL's NULL,
// and x <> ALL(NULL) is never true).
func orNone(ids []string) []string {
	if ids == nil {
		return []string{}
	}
	return ids
}

// SignRefunds signs up to limit of the chain's refunds to sign from
// sender, each at the wallet's next nonce, and keeps every send with its
// signed transaction in one transaction: the nonces are taken, and the
// sends exist, before anything is broadcast. The wallet's nonce row is
// locked for it (one signer per wallet at a time, whatever the replicas);
// chainNonce, the chain's count of the wallet's mined transactions, moves
// the next nonce past any the wallet spent elsewhere. sign is local work
// (no call to a node is made while the lock is held). The refunds of held
// are passed over, as RefundsToSign passes them.
//
// A refund whose send the database refuses is passed over alone (a
// savepoint: no nonce is taken, the others are kept) and handed to
// refused.
func (s *Store) SignRefunds(ctx context.Context, chain int64, sender string, chainNonce uint64, held []string, limit int,
	sign Signing, refused func(r RefundToSign, err error)) (signed, waiting int, err error) {
	err = s.db.Tx(ctx, func(tx pgx.Tx) error {
		signed, waiting = 0, 0
		var next uint64
		if err := tx.QueryRow(ctx, `INSERT INTO payout_chain_nonces (chain, sender, next) VALUES ($1, $2, $3)
			ON CONFLICT (chain, sender) DO UPDATE SET next = GREATEST(payout_chain_nonces.next, EXCLUDED.next) RETURNING next`,
			chain, sender, chainNonce).Scan(&next); err != nil {
			return err
		}
		rows, err := tx.Query(ctx, refundsToSignSQL+` LIMIT $2 FOR UPDATE OF r SKIP LOCKED`, chain, limit, orNone(held))
		if err != nil {
			return err
		}
		refunds, err := pgx.CollectRows(rows, scanRefundToSign)
		if err != nil || len(refunds) == 0 {
			return err
		}
		committed, err := committedOf(ctx, tx, chain, sender)
		if err != nil {
			return err
		}
		at := next
		for _, r := range refunds {
			send, v, wait, err := sign(r, next, committed)
			if errors.Is(err, ErrSkip) {
				continue // this refund alone: no nonce is taken
			}
			if err != nil {
				return err
			}
			if wait {
				waiting++
				continue
			}
			if err := database.Alone(ctx, tx, func(tx pgx.Tx) error { return insertSend(ctx, tx, send, v) }); err != nil {
				if errors.Is(err, database.ErrInDoubt) {
					return err
				}
				refused(r, err) // (a dead connection fails the next statement, and so the signing)
				continue
			}
			prev := committed.Units[send.Token]
			if prev == nil {
				prev = new(big.Int)
			}
			committed.Units[send.Token] = new(big.Int).Add(prev, send.Units)
			committed.Gas = new(big.Int).Add(committed.Gas, v.Cost())
			next++
			signed++
		}
		if next == at {
			return nil
		}
		_, err = tx.Exec(ctx, `UPDATE payout_chain_nonces SET next = $3 WHERE chain = $1 AND sender = $2`, chain, sender, next)
		return err
	})
	return signed, waiting, err
}

// committedOf is what the wallet's open sends may still take.
func committedOf(ctx context.Context, tx pgx.Tx, chain int64, sender string) (Committed, error) {
	c := Committed{Units: map[string]*big.Int{}, Gas: new(big.Int)}
	rows, err := tx.Query(ctx, `SELECT s.token, s.units::text, v.gas, v.fee_cap::text FROM payout_chain_sends s
		JOIN LATERAL (SELECT gas, fee_cap FROM payout_chain_send_versions v
			WHERE (v.chain, v.sender, v.nonce) = (s.chain, s.sender, s.nonce) ORDER BY v.signed_at DESC LIMIT 1) v ON true
		WHERE s.chain = $1 AND s.sender = $2 AND s.state IN ('signed', 'broadcast')`, chain, sender)
	if err != nil {
		return c, err
	}
	defer rows.Close()
	for rows.Next() {
		var token, units, feeCap string
		var gas uint64
		if err := rows.Scan(&token, &units, &gas, &feeCap); err != nil {
			return c, err
		}
		u, ok1 := new(big.Int).SetString(units, 10)
		f, ok2 := new(big.Int).SetString(feeCap, 10)
		if !ok1 || !ok2 {
			return c, fmt.Errorf("send of %s: units %q, fee cap %q", sender, units, feeCap)
		}
		if token == NativeCoin {
			c.Gas.Add(c.Gas, u) // a sweep's gas leaves with it
		}
		if prev := c.Units[token]; prev != nil {
			u.Add(u, prev)
		}
		c.Units[token] = u
		c.Gas.Add(c.Gas, f.Mul(f, new(big.Int).SetUint64(gas)))
	}
	return c, rows.Err()
}

func insertSend(ctx context.Context, tx pgx.Tx, s Send, v Version) error {
	var refund, sweep any
	if s.Purpose == PurposeGas {
		sweep = s.SweepID
	} else {
		s.Purpose, refund = PurposeRefund, s.RefundID
	}
	if _, err := tx.Exec(ctx, `INSERT INTO payout_chain_sends (chain, sender, nonce, purpose, refund_id, sweep_id, token, recipient, units, state, created_at)
		VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9::numeric, 'signed', $10)`,
		s.Chain, s.Sender, s.Nonce, s.Purpose, refund, sweep, s.Token, s.Recipient, s.Units.String(), v.SignedAt); err != nil {
		return fmt.Errorf("send %s/%d: %w", s.Sender, s.Nonce, err)
	}
	return insertVersion(ctx, tx, s, v)
}

func insertVersion(ctx context.Context, tx pgx.Tx, s Send, v Version) error {
	_, err := tx.Exec(ctx, `INSERT INTO payout_chain_send_versions (hash, chain, sender, nonce, raw, gas, tip_cap, fee_cap, signed_at)
		VALUES ($1, $2, $3, $4, $5, $6, $7::numeric, $8::numeric, $9)`,
		v.Hash, s.Chain, s.Sender, s.Nonce, v.Raw, v.Gas, v.TipCap.String(), v.FeeCap.String(), v.SignedAt)
	if err != nil {
		return fmt.Errorf("send %s/%d, version %s: %w", s.Sender, s.Nonce, v.Hash, err)
	}
	return nil
}

// Sends are the wallet's sends in state ("signed": kept, not yet taken
// by a node; "broadcast": taken, not yet confirmed), lowest nonce first,
// limit at most, each with its versions.
func (s *Store) Sends(ctx context.Context, chain int64, sender, state string, limit int) ([]Send, error) {
	rows, err := s.db.Query(ctx, `SELECT s.nonce, s.purpose, COALESCE(s.refund_id, ''), COALESCE(s.sweep_id, 0), s.token, s.recipient, s.units::text, s.broadcast_at,
			v.hash, v.raw, v.gas, v.tip_cap::text, v.fee_cap::text, v.signed_at
		FROM (SELECT * FROM payout_chain_sends WHERE chain = $1 AND sender = $2 AND state = $3 ORDER BY nonce LIMIT $4) s
		JOIN payout_chain_send_versions v ON (v.chain, v.sender, v.nonce) = (s.chain, s.sender, s.nonce)
		ORDER BY s.nonce, v.signed_at, v.hash`, chain, sender, state, limit)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []Send
	for rows.Next() {
		var (
			send                  Send
			v                     Version
			units, tipCap, feeCap string
		)
		if err := rows.Scan(&send.Nonce, &send.Purpose, &send.RefundID, &send.SweepID, &send.Token, &send.Recipient, &units, &send.BroadcastAt,
			&v.Hash, &v.Raw, &v.Gas, &tipCap, &feeCap, &v.SignedAt); err != nil {
			return nil, err
		}
		var ok1, ok2, ok3 bool
		send.Units, ok1 = new(big.Int).SetString(units, 10)
		v.TipCap, ok2 = new(big.Int).SetString(tipCap, 10)
		v.FeeCap, ok3 = new(big.Int).SetString(feeCap, 10)
		if !ok1 || !ok2 || !ok3 {
			return nil, fmt.Errorf("send %s/%d: a number that is not one", sender, send.Nonce)
		}
		if n := len(out); n > 0 && out[n-1].Nonce == send.Nonce {
			out[n-1].Versions = append(out[n-1].Versions, v)
			continue
		}
		send.Chain, send.Sender, send.Versions = chain, sender, []Version{v}
		out = append(out, send)
	}
	return out, rows.Err()
}

// ErrSendMoved is a send another replica moved first: nothing was done.
var ErrSendMoved = errors.New("the send is no longer in the state this change follows")

// Broadcast records that a node took send's version hash at at: the send
// is broadcast, and its refund sent with that hash (its event written) or,
// signed again after a dropped send, carries it.
func (s *Store) Broadcast(ctx context.Context, send Send, hash string, at time.Time) error {
	return s.db.Tx(ctx, func(tx pgx.Tx) error {
		tag, err := tx.Exec(ctx, `UPDATE payout_chain_sends SET state = 'broadcast', broadcast_at = $4
			WHERE chain = $1 AND sender = $2 AND nonce = $3 AND state = 'signed'`, send.Chain, send.Sender, send.Nonce, at)
		if err != nil {
			return err
		}
		if tag.RowsAffected() == 0 {
			return ErrSendMoved
		}
		if send.Purpose == PurposeGas {
			return nil
		}
		payout, status, err := lockRefund(ctx, tx, send.RefundID)
		if err != nil {
			return err
		}
		if status != lifecycle.RefundPending {
			_, err := tx.Exec(ctx, `UPDATE payout_refunds SET tx_hash = $2 WHERE id = $1 AND status = 'sent'`, send.RefundID, hash)
			return err
		}
		return s.sent(ctx, tx, send.RefundID, payout, hash, at)
	})
}

// lockRefund locks refund id's payout (its events are written one change
// after another), and answers it and the refund's status.
func lockRefund(ctx context.Context, tx pgx.Tx, id string) (payout, status string, err error) {
	err = tx.QueryRow(ctx, `SELECT p.id, r.status FROM payout_refunds r JOIN payouts p ON p.id = r.payout_id WHERE r.id = $1
		FOR UPDATE OF p`, id).Scan(&payout, &status)
	if err != nil {
		return "", "", fmt.Errorf("refund %s: %w", id, err)
	}
	return payout, status, nil
}

// Replace keeps v, a new version of send at its nonce with a higher fee,
// before it is broadcast, if the send's newest version is still after
// (else another replica replaced it first: ErrSendMoved); the refund
// carries v's hash from now on.
func (s *Store) Replace(ctx context.Context, send Send, after string, v Version) error {
	return s.db.Tx(ctx, func(tx pgx.Tx) error {
		var state, newest string
		if err := tx.QueryRow(ctx, `SELECT s.state, (SELECT v.hash FROM payout_chain_send_versions v
				WHERE (v.chain, v.sender, v.nonce) = (s.chain, s.sender, s.nonce) ORDER BY v.signed_at DESC, v.hash DESC LIMIT 1)
			FROM payout_chain_sends s WHERE s.chain = $1 AND s.sender = $2 AND s.nonce = $3 FOR UPDATE`,
			send.Chain, send.Sender, send.Nonce).Scan(&state, &newest); err != nil {
			return err
		}
		if state != "broadcast" || newest != after {
			return ErrSendMoved
		}
		if err := insertVersion(ctx, tx, send, v); err != nil {
			return err
		}
		_, err := tx.Exec(ctx, `UPDATE payout_refunds SET tx_hash = $2 WHERE id = $1 AND status = 'sent'`, send.RefundID, v.Hash)
		return err
	})
}

// Confirm records that the chain mined send as hash, in block, with its
// confirmations: the send is confirmed, and its refund confirmed with that
// hash at at (its event written).
func (s *Store) Confirm(ctx context.Context, send Send, hash string, block uint64, at time.Time) error {
	return s.db.Tx(ctx, func(tx pgx.Tx) error {
		tag, err := tx.Exec(ctx, `UPDATE payout_chain_sends SET state = 'confirmed', mined_hash = $4, mined_block = $5, confirmed_at = $6
			WHERE chain = $1 AND sender = $2 AND nonce = $3 AND state = 'broadcast'`, send.Chain, send.Sender, send.Nonce, hash, block, at)
		if err != nil {
			return err
		}
		if tag.RowsAffected() == 0 {
			return ErrSendMoved
		}
		if send.Purpose == PurposeGas {
			// The address has its gas: its sweep may sign its transfer.
			_, err := tx.Exec(ctx, `UPDATE payout_sweeps SET state = 'funded' WHERE id = $1 AND state = 'funding'`, send.SweepID)
			return err
		}
		payout, _, err := lockRefund(ctx, tx, send.RefundID)
		if err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, `UPDATE payout_refunds SET status = 'confirmed', tx_hash = $2, confirmed_at = $3 WHERE id = $1`,
			send.RefundID, hash, at); err != nil {
			return fmt.Errorf("refund %s confirmed: %w", send.RefundID, err)
		}
		p, err := byID(ctx, tx, payout, "")
		if err != nil {
			return err
		}
		e, err := events.New(s.env, p.KeyID, refundEventType(lifecycle.RefundConfirmed), p.ID, at, s.view.Status(p), lifecycle.RefundSent)
		if err != nil {
			return err
		}
		return Feed.Write(ctx, tx, e.With("refundId", send.RefundID))
	})
}

// Drop records that the chain spent send's nonce without it (a version
// mined and reverted, or another transaction of the wallet): its refund
// is signed again, at a new nonce.
func (s *Store) Drop(ctx context.Context, send Send) error {
	tag, err := s.db.Exec(ctx, `UPDATE payout_chain_sends SET state = 'dropped'
		WHERE chain = $1 AND sender = $2 AND nonce = $3 AND state IN ('signed', 'broadcast')`, send.Chain, send.Sender, send.Nonce)
	if err == nil && tag.RowsAffected() == 0 {
		err = ErrSendMoved
	}
	return err
}
