-- +goose Up
-- The embedded engine's form of postgres/00001 (times are fixed-width UTC text).
CREATE TABLE orders (
    id              TEXT    PRIMARY KEY,
    key_id          TEXT    NOT NULL,
    direction       TEXT    NOT NULL,
    status          TEXT    NOT NULL,
    crypto_currency TEXT    NOT NULL,
    chain           INTEGER NOT NULL,
    fiat_currency   TEXT    NOT NULL,
    country         TEXT    NOT NULL,
    crypto_amount   TEXT,
    fiat_amount     TEXT,
    wallet_address  TEXT    NOT NULL,
    deposit_address TEXT,
    payment_method  TEXT,
    tx_hash         TEXT,
    failure_reason  TEXT,
    expires_at      TEXT    NOT NULL,
    created_at      TEXT    NOT NULL,
    CONSTRAINT orders_direction CHECK (direction IN ('buy', 'sell')),
    CONSTRAINT orders_status CHECK (status IN ('awaiting_payment', 'awaiting_deposit', 'processing', 'completed', 'failed', 'expired')),
    CONSTRAINT orders_awaits_its_own CHECK (NOT (direction = 'buy' AND status = 'awaiting_deposit') AND NOT (direction = 'sell' AND status = 'awaiting_payment')),
    CONSTRAINT orders_one_amount CHECK ((crypto_amount IS NULL) <> (fiat_amount IS NULL)),
    CONSTRAINT orders_sell_has_deposit_address CHECK ((direction = 'sell') = (deposit_address IS NOT NULL)),
    CONSTRAINT orders_completed_has_hash CHECK (status <> 'completed' OR direction = 'sell' OR tx_hash IS NOT NULL),
    CONSTRAINT orders_failed_has_reason CHECK ((status = 'failed') = (failure_reason IS NOT NULL))
);
CREATE INDEX orders_key ON orders (key_id);

-- +goose StatementBegin
CREATE TRIGGER orders_forward_only BEFORE UPDATE ON orders FOR EACH ROW
    WHEN NEW.id IS NOT OLD.id OR NEW.key_id IS NOT OLD.key_id OR NEW.direction IS NOT OLD.direction
      OR NEW.crypto_currency IS NOT OLD.crypto_currency OR NEW.chain IS NOT OLD.chain
      OR NEW.fiat_currency IS NOT OLD.fiat_currency OR NEW.country IS NOT OLD.country
      OR NEW.crypto_amount IS NOT OLD.crypto_amount OR NEW.fiat_amount IS NOT OLD.fiat_amount
      OR NEW.wallet_address IS NOT OLD.wallet_address OR NEW.deposit_address IS NOT OLD.deposit_address
      OR NEW.expires_at IS NOT OLD.expires_at OR NEW.created_at IS NOT OLD.created_at
      OR (OLD.status IN ('completed', 'failed', 'expired') AND (NEW.status IS NOT OLD.status
          OR NEW.payment_method IS NOT OLD.payment_method OR NEW.tx_hash IS NOT OLD.tx_hash OR NEW.failure_reason IS NOT OLD.failure_reason))
      OR (OLD.status = 'processing' AND NEW.status IN ('awaiting_payment', 'awaiting_deposit', 'expired'))
      OR (OLD.status IN ('awaiting_payment', 'awaiting_deposit') AND NEW.status IN ('awaiting_payment', 'awaiting_deposit') AND NEW.status IS NOT OLD.status)
BEGIN
    SELECT RAISE(ABORT, 'an order''s terms never change and its status moves only forward');
END;
-- +goose StatementEnd

-- +goose Down
DROP TABLE orders;
