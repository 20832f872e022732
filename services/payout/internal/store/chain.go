package store

import (
	"context"
	"errors"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/partnerpay/api/pkg/database"
	"github.com/partnerpay/api/pkg/worker"
	"github.com/partnerpay/api/services/payout/internal/record"
	"github.com/partnerpay/api/services/payout/internal/simbug"
)

// What the chain watcher keeps (DESIGN §10): its place on each chain, the
// blocks it passed, and every confirmed transfer to a deposit address,
// recorded once in the transaction that applies it to its payout.

// NextIndexes reserves a block of 64 deposit indexes, [first, first+64):
// one round trip per 64 payouts; an index never handed out is skipped,
// never reused.
func (s *Store) NextIndexes(ctx context.Context) (first int64, err error) {
	err = s.db.QueryRow(ctx, `SELECT nextval('payout_deposit_index')`).Scan(&first)
	return first, err
}

// IndexBlock is how many indexes NextIndexes reserves.
const IndexBlock = 64

// Block is a block the watcher passed.
type Block struct {
	Number uint64
	Hash   string // 0x and 64 lower-case hex digits
}

// ChainDeposit is a confirmed ERC-20 transfer to a deposit address.
type ChainDeposit struct {
	Chain    int64
	TxHash   string
	LogIndex uint
	Address  string // the deposit address it was sent to (EIP-55)
	Token    string // the token contract that emitted it (EIP-55)
	Units    string // the amount, in the token's smallest unit (decimal)
	Block    Block
	At       time.Time // its block's time
}

// ErrWatchLost is a round of the chain watcher whose lease another replica
// took: nothing of it was recorded, and the place did not move.
var ErrWatchLost = errors.New("payout: the chain watcher's lease was taken by another replica")

// LeaseChain takes the watching of chain for owner until until, unless
// another replica holds it (ok false), and answers its place; a chain
// never watched starts at start (a zero start: ok false until one is
// given).
func (s *Store) LeaseChain(ctx context.Context, chain int64, owner string, now, until time.Time, start Block) (place Block, ok bool, err error) {
	if start.Hash != "" {
		_, err = s.db.Exec(ctx, `INSERT INTO payout_chain_watch (chain, block_number, block_hash, updated_at) VALUES ($1, $2, $3, $4)
			ON CONFLICT (chain) DO NOTHING`, chain, int64(start.Number), start.Hash, now)
		if err != nil {
			return Block{}, false, err
		}
	}
	var n int64
	err = s.db.QueryRow(ctx, `UPDATE payout_chain_watch SET lease_owner = $2, leased_until = $4
		WHERE chain = $1 AND (leased_until IS NULL OR leased_until <= $3 OR lease_owner = $2) RETURNING block_number, block_hash`,
		chain, owner, now, until).Scan(&n, &place.Hash)
	if errors.Is(err, database.ErrNoRows) {
		return Block{}, false, nil
	}
	place.Number = uint64(n)
	return place, err == nil, err
}

// ChainPlace is chain's place, whoever watches it (found false: never
// watched).
func (s *Store) ChainPlace(ctx context.Context, chain int64) (place Block, found bool, err error) {
	var n int64
	err = s.db.QueryRow(ctx, `SELECT block_number, block_hash FROM payout_chain_watch WHERE chain = $1`, chain).Scan(&n, &place.Hash)
	if errors.Is(err, database.ErrNoRows) {
		return Block{}, false, nil
	}
	place.Number = uint64(n)
	return place, err == nil, err
}

// ReleaseChain gives the lease back without moving the place.
func (s *Store) ReleaseChain(ctx context.Context, chain int64, owner string) error {
	_, err := s.db.Exec(ctx, `UPDATE payout_chain_watch SET lease_owner = NULL, leased_until = NULL WHERE chain = $1 AND lease_owner = $2`,
		chain, owner)
	return err
}

