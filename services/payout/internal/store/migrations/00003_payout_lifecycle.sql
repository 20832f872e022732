-- +goose Up
-- The off-ramp, end to end (DESIGN §3). A payout's beneficiary is its
-- rail's fields (canonical JSON), it says where its stablecoins go
-- (deposit_address until deposit_expires_at), and its status moves along
-- the arrows below, each move with its history row in the same
-- transaction (a trigger writes it):
--   awaiting_deposit → processing → completed → returned
--   awaiting_deposit → expired
--   processing → failed
-- Payouts made before this were "pending" and had no deposit address: they
-- become awaiting_deposit, their deposit window 30 minutes from their
-- creation (so a read moves an old one to expired), with an address derived
-- from their id.
DROP TRIGGER payouts_bound ON payouts;
DROP FUNCTION payouts_bound();
ALTER TABLE payouts DROP CONSTRAINT payouts_status;
ALTER TABLE payouts
    ADD COLUMN beneficiary        text,
    ADD COLUMN reference          text,
    ADD COLUMN deposit_address    text,
    ADD COLUMN deposit_expires_at timestamptz,
    ADD COLUMN deposit_tx_hash    text,
    ADD COLUMN completed_at       timestamptz,
    ADD COLUMN failure_reason     text,
    ADD COLUMN return_reason      text,
    ADD COLUMN sandbox_outcome    text,
    ADD COLUMN sandbox_reason     text,
    ADD COLUMN status_at          timestamptz;
UPDATE payouts SET
    beneficiary = '{"name":' || to_json(beneficiary_name)::text || ',"iban":' || to_json(beneficiary_iban)::text || '}',
    status = 'awaiting_deposit',
    deposit_address = '0x' || substr(md5(id), 1, 32) || substr(md5(id || ':deposit'), 1, 8),
    deposit_expires_at = created_at + interval '30 minutes',
    status_at = created_at;
ALTER TABLE payouts DROP COLUMN beneficiary_iban;
ALTER TABLE payouts
    ALTER COLUMN beneficiary SET NOT NULL,
    ALTER COLUMN deposit_address SET NOT NULL,
    ALTER COLUMN deposit_expires_at SET NOT NULL,
    ALTER COLUMN status_at SET NOT NULL,
    ADD CONSTRAINT payouts_status CHECK (status IN ('awaiting_deposit', 'processing', 'completed', 'returned', 'expired', 'failed')),
    ADD CONSTRAINT payouts_reference CHECK (reference IS NULL OR length(reference) BETWEEN 1 AND 64),
    ADD CONSTRAINT payouts_deposit_arrived CHECK ((status IN ('awaiting_deposit', 'expired')) = (deposit_tx_hash IS NULL)),
    ADD CONSTRAINT payouts_completed_at CHECK ((status IN ('completed', 'returned')) = (completed_at IS NOT NULL)),
    ADD CONSTRAINT payouts_failure_reason CHECK ((status = 'failed') = (failure_reason IS NOT NULL)),
    ADD CONSTRAINT payouts_return_reason CHECK ((status = 'returned') = (return_reason IS NOT NULL));

-- Every status a payout has been in, once each, with when it got there.
CREATE TABLE payout_history (
    payout_id text        NOT NULL REFERENCES payouts (id),
    status    text        NOT NULL,
    at        timestamptz NOT NULL,
    PRIMARY KEY (payout_id, status)
);
INSERT INTO payout_history (payout_id, status, at) SELECT id, status, created_at FROM payouts;

-- +goose StatementBegin
CREATE FUNCTION payouts_bound() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF (NEW.id, NEW.quote_id, NEW.key_id, NEW.beneficiary_name, NEW.beneficiary, NEW.chain, NEW.crypto_currency,
        NEW.fiat_currency, NEW.country, NEW.crypto_amount, NEW.fiat_amount, NEW.rail, NEW.quote_expires_at, NEW.created_at,
        NEW.reference, NEW.deposit_address, NEW.deposit_expires_at)
       IS DISTINCT FROM
       (OLD.id, OLD.quote_id, OLD.key_id, OLD.beneficiary_name, OLD.beneficiary, OLD.chain, OLD.crypto_currency,
        OLD.fiat_currency, OLD.country, OLD.crypto_amount, OLD.fiat_amount, OLD.rail, OLD.quote_expires_at, OLD.created_at,
        OLD.reference, OLD.deposit_address, OLD.deposit_expires_at) THEN
        RAISE EXCEPTION 'payout %: its quote, owner, beneficiary, amount and deposit never change', OLD.id;
    END IF;
    IF (OLD.deposit_tx_hash IS NOT NULL AND NEW.deposit_tx_hash IS DISTINCT FROM OLD.deposit_tx_hash)
       OR (OLD.completed_at IS NOT NULL AND NEW.completed_at IS DISTINCT FROM OLD.completed_at)
       OR (OLD.failure_reason IS NOT NULL AND NEW.failure_reason IS DISTINCT FROM OLD.failure_reason)
       OR (OLD.return_reason IS NOT NULL AND NEW.return_reason IS DISTINCT FROM OLD.return_reason)
       OR (OLD.sandbox_outcome IS NOT NULL AND NEW.sandbox_outcome IS DISTINCT FROM OLD.sandbox_outcome)
       OR (OLD.sandbox_reason IS NOT NULL AND NEW.sandbox_reason IS DISTINCT FROM OLD.sandbox_reason) THEN
        RAISE EXCEPTION 'payout %: what happened to it is never rewritten', OLD.id;
    END IF;
    IF NEW.status <> OLD.status AND (OLD.status, NEW.status) NOT IN (
        ('awaiting_deposit', 'processing'), ('awaiting_deposit', 'expired'),
        ('processing', 'completed'), ('processing', 'failed'), ('completed', 'returned')) THEN
        RAISE EXCEPTION 'payout %: status % cannot follow %', OLD.id, NEW.status, OLD.status;
    END IF;
    RETURN NEW;
END
$$;
-- +goose StatementEnd
CREATE TRIGGER payouts_bound BEFORE UPDATE ON payouts FOR EACH ROW EXECUTE FUNCTION payouts_bound();

-- +goose StatementBegin
CREATE FUNCTION payouts_history() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP = 'INSERT' OR NEW.status <> OLD.status THEN
        INSERT INTO payout_history (payout_id, status, at) VALUES (NEW.id, NEW.status, NEW.status_at);
    END IF;
    RETURN NULL;
END
$$;
-- +goose StatementEnd
CREATE TRIGGER payouts_history AFTER INSERT OR UPDATE OF status ON payouts FOR EACH ROW EXECUTE FUNCTION payouts_history();

-- +goose Down
SELECT 1;
