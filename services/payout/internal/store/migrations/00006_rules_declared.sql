-- +goose Up
-- One written form per rule, the one the database enforces (DESIGN §6):
-- what a declaration can say is a named CHECK again, as in 00003, under the
-- same names and errors (23514 check_violation naming the constraint). A
-- CHECK holds under session_replication_role = replica (pg_restore
-- --disable-triggers, logical replication's apply), shows in \d and
-- pg_dump, and is checked against the rows already there when it is added;
-- the trigger of 00005 did none of that. A trigger keeps only what a
-- declaration cannot say: created_at is the database's now() (00002), an
-- executed payout's terms and what happened to it never change, and its
-- status moves only along the arrows (lifecycle.PayoutMoves). 00005's
-- trigger saved about 0.2 ms of the INSERT; a whole payout request is far
-- from that statement's rate.
DROP TRIGGER payouts_rules ON payouts;
DROP FUNCTION payouts_rules();

ALTER TABLE payouts
    ADD CONSTRAINT payouts_not_after_expiry CHECK (created_at < quote_expires_at),
    ADD CONSTRAINT payouts_one_amount CHECK ((crypto_amount IS NULL) <> (fiat_amount IS NULL)),
    ADD CONSTRAINT payouts_status CHECK (status IN ('awaiting_deposit', 'processing', 'completed', 'returned', 'expired', 'failed')),
    ADD CONSTRAINT payouts_reference CHECK (reference IS NULL OR length(reference) BETWEEN 1 AND 64),
    ADD CONSTRAINT payouts_deposit_arrived CHECK ((status IN ('awaiting_deposit', 'expired')) = (deposit_tx_hash IS NULL)),
    ADD CONSTRAINT payouts_completed_at CHECK ((status IN ('completed', 'returned')) = (completed_at IS NOT NULL)),
    ADD CONSTRAINT payouts_failure_reason CHECK ((status = 'failed') = (failure_reason IS NOT NULL)),
    ADD CONSTRAINT payouts_return_reason CHECK ((status = 'returned') = (return_reason IS NOT NULL));

-- +goose StatementBegin
CREATE FUNCTION payouts_created_now() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    -- Whether a quote had expired is decided on the database's clock.
    NEW.created_at := now();
    RETURN NEW;
END
$$;
-- +goose StatementEnd
CREATE TRIGGER payouts_created_now BEFORE INSERT ON payouts FOR EACH ROW EXECUTE FUNCTION payouts_created_now();

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

-- +goose Down
-- Not reversed: going back to 00005 would leave the rules to a trigger
-- again (see above). Restore from a backup taken before 00006 instead.
-- +goose StatementBegin
DO $$ BEGIN RAISE EXCEPTION 'payout migration 00006 (the rules as CHECK constraints) is not reversed'; END $$;
-- +goose StatementEnd