// RecentBlocks are the blocks of chain the watcher passed, newest first,
// at most limit of them below (not at) number: where a reorganisation
// rewinds to.
func (s *Store) RecentBlocks(ctx context.Context, chain int64, below uint64, limit int) ([]Block, error) {
	rows, err := s.db.Query(ctx, `SELECT number, hash FROM payout_chain_blocks WHERE chain = $1 AND number < $2
		ORDER BY number DESC LIMIT $3`, chain, int64(below), limit)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, func(row pgx.CollectableRow) (Block, error) {
		var b Block
		var n int64
		err := row.Scan(&n, &b.Hash)
		b.Number = uint64(n)
		return b, err
	})
}

// Rewind moves chain's place back to block, while owner holds the lease:
// the blocks after it left the chain (a reorganisation).
func (s *Store) Rewind(ctx context.Context, chain int64, owner string, to Block, at time.Time) error {
	return s.db.Tx(ctx, func(tx pgx.Tx) error {
		tag, err := tx.Exec(ctx, `UPDATE payout_chain_watch SET block_number = $3, block_hash = $4, updated_at = $5
			WHERE chain = $1 AND lease_owner = $2`, chain, owner, int64(to.Number), to.Hash, at)
		switch {
		case err != nil:
			return err
		case tag.RowsAffected() == 0:
			return ErrWatchLost
		}
		_, err = tx.Exec(ctx, `DELETE FROM payout_chain_blocks WHERE chain = $1 AND number > $2`, chain, int64(to.Number))
		return err
	})
}

// PayoutsAt maps the deposit addresses among addresses (EIP-55) to their
// payouts' ids.
func (s *Store) PayoutsAt(ctx context.Context, addresses []string) (map[string]string, error) {
	out := map[string]string{}
	if len(addresses) == 0 {
		return out, nil
	}
	rows, err := s.db.Query(ctx, `SELECT deposit_address, id FROM payouts WHERE deposit_address = ANY($1)`, addresses)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	for rows.Next() {
		var a, id string
		if err := rows.Scan(&a, &id); err != nil {
			return nil, err
		}
		out[a] = id
	}
	return out, rows.Err()
}

// blocksKept is how many of the blocks it passed the watcher keeps per
// chain: a reorganisation deeper than this is an incident.
const blocksKept = 256

