-- +goose Up
-- The embedded engine's form of postgres/00001 (times are fixed-width UTC text).
CREATE TABLE payouts (
    id                   TEXT    PRIMARY KEY,
    quote_id             TEXT    NOT NULL,
    key_id               TEXT    NOT NULL,
    beneficiary_name     TEXT    NOT NULL,
    beneficiary_iban     TEXT    NOT NULL,
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
    CONSTRAINT payouts_quote_executes_once UNIQUE (quote_id),
    CONSTRAINT payouts_not_after_expiry CHECK (created_at < quote_expires_at),
    CONSTRAINT payouts_one_amount CHECK ((crypto_amount IS NULL) <> (fiat_amount IS NULL)),
    CONSTRAINT payouts_status CHECK (status IN ('pending'))
);
CREATE INDEX payouts_key_created ON payouts (key_id, created_at);

-- +goose StatementBegin
CREATE TRIGGER payouts_bound BEFORE UPDATE ON payouts FOR EACH ROW
    WHEN NEW.id IS NOT OLD.id OR NEW.quote_id IS NOT OLD.quote_id OR NEW.key_id IS NOT OLD.key_id
      OR NEW.beneficiary_name IS NOT OLD.beneficiary_name OR NEW.beneficiary_iban IS NOT OLD.beneficiary_iban
      OR NEW.chain IS NOT OLD.chain OR NEW.crypto_currency IS NOT OLD.crypto_currency
      OR NEW.fiat_currency IS NOT OLD.fiat_currency OR NEW.country IS NOT OLD.country
      OR NEW.crypto_amount IS NOT OLD.crypto_amount OR NEW.fiat_amount IS NOT OLD.fiat_amount
      OR NEW.rail IS NOT OLD.rail OR NEW.quote_expires_at IS NOT OLD.quote_expires_at
      OR NEW.created_at IS NOT OLD.created_at OR NEW.status IS NOT OLD.status
BEGIN
    SELECT RAISE(ABORT, 'a payout''s quote, owner, beneficiary and amount never change, and its status moves only forward');
END;
-- +goose StatementEnd

-- +goose Down
DROP TABLE payouts;
