-- +goose Up
-- The worker follows the provider's changes, not every payout (DESIGN §3,
-- turn 6: one next_check_at for everything polled each completed payout
-- for returns for 60 days, and new payouts waited behind that backlog).
--
-- Separate queues, each with its own due time and index, so none waits
-- behind another's backlog:
--   - expiry: an awaiting_deposit payout without a hand-over, by its
--     deposit_expires_at (payouts_expiring);
--   - hand-over: handover_next_at, from the deposit's arrival until the
--     provider confirms it (a lease while a call is out, then its backoff);
--   - reconciliation: reconcile_at, a processing payout whose change has
--     not come well after its rail's settlement, asked about at a decaying
--     rate, reconcile_checks times at most;
--   - refunds: payout_refunds_to_send, as before.
-- The provider's changes feed is followed from payout_provider_feed (the
-- last change applied), and each change is applied once, by its id
-- (payout_provider_changes), in the transaction that moves its payout.
-- retry_at and failures back off a payout that one of the queues could
-- not move (the database refused it), alone: the rest of the round moves.
ALTER TABLE payouts
    ADD COLUMN provider_code        text,
    ADD COLUMN handover_next_at     timestamptz,
    ADD COLUMN reconcile_at         timestamptz,
    ADD COLUMN reconcile_checks     integer     NOT NULL DEFAULT 0,
    ADD COLUMN provider_missing_at  timestamptz,
    ADD COLUMN retry_at             timestamptz,
    ADD COLUMN failures             integer     NOT NULL DEFAULT 0,
    -- The provider's own code for a failure or return we do not list
    -- (failureReason provider_rejected, returnReason returned_by_bank).
    ADD CONSTRAINT payouts_provider_code CHECK (provider_code IS NULL OR provider_code ~ '^[A-Za-z0-9_.-]{1,32}$'),
    ADD CONSTRAINT payouts_reconcile_checks CHECK (reconcile_checks >= 0 AND failures >= 0);

UPDATE payouts SET handover_next_at = now() WHERE handover_at IS NOT NULL AND handed_over_at IS NULL;
UPDATE payouts SET reconcile_at = now() WHERE status = 'processing';
DROP INDEX payouts_due;
ALTER TABLE payouts DROP COLUMN next_check_at;

CREATE INDEX payouts_expiring ON payouts (deposit_expires_at) WHERE status = 'awaiting_deposit' AND handover_at IS NULL;
CREATE INDEX payouts_handover_due ON payouts (handover_next_at) WHERE handover_next_at IS NOT NULL;
CREATE INDEX payouts_reconcile_due ON payouts (reconcile_at) WHERE reconcile_at IS NOT NULL;
CREATE INDEX payouts_missing_at_provider ON payouts (provider_missing_at) WHERE provider_missing_at IS NOT NULL;
-- Two payouts never share a deposit address, and a refund address is
-- checked against ours (DESIGN §3).
ALTER TABLE payouts ADD CONSTRAINT payouts_deposit_address_unique UNIQUE (deposit_address);

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

-- Another deposit to a payout that took one, or to a final one, is
-- refunded: a chain cannot refuse a transfer (deposit_unexpected).
ALTER TABLE payout_refunds
    DROP CONSTRAINT payout_refunds_reason,
    ADD CONSTRAINT payout_refunds_reason CHECK (reason IN ('payout_failed', 'payout_returned', 'deposit_late', 'deposit_short',
        'deposit_excess', 'deposit_wrong_token', 'deposit_unexpected')),
    -- A refund the worker could not send is backed off alone.
    ADD COLUMN retry_at timestamptz,
    ADD COLUMN failures integer NOT NULL DEFAULT 0;

-- Where the worker is in the provider's changes feed: the last change it
-- applied ('' before the first).
-- A replica reads the next page under a lease (lease_owner until
-- leased_until), with no lock held while it calls the provider.
CREATE TABLE payout_provider_feed (
    provider     text        PRIMARY KEY,
    after        text        NOT NULL,
    updated_at   timestamptz NOT NULL,
    lease_owner  text,
    leased_until timestamptz
);
INSERT INTO payout_provider_feed (provider, after, updated_at) VALUES ('bank', '', now());

-- The provider's changes applied, each once (a feed read again after a
-- crash between a change and the feed's place finds them here), kept 30
-- days.
CREATE TABLE payout_provider_changes (
    change_id  text        PRIMARY KEY,
    payout_id  text        NOT NULL,
    applied_at timestamptz NOT NULL
);
CREATE INDEX payout_provider_changes_applied_at ON payout_provider_changes (applied_at);

-- The keyed binding survives a zone (turn 6: with the primary and the
-- Redis master lost together and a lagging Redis replica promoted, the
-- quote's closed mark was gone and another beneficiary's execution took
-- it). A keyed execution binds its quote to its beneficiary here, in a
-- commit that waits for the synchronous standby, before it claims its
-- Idempotency-Key: whatever survives of the claim, the binding survives
-- too, and a payout of the quote to another beneficiary is refused by the
-- insert itself. Kept two days (a quote lives a minute).
CREATE TABLE payout_quote_holds (
    quote_id           text        PRIMARY KEY,
    beneficiary_digest text        NOT NULL,
    held_at            timestamptz NOT NULL
);
CREATE INDEX payout_quote_holds_held_at ON payout_quote_holds (held_at);

-- +goose Down
-- +goose StatementBegin
DO $$ BEGIN RAISE EXCEPTION 'payout migration 00009 (the worker''s queues) is not reversed'; END $$;
-- +goose StatementEnd
