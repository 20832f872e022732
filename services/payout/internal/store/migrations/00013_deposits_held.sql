-- +goose Up
-- A confirmed transfer to a deposit address that the database refused to
-- record with its payout (a rule of the schema, a bug, a row edited by
-- hand) is held here, so the chain watcher's place moves on and the
-- deposits after it are recorded. The watcher tries it again alone, after
-- a wait that doubles up to ten minutes, until it is recorded; then it
-- leaves this table. Nothing here is a deposit yet: it is what the chain
-- said, kept as the chain said it.
CREATE TABLE payout_deposits_held (
    chain        bigint      NOT NULL,
    tx_hash      text        NOT NULL CHECK (tx_hash ~ '^0x[0-9a-f]{64}$'),
    log_index    integer     NOT NULL CHECK (log_index >= 0),
    address      text        NOT NULL,
    token        text        NOT NULL,
    units        text        NOT NULL,
    block_number bigint      NOT NULL,
    block_hash   text        NOT NULL,
    block_time   timestamptz NOT NULL,
    failures     integer     NOT NULL CHECK (failures > 0),
    held_at      timestamptz NOT NULL,
    retry_at     timestamptz NOT NULL,
    PRIMARY KEY (chain, tx_hash, log_index)
);
CREATE INDEX payout_deposits_held_due ON payout_deposits_held (chain, retry_at);

-- +goose Down
DROP TABLE payout_deposits_held;
