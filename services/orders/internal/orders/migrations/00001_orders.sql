-- +goose Up
-- Card orders. Card numbers, expiry and CVC never reach us (they are typed
-- on the card provider's page): nothing here could hold them.
CREATE TABLE orders (
    id              text        PRIMARY KEY,
    key_id          text        NOT NULL,
    direction       text        NOT NULL,
    status          text        NOT NULL,
    crypto_currency text        NOT NULL,
    chain           bigint      NOT NULL,
    fiat_currency   text        NOT NULL,
    country         text        NOT NULL,
    crypto_amount   text,
    fiat_amount     text,
    wallet_address  text        NOT NULL,
    deposit_address text,
    payment_method  text,
    tx_hash         text,
    failure_reason  text,
    expires_at      timestamptz NOT NULL,
    created_at      timestamptz NOT NULL,
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
-- An order's terms never change, and its status only moves forward:
-- awaiting → processing → completed or failed; awaiting → expired;
-- completed, failed and expired are final.
CREATE FUNCTION orders_forward_only() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    rank_old int := CASE OLD.status WHEN 'awaiting_payment' THEN 0 WHEN 'awaiting_deposit' THEN 0 WHEN 'processing' THEN 1 ELSE 2 END;
    rank_new int := CASE NEW.status WHEN 'awaiting_payment' THEN 0 WHEN 'awaiting_deposit' THEN 0 WHEN 'processing' THEN 1 ELSE 2 END;
BEGIN
    IF to_jsonb(NEW) - 'status' - 'payment_method' - 'tx_hash' - 'failure_reason'
       IS DISTINCT FROM to_jsonb(OLD) - 'status' - 'payment_method' - 'tx_hash' - 'failure_reason' THEN
        RAISE EXCEPTION 'order %: its terms never change', OLD.id;
    END IF;
    IF rank_old = 2 AND to_jsonb(NEW) IS DISTINCT FROM to_jsonb(OLD) THEN
        RAISE EXCEPTION 'order %: % is final', OLD.id, OLD.status;
    END IF;
    IF rank_new < rank_old OR (rank_new = rank_old AND NEW.status <> OLD.status) THEN
        RAISE EXCEPTION 'order %: % cannot follow %', OLD.id, NEW.status, OLD.status;
    END IF;
    IF NEW.status = 'expired' AND rank_old <> 0 THEN
        RAISE EXCEPTION 'order %: only an unpaid order expires', OLD.id;
    END IF;
    RETURN NEW;
END
$$;
-- +goose StatementEnd
CREATE TRIGGER orders_forward_only BEFORE UPDATE ON orders FOR EACH ROW EXECUTE FUNCTION orders_forward_only();

-- +goose Down
DROP TABLE orders;
DROP FUNCTION orders_forward_only();
