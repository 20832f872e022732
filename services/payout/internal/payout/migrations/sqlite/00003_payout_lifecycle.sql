-- +goose Up
-- The embedded engine's form of postgres/00003 (the table is made anew:
-- SQLite adds no constraint to a table it has).
CREATE TABLE payouts_next (
    id                   TEXT    PRIMARY KEY,
    quote_id             TEXT    NOT NULL,
    key_id               TEXT    NOT NULL,
    beneficiary_name     TEXT    NOT NULL,
    beneficiary          TEXT    NOT NULL,
    chain                INTEGER NOT NULL,
    crypto_currency      TEXT    NOT NULL,
    fiat_currency        TEXT    NOT NULL,
    country              TEXT    NOT NULL,
    crypto_amount        TEXT,
    fiat_amount          TEXT,
    rail                 TEXT    NOT NULL,
    estimated_settlement TEXT    NOT NULL,
    status               TEXT    NOT NULL,
    quote_expires_at     TEXT    NOT NULL,
    created_at           TEXT    NOT NULL,
    reference            TEXT,
    deposit_address      TEXT    NOT NULL,
    deposit_expires_at   TEXT    NOT NULL,
    deposit_tx_hash      TEXT,
    completed_at         TEXT,
    failure_reason       TEXT,
    return_reason        TEXT,
    sandbox_outcome      TEXT,
    sandbox_reason       TEXT,
    status_at            TEXT    NOT NULL,
    CONSTRAINT payouts_quote_executes_once UNIQUE (quote_id),
    CONSTRAINT payouts_not_after_expiry CHECK (created_at < quote_expires_at),
    CONSTRAINT payouts_one_amount CHECK ((crypto_amount IS NULL) <> (fiat_amount IS NULL)),
    CONSTRAINT payouts_status CHECK (status IN ('awaiting_deposit', 'processing', 'completed', 'returned', 'expired', 'failed')),
    CONSTRAINT payouts_reference CHECK (reference IS NULL OR length(reference) BETWEEN 1 AND 64),
    CONSTRAINT payouts_deposit_arrived CHECK ((status IN ('awaiting_deposit', 'expired')) = (deposit_tx_hash IS NULL)),
    CONSTRAINT payouts_completed_at CHECK ((status IN ('completed', 'returned')) = (completed_at IS NOT NULL)),
    CONSTRAINT payouts_failure_reason CHECK ((status = 'failed') = (failure_reason IS NOT NULL)),
    CONSTRAINT payouts_return_reason CHECK ((status = 'returned') = (return_reason IS NOT NULL))
);
INSERT INTO payouts_next (id, quote_id, key_id, beneficiary_name, beneficiary, chain, crypto_currency, fiat_currency, country,
    crypto_amount, fiat_amount, rail, estimated_settlement, status, quote_expires_at, created_at,
    deposit_address, deposit_expires_at, status_at)
SELECT id, quote_id, key_id, beneficiary_name, json_object('name', beneficiary_name, 'iban', beneficiary_iban), chain, crypto_currency,
    fiat_currency, country, crypto_amount, fiat_amount, rail, estimated_settlement, 'awaiting_deposit', quote_expires_at, created_at,
    '0x' || lower(hex(randomblob(20))), strftime('%Y-%m-%dT%H:%M:%f', created_at, '+30 minutes') || '000Z', created_at
FROM payouts;
DROP TABLE payouts;
ALTER TABLE payouts_next RENAME TO payouts;
CREATE INDEX payouts_key_created ON payouts (key_id, created_at);

CREATE TABLE payout_history (
    payout_id TEXT NOT NULL REFERENCES payouts (id),
    status    TEXT NOT NULL,
    at        TEXT NOT NULL,
    PRIMARY KEY (payout_id, status)
);
INSERT INTO payout_history (payout_id, status, at) SELECT id, status, created_at FROM payouts;

-- +goose StatementBegin
CREATE TRIGGER payouts_bound BEFORE UPDATE ON payouts FOR EACH ROW
    WHEN NEW.id IS NOT OLD.id OR NEW.quote_id IS NOT OLD.quote_id OR NEW.key_id IS NOT OLD.key_id
      OR NEW.beneficiary_name IS NOT OLD.beneficiary_name OR NEW.beneficiary IS NOT OLD.beneficiary
      OR NEW.chain IS NOT OLD.chain OR NEW.crypto_currency IS NOT OLD.crypto_currency
      OR NEW.fiat_currency IS NOT OLD.fiat_currency OR NEW.country IS NOT OLD.country
      OR NEW.crypto_amount IS NOT OLD.crypto_amount OR NEW.fiat_amount IS NOT OLD.fiat_amount
      OR NEW.rail IS NOT OLD.rail OR NEW.quote_expires_at IS NOT OLD.quote_expires_at
      OR NEW.created_at IS NOT OLD.created_at OR NEW.reference IS NOT OLD.reference
      OR NEW.deposit_address IS NOT OLD.deposit_address OR NEW.deposit_expires_at IS NOT OLD.deposit_expires_at
      OR (OLD.deposit_tx_hash IS NOT NULL AND NEW.deposit_tx_hash IS NOT OLD.deposit_tx_hash)
      OR (OLD.completed_at IS NOT NULL AND NEW.completed_at IS NOT OLD.completed_at)
      OR (OLD.failure_reason IS NOT NULL AND NEW.failure_reason IS NOT OLD.failure_reason)
      OR (OLD.return_reason IS NOT NULL AND NEW.return_reason IS NOT OLD.return_reason)
      OR (OLD.sandbox_outcome IS NOT NULL AND NEW.sandbox_outcome IS NOT OLD.sandbox_outcome)
      OR (OLD.sandbox_reason IS NOT NULL AND NEW.sandbox_reason IS NOT OLD.sandbox_reason)
      OR (NEW.status IS NOT OLD.status AND (OLD.status || '>' || NEW.status) NOT IN (
          'awaiting_deposit>processing', 'awaiting_deposit>expired', 'processing>completed', 'processing>failed', 'completed>returned'))
BEGIN
    SELECT RAISE(ABORT, 'a payout''s quote, owner, beneficiary, amount and deposit never change, and its status moves only along its arrows');
END;
-- +goose StatementEnd

-- +goose StatementBegin
CREATE TRIGGER payouts_history_insert AFTER INSERT ON payouts FOR EACH ROW
BEGIN
    INSERT INTO payout_history (payout_id, status, at) VALUES (NEW.id, NEW.status, NEW.status_at);
END;
-- +goose StatementEnd

-- +goose StatementBegin
CREATE TRIGGER payouts_history_update AFTER UPDATE OF status ON payouts FOR EACH ROW WHEN NEW.status IS NOT OLD.status
BEGIN
    INSERT INTO payout_history (payout_id, status, at) VALUES (NEW.id, NEW.status, NEW.status_at);
END;
-- +goose StatementEnd

-- +goose Down
SELECT 1;
