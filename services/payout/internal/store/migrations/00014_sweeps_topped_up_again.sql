-- +goose Up
-- A sweep whose transfer the chain would not mine (its fee below what the
-- chain takes, or its address short of it) goes back to funding: its
-- address is topped up again, and the transfer signed again at its nonce
-- with a higher fee. A sweep may so have more than one gas send over its
-- life, but only one on its way at a time.
DROP INDEX payout_chain_sends_one_per_sweep;
CREATE UNIQUE INDEX payout_chain_sends_one_open_per_sweep ON payout_chain_sends (sweep_id) WHERE state IN ('signed', 'broadcast');
-- The hashes of its transfers signed before the one it now carries: one
-- of them may still be mined (a top-up lets the address pay it), and then
-- the sweep is done, by it.
ALTER TABLE payout_sweeps ADD COLUMN earlier_tx_hashes text[] NOT NULL DEFAULT '{}';

-- +goose Down
ALTER TABLE payout_sweeps DROP COLUMN earlier_tx_hashes;
DROP INDEX payout_chain_sends_one_open_per_sweep;
CREATE UNIQUE INDEX payout_chain_sends_one_per_sweep ON payout_chain_sends (sweep_id) WHERE state <> 'dropped';
