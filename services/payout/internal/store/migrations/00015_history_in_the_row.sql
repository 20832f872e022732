-- +goose Up
-- A payout's history is kept in its row as well, as two arrays in the
-- order it moved (statuses and their times), appended to by the row's own
-- triggers and never rewritten: a page of 100 payouts reads their rows
-- and nothing else for their history. Read from payout_history, one index
-- probe a payout, the history was two thirds of a page's shared buffers
-- (404 of 615 at 100,000 payouts; BenchmarkList). payout_history stays:
-- one row per status, which its key holds to once.
ALTER TABLE payouts
    ADD COLUMN history_statuses text[]        NOT NULL DEFAULT '{}',
    ADD COLUMN history_times    timestamptz[] NOT NULL DEFAULT '{}';

-- Payouts from before, in the order they moved: by time, and two moves of
-- one instant in the order of the arrows (processing before completed).
ALTER TABLE payouts DISABLE TRIGGER payouts_bound;
UPDATE payouts p SET history_statuses = h.statuses, history_times = h.times
    FROM (SELECT payout_id, array_agg(status ORDER BY at, step) AS statuses, array_agg(at ORDER BY at, step) AS times
        FROM (SELECT payout_id, status, at, array_position('{awaiting_deposit,processing,expired,completed,failed,returned}'::text[], status) AS step
            FROM payout_history) s
        GROUP BY payout_id) h
    WHERE h.payout_id = p.id;
ALTER TABLE payouts ENABLE TRIGGER payouts_bound;

-- +goose StatementBegin
CREATE OR REPLACE FUNCTION payouts_bound() RETURNS trigger LANGUAGE plpgsql AS $$
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
    -- What happened to it, and where its refunds go, are written once.
    IF (OLD.deposit_tx_hash IS NOT NULL AND NEW.deposit_tx_hash IS DISTINCT FROM OLD.deposit_tx_hash)
       OR (OLD.deposit_amount IS NOT NULL AND NEW.deposit_amount IS DISTINCT FROM OLD.deposit_amount)
       OR (OLD.handover_at IS NOT NULL AND NEW.handover_at IS DISTINCT FROM OLD.handover_at)
       OR (OLD.handed_over_at IS NOT NULL AND NEW.handed_over_at IS DISTINCT FROM OLD.handed_over_at)
       OR (OLD.completed_at IS NOT NULL AND NEW.completed_at IS DISTINCT FROM OLD.completed_at)
       OR (OLD.failure_reason IS NOT NULL AND NEW.failure_reason IS DISTINCT FROM OLD.failure_reason)
       OR (OLD.return_reason IS NOT NULL AND NEW.return_reason IS DISTINCT FROM OLD.return_reason)
       OR (OLD.return_code IS NOT NULL AND NEW.return_code IS DISTINCT FROM OLD.return_code)
       OR (OLD.provider_code IS NOT NULL AND NEW.provider_code IS DISTINCT FROM OLD.provider_code)
       OR (OLD.refund_address IS NOT NULL AND NEW.refund_address IS DISTINCT FROM OLD.refund_address)
       OR (OLD.sandbox_outcome IS NOT NULL AND NEW.sandbox_outcome IS DISTINCT FROM OLD.sandbox_outcome)
       OR (OLD.sandbox_reason IS NOT NULL AND NEW.sandbox_reason IS DISTINCT FROM OLD.sandbox_reason) THEN
        RAISE EXCEPTION 'payout %: what happened to it is never rewritten', OLD.id;
    END IF;
    IF NEW.status <> OLD.status AND (OLD.status, NEW.status) NOT IN (
        ('awaiting_deposit', 'processing'), ('awaiting_deposit', 'expired'), ('awaiting_deposit', 'failed'),
        ('processing', 'completed'), ('processing', 'failed'), ('completed', 'returned')) THEN
        RAISE EXCEPTION 'payout %: status % cannot follow %', OLD.id, NEW.status, OLD.status;
    END IF;
    -- Its history is appended to, by this trigger only (00015).
    IF (NEW.history_statuses, NEW.history_times) IS DISTINCT FROM (OLD.history_statuses, OLD.history_times) THEN
        RAISE EXCEPTION 'payout %: its history is never rewritten', OLD.id;
    END IF;
    IF NEW.status <> OLD.status THEN
        NEW.history_statuses := OLD.history_statuses || NEW.status;
        NEW.history_times := OLD.history_times || NEW.status_at;
    END IF;
    RETURN NEW;
