-- +goose Up
-- A payout: the execution of a bank payout quote. The money rules hold
-- here whatever the code does:
--   a quote executes once, to anyone          UNIQUE (quote_id)
--   never after its quote expired             CHECK (created_at < quote_expires_at)
--   bound to its beneficiary, never repriced  an executed payout's quote, owner,
--                                             beneficiary and amount never change
--   a status moves only forward               (pending is the only status while
--                                             the payout provider is a mock)
CREATE TABLE payouts (
    id                   text        PRIMARY KEY,
    quote_id             text        NOT NULL,
    key_id               text        NOT NULL,
    beneficiary_name     text        NOT NULL,
    beneficiary_iban     text        NOT NULL,
    chain                bigint      NOT NULL,
    crypto_currency      text        NOT NULL,
    fiat_currency        text        NOT NULL,
    country              text        NOT NULL,
    crypto_amount        text,
    fiat_amount          text,
    rail                 text        NOT NULL,
    estimated_settlement text        NOT NULL,
    status               text        NOT NULL,
    quote_expires_at     timestamptz NOT NULL,
    created_at           timestamptz NOT NULL,
    CONSTRAINT payouts_quote_executes_once UNIQUE (quote_id),
    CONSTRAINT payouts_not_after_expiry CHECK (created_at < quote_expires_at),
    CONSTRAINT payouts_one_amount CHECK ((crypto_amount IS NULL) <> (fiat_amount IS NULL)),
    CONSTRAINT payouts_status CHECK (status IN ('pending'))
);
CREATE INDEX payouts_key_created ON payouts (key_id, created_at);

-- +goose StatementBegin
CREATE FUNCTION payouts_bound() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF (NEW.id, NEW.quote_id, NEW.key_id, NEW.beneficiary_name, NEW.beneficiary_iban, NEW.chain, NEW.crypto_currency,
        NEW.fiat_currency, NEW.country, NEW.crypto_amount, NEW.fiat_amount, NEW.rail, NEW.quote_expires_at, NEW.created_at)
       IS DISTINCT FROM
       (OLD.id, OLD.quote_id, OLD.key_id, OLD.beneficiary_name, OLD.beneficiary_iban, OLD.chain, OLD.crypto_currency,
        OLD.fiat_currency, OLD.country, OLD.crypto_amount, OLD.fiat_amount, OLD.rail, OLD.quote_expires_at, OLD.created_at) THEN
        RAISE EXCEPTION 'payout %: its quote, owner, beneficiary and amount never change', OLD.id;
    END IF;
    IF NEW.status <> OLD.status THEN
        RAISE EXCEPTION 'payout %: status % cannot follow %', OLD.id, NEW.status, OLD.status;
    END IF;
    RETURN NEW;
END
$$;
-- +goose StatementEnd
CREATE TRIGGER payouts_bound BEFORE UPDATE ON payouts FOR EACH ROW EXECUTE FUNCTION payouts_bound();

-- +goose Down
DROP TABLE payouts;
DROP FUNCTION payouts_bound();