// RecordDeposits records the confirmed deposits of the blocks after from
// up to through (the watcher's new place) in one transaction, while owner
// holds chain's lease (else ErrWatchLost): each deposit once, by its
// place on the chain, in a savepoint of its own with what decide makes of
// it for its payout, locked, as it stands (DESIGN §3's arrival rules).
//
// Rows fail alone (DESIGN §3): a deposit the database refuses is undone
// alone (failed is told of it, with its failures in a row) and held in
// payout_deposits_held, and the place moves on past it, so the deposits
// after it are recorded. The held deposits due again are tried first, in
// the same transaction: one recorded leaves the table, one refused again
// waits twice as long (up to heldMost).
//
// It returns the changes that moved a payout, and the deposits held now.
func (s *Store) RecordDeposits(ctx context.Context, chain int64, owner string, through Block, deposits []ChainDeposit,
	at time.Time, decide func(record.Record, ChainDeposit) (record.Change, error), failed func(ChainDeposit, int, error)) ([]record.Change, Held, error) {
	var moved []record.Change
	var held Held
	var apart map[string][]record.Refund // (simbug's refund-apart: refunds written after the commit)
	if simbug.Planted("refund-apart") {
		apart = map[string][]record.Refund{}
		inner := decide
		decide = func(r record.Record, d ChainDeposit) (record.Change, error) {
			c, err := inner(r, d)
			apart[r.ID], c.Refunds = append(apart[r.ID], c.Refunds...), nil
			return c, err
		}
	}
	err := s.db.Tx(ctx, func(tx pgx.Tx) error {
		moved = nil
		var owns bool
		if err := tx.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM payout_chain_watch WHERE chain = $1 AND lease_owner = $2 FOR UPDATE)`,
			chain, owner).Scan(&owns); err != nil {
			return err
		}
		if !owns {
			return ErrWatchLost
		}
		due, err := heldDue(ctx, tx, chain, at)
		if err != nil {
			return err
		}
		for _, h := range due {
			c, err := s.recordOne(ctx, tx, h.ChainDeposit, at, decide)
			if errors.Is(err, database.ErrInDoubt) {
				return err
			}
			if err != nil {
				failed(h.ChainDeposit, h.failures+1, err)
				if _, err := tx.Exec(ctx, `UPDATE payout_deposits_held SET failures = failures + 1, retry_at = $4
					WHERE (chain, tx_hash, log_index) = ($1, $2, $3)`, chain, h.TxHash, int64(h.LogIndex),
					at.Add(worker.Backoff(h.failures+1, heldMost))); err != nil {
					return err
				}
				continue
			}
			if _, err := tx.Exec(ctx, `DELETE FROM payout_deposits_held WHERE (chain, tx_hash, log_index) = ($1, $2, $3)`,
				chain, h.TxHash, int64(h.LogIndex)); err != nil {
				return err
			}
			if c != nil {
				moved = append(moved, *c)
			}
		}
		for _, d := range deposits {
			c, err := s.recordOne(ctx, tx, d, at, decide)
			if errors.Is(err, database.ErrInDoubt) {
				return err
			}
			if err != nil {
				failed(d, 1, err)
				if _, err := tx.Exec(ctx, `INSERT INTO payout_deposits_held (chain, tx_hash, log_index, address, token, units,
						block_number, block_hash, block_time, failures, held_at, retry_at) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, 1, $10, $11)
					ON CONFLICT (chain, tx_hash, log_index) DO NOTHING`,
					chain, d.TxHash, int64(d.LogIndex), d.Address, d.Token, d.Units, int64(d.Block.Number), d.Block.Hash, d.At, at,
					at.Add(worker.Backoff(1, heldMost))); err != nil {
					return err
				}
				continue
			}
			if c != nil {
				moved = append(moved, *c)
			}
		}
		var next *time.Time
		if err := tx.QueryRow(ctx, `SELECT count(*), min(retry_at) FROM payout_deposits_held WHERE chain = $1`, chain).Scan(&held.Count,
			&next); err != nil {
			return err
		}
		if next != nil {
			held.Next = *next
		}
		if _, err := tx.Exec(ctx, `UPDATE payout_chain_watch SET block_number = $2, block_hash = $3, updated_at = $4, lease_owner = NULL,
				leased_until = NULL WHERE chain = $1`, chain, int64(through.Number), through.Hash, at); err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, `INSERT INTO payout_chain_blocks (chain, number, hash) VALUES ($1, $2, $3)
				ON CONFLICT (chain, number) DO UPDATE SET hash = EXCLUDED.hash`, chain, int64(through.Number), through.Hash); err != nil {
			return err
		}
		_, err = tx.Exec(ctx, `DELETE FROM payout_chain_blocks WHERE chain = $1 AND number <= $2`, chain, int64(through.Number)-blocksKept)
		return err
	})
	if err != nil {
		return nil, Held{}, err
	}
	for id, refunds := range apart {
		if len(refunds) == 0 {
			continue
		}
		if err := s.db.Tx(ctx, func(tx pgx.Tx) error {
			r, err := byID(ctx, tx, id, " FOR UPDATE OF p")
			if err != nil {
				return err
			}
			return s.apply(ctx, tx, id, r.Status, record.Change{Refunds: refunds})
		}); err != nil {
			return nil, Held{}, err
		}
	}
	s.counted(moved...)
	return moved, held, nil
}

// Held is what a chain's held deposits are: how many, and when the first
// is due to be tried again.
type Held struct {
	Count int
	Next  time.Time
}

// heldMost is the longest a held deposit waits before it is tried again.
const heldMost = 10 * time.Minute

// heldDeposit is a deposit held, with its failures in a row.
type heldDeposit struct {
	ChainDeposit
	failures int
}

// heldDue are the chain's held deposits due to be tried again at at
// (a hundred at most: the rest at the next round), locked.
func heldDue(ctx context.Context, tx pgx.Tx, chain int64, at time.Time) ([]heldDeposit, error) {
	rows, err := tx.Query(ctx, `SELECT tx_hash, log_index, address, token, units, block_number, block_hash, block_time, failures
		FROM payout_deposits_held WHERE chain = $1 AND retry_at <= $2 ORDER BY retry_at LIMIT 100 FOR UPDATE SKIP LOCKED`, chain, at)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, func(row pgx.CollectableRow) (heldDeposit, error) {
		h := heldDeposit{ChainDeposit: ChainDeposit{Chain: chain}}
		var index int32
		var number int64
		err := row.Scan(&h.TxHash, &index, &h.Address, &h.Token, &h.Units, &number, &h.Block.Hash, &h.At, &h.failures)
		h.LogIndex, h.Block.Number, h.At = uint(index), uint64(number), h.At.UTC()
		return h, err
	})
}

// recordOne records deposit d with what decide makes of it for its
// payout, in a savepoint of tx: nil when it was recorded already or is no
// payout's, an error (the savepoint undone) when the database refuses it.
func (s *Store) recordOne(ctx context.Context, tx pgx.Tx, d ChainDeposit, at time.Time,
	decide func(record.Record, ChainDeposit) (record.Change, error)) (*record.Change, error) {
	var moved *record.Change
	err := database.Alone(ctx, tx, func(tx pgx.Tx) error {
		var id string
		if err := tx.QueryRow(ctx, `SELECT id FROM payouts WHERE deposit_address = $1`, d.Address).Scan(&id); err != nil {
			if errors.Is(err, database.ErrNoRows) {
				return nil // not ours
			}
			return err
		}
		tag, err := tx.Exec(ctx, `INSERT INTO payout_deposits (chain, tx_hash, log_index, payout_id, token, amount, block_number,
				block_hash, recorded_at) VALUES ($1, $2, $3, $4, $5, $6::numeric, $7, $8, $9)
			ON CONFLICT (chain, tx_hash, log_index) DO NOTHING`,
			d.Chain, d.TxHash, int64(d.LogIndex), id, d.Token, d.Units, int64(d.Block.Number), d.Block.Hash, at)
		if err != nil || tag.RowsAffected() == 0 {
			return err // recorded already
		}
		r, err := byID(ctx, tx, id, " FOR UPDATE OF p")
		if err != nil {
			return err
		}
		c, err := decide(r, d)
		if err != nil {
			return err
		}
		if err := s.apply(ctx, tx, r.ID, r.Status, c); err != nil {
			return err
		}
		moved = &c
		return nil
	})
	return moved, err
}

// FaucetSend is the sandbox faucet's transaction kept for request id.
func (s *Store) FaucetSend(ctx context.Context, id string) (raw []byte, found bool, err error) {
	err = s.db.QueryRow(ctx, `SELECT raw FROM payout_faucet_sends WHERE id = $1`, id).Scan(&raw)
	if errors.Is(err, database.ErrNoRows) {
		return nil, false, nil
	}
	return raw, err == nil, err
}

// KeepFaucetSend keeps (or replaces) the faucet's signed transaction for
// request id, before it is broadcast.
func (s *Store) KeepFaucetSend(ctx context.Context, id string, chain int64, raw []byte) error {
	_, err := s.db.Exec(ctx, `INSERT INTO payout_faucet_sends (id, chain, raw, kept_at) VALUES ($1, $2, $3, now())
		ON CONFLICT (id) DO UPDATE SET chain = EXCLUDED.chain, raw = EXCLUDED.raw, kept_at = EXCLUDED.kept_at`, id, chain, raw)
	return err
}