END
$$;
-- +goose StatementEnd

-- +goose StatementBegin
CREATE OR REPLACE FUNCTION payouts_created_now() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    -- Whether a quote had expired is decided on the database's clock.
    NEW.created_at := now();
    -- Its history starts with its first status (00015).
    NEW.history_statuses := ARRAY[NEW.status];
    NEW.history_times := ARRAY[NEW.status_at];
    RETURN NEW;
END
$$;
-- +goose StatementEnd

-- +goose Down
-- +goose StatementBegin
CREATE OR REPLACE FUNCTION payouts_bound() RETURNS trigger LANGUAGE plpgsql AS $$
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
    -- What happened to it, and where its refunds go, are written once.
    IF (OLD.deposit_tx_hash IS NOT NULL AND NEW.deposit_tx_hash IS DISTINCT FROM OLD.deposit_tx_hash)
       OR (OLD.deposit_amount IS NOT NULL AND NEW.deposit_amount IS DISTINCT FROM OLD.deposit_amount)
       OR (OLD.handover_at IS NOT NULL AND NEW.handover_at IS DISTINCT FROM OLD.handover_at)
       OR (OLD.handed_over_at IS NOT NULL AND NEW.handed_over_at IS DISTINCT FROM OLD.handed_over_at)
       OR (OLD.completed_at IS NOT NULL AND NEW.completed_at IS DISTINCT FROM OLD.completed_at)
       OR (OLD.failure_reason IS NOT NULL AND NEW.failure_reason IS DISTINCT FROM OLD.failure_reason)
       OR (OLD.return_reason IS NOT NULL AND NEW.return_reason IS DISTINCT FROM OLD.return_reason)
       OR (OLD.return_code IS NOT NULL AND NEW.return_code IS DISTINCT FROM OLD.return_code)
       OR (OLD.provider_code IS NOT NULL AND NEW.provider_code IS DISTINCT FROM OLD.provider_code)
       OR (OLD.refund_address IS NOT NULL AND NEW.refund_address IS DISTINCT FROM OLD.refund_address)
       OR (OLD.sandbox_outcome IS NOT NULL AND NEW.sandbox_outcome IS DISTINCT FROM OLD.sandbox_outcome)
       OR (OLD.sandbox_reason IS NOT NULL AND NEW.sandbox_reason IS DISTINCT FROM OLD.sandbox_reason) THEN
        RAISE EXCEPTION 'payout %: what happened to it is never rewritten', OLD.id;
    END IF;
    IF NEW.status <> OLD.status AND (OLD.status, NEW.status) NOT IN (
        ('awaiting_deposit', 'processing'), ('awaiting_deposit', 'expired'), ('awaiting_deposit', 'failed'),
        ('processing', 'completed'), ('processing', 'failed'), ('completed', 'returned')) THEN
        RAISE EXCEPTION 'payout %: status % cannot follow %', OLD.id, NEW.status, OLD.status;
    END IF;
    RETURN NEW;
END
$$;
-- +goose StatementEnd

-- +goose StatementBegin
CREATE OR REPLACE FUNCTION payouts_created_now() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    -- Whether a quote had expired is decided on the database's clock.
    NEW.created_at := now();
    RETURN NEW;
END
$$;
-- +goose StatementEnd
ALTER TABLE payouts DROP COLUMN history_statuses, DROP COLUMN history_times;
