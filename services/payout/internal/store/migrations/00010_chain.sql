-- +goose Up
-- On chain (DESIGN §10, turn 7: deposit addresses were 20 bytes of an HMAC
-- with no key behind them, and deposits were announced by an API call).
--
-- Every new payout's deposit address is derived (BIP-32) from the
-- service's extended public key at deposit_index, unique, so two payouts
-- never share an address and an address never changes. The sequence hands
-- each replica a block of 64 indexes at a time (one round trip per 64
-- payouts); an index a replica never used is skipped, never reused.
-- Payouts made before this migration keep their address and no index.
CREATE SEQUENCE payout_deposit_index AS bigint INCREMENT BY 64 MINVALUE 0 MAXVALUE 2147483583 START 0;
-- deposit_seen_at: a transfer to the payout was mined and waits for its
-- confirmations; its expiry waits for them (a transfer mined before the
-- window closed is in time).
ALTER TABLE payouts
    ADD COLUMN deposit_seen_at timestamptz,
    ADD COLUMN deposit_index bigint,
    ADD CONSTRAINT payouts_deposit_index_unique UNIQUE (deposit_index),
    ADD CONSTRAINT payouts_deposit_index_range CHECK (deposit_index IS NULL OR deposit_index BETWEEN 0 AND 2147483647);

-- The chain watcher's place on each chain: the last block whose
-- transfers it recorded (number and hash), held by one replica at a time
-- (the lease). A parent hash that no longer matches is a reorganisation:
-- the watcher rewinds to the last block of payout_chain_blocks still on
-- the chain.
CREATE TABLE payout_chain_watch (
    chain        bigint      PRIMARY KEY,
    block_number bigint      NOT NULL CHECK (block_number >= 0),
    block_hash   text        NOT NULL CHECK (block_hash ~ '^0x[0-9a-f]{64}$'),
    lease_owner  text,
    leased_until timestamptz,
    updated_at   timestamptz NOT NULL
);

-- The blocks the watcher passed, the last 256 of each chain: where it
-- rewinds to after a reorganisation.
CREATE TABLE payout_chain_blocks (
    chain  bigint NOT NULL,
    number bigint NOT NULL,
    hash   text   NOT NULL CHECK (hash ~ '^0x[0-9a-f]{64}$'),
    PRIMARY KEY (chain, number)
);

-- Every confirmed transfer to a deposit address, recorded once, by its
-- place on the chain, in the transaction that applies it to its payout
-- (DESIGN §3's arrival rules).
CREATE TABLE payout_deposits (
    chain        bigint      NOT NULL,
    tx_hash      text        NOT NULL CHECK (tx_hash ~ '^0x[0-9a-f]{64}$'),
    log_index    integer     NOT NULL CHECK (log_index >= 0),
    payout_id    text        NOT NULL REFERENCES payouts (id),
    token        text        NOT NULL CHECK (token ~ '^0x[0-9a-fA-F]{40}$'),
    amount       numeric     NOT NULL CHECK (amount > 0),
    block_number bigint      NOT NULL,
    block_hash   text        NOT NULL,
    recorded_at  timestamptz NOT NULL,
    PRIMARY KEY (chain, tx_hash, log_index)
);
CREATE INDEX payout_deposits_payout ON payout_deposits (payout_id);

-- A refund is owed once per cause and per deposit: a deposit is now a
-- transfer log, so two transfers of one transaction (a batch) each owe
-- theirs.
ALTER TABLE payout_refunds ADD COLUMN deposit_log_index integer NOT NULL DEFAULT 0 CHECK (deposit_log_index >= 0);
ALTER TABLE payout_refunds DROP CONSTRAINT payout_refunds_once_per_cause;
ALTER TABLE payout_refunds ADD CONSTRAINT payout_refunds_once_per_cause UNIQUE (payout_id, reason, deposit_tx_hash, deposit_log_index);

-- The sandbox faucet's transfers of requests with an Idempotency-Key: the
-- signed transaction, kept before it is broadcast, so a request retried
-- after a crash broadcasts it again and never sends a second one.
CREATE TABLE payout_faucet_sends (
    id      text        PRIMARY KEY,
    chain   bigint      NOT NULL,
    raw     bytea       NOT NULL,
    kept_at timestamptz NOT NULL
);

-- +goose Down
-- +goose StatementBegin
DO $$ BEGIN RAISE EXCEPTION 'payout migration 00010 (the chain) is not reversed'; END $$;
-- +goose StatementEnd
