-- +goose Up
-- The payout moves on its own, and its stablecoins always have a way home
-- (DESIGN §3).
--
-- The hand-over, exactly once, never forgotten: a deposit that may pay the
-- payout is recorded with our intent to hand the payout over
-- (handover_at), in one transaction, before the provider is called; the
-- provider's confirmation is handed_over_at. A payout is never processing
-- (or further) without it, and no window expires a payout whose hand-over
-- was recorded.
--
-- Who moves it: the service's worker, not a reader. next_check_at is when
-- the worker next looks at a payout (its window's end, the provider's
-- word); NULL when nothing will move it again. The worker claims due rows
-- with FOR UPDATE SKIP LOCKED, through an index of the rows in flight only.
ALTER TABLE payouts
    ADD COLUMN refund_address text,
    ADD COLUMN deposit_amount text,
    ADD COLUMN handover_at    timestamptz,
    ADD COLUMN handed_over_at timestamptz,
    ADD COLUMN return_code    text,
    ADD COLUMN next_check_at  timestamptz;

-- Payouts from before: the ones past awaiting_deposit were handed over
-- when they moved to processing.
UPDATE payouts p SET handover_at = h.at, handed_over_at = h.at
    FROM payout_history h WHERE h.payout_id = p.id AND h.status = 'processing';
UPDATE payouts SET next_check_at = CASE
    WHEN status = 'awaiting_deposit' THEN deposit_expires_at
    WHEN status IN ('processing', 'completed') THEN now()
END;

ALTER TABLE payouts
    DROP CONSTRAINT payouts_deposit_arrived,
    -- The deposit the payout is paid from (or that fell short) arrived
    -- before anything beyond awaiting_deposit; an expired payout took none
    -- (a late deposit is refunded, never the payout's).
    ADD CONSTRAINT payouts_deposit_arrived CHECK (CASE status
        WHEN 'awaiting_deposit' THEN true
        WHEN 'expired' THEN deposit_tx_hash IS NULL
        ELSE deposit_tx_hash IS NOT NULL END),
    ADD CONSTRAINT payouts_handover_after_deposit CHECK (handover_at IS NULL OR deposit_tx_hash IS NOT NULL),
    ADD CONSTRAINT payouts_handed_over_after_intent CHECK (handed_over_at IS NULL OR handover_at IS NOT NULL),
    -- Never processing without the provider having it.
    ADD CONSTRAINT payouts_processing_handed_over CHECK (status NOT IN ('processing', 'completed', 'returned') OR handed_over_at IS NOT NULL),
    -- (No window expires a payout whose hand-over was recorded: an expired
    -- payout took no deposit, payouts_deposit_arrived, and a hand-over
    -- needs one, payouts_handover_after_deposit.)
    -- A short deposit is never handed over.
    ADD CONSTRAINT payouts_short_not_handed_over CHECK (failure_reason IS DISTINCT FROM 'deposit_short' OR handover_at IS NULL),
    ADD CONSTRAINT payouts_return_code CHECK (return_code IS NULL OR return_reason IS NOT NULL),
    ADD CONSTRAINT payouts_refund_address CHECK (refund_address IS NULL OR refund_address ~ '^0x[0-9a-fA-F]{40}$'),
    ADD CONSTRAINT payouts_deposit_amount CHECK (deposit_amount IS NULL OR deposit_amount ~ '^[0-9]+(\.[0-9]+)?$');

CREATE INDEX payouts_due ON payouts (next_check_at) WHERE next_check_at IS NOT NULL;

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

-- The stablecoins always have a way home: what a payout owes back, each
-- refund written in the transaction of what caused it, once per cause (a
-- deposit, and why it is returned). awaiting_address → pending → sent.
CREATE TABLE payout_refunds (
    id              text        PRIMARY KEY,
    payout_id       text        NOT NULL REFERENCES payouts (id),
    reason          text        NOT NULL,
    status          text        NOT NULL,
    amount          text        NOT NULL,
    crypto_currency text        NOT NULL,
    chain           bigint      NOT NULL,
    deposit_tx_hash text        NOT NULL, -- the deposit it returns (all or part of)
    address         text,
    tx_hash         text,
    created_at      timestamptz NOT NULL,
    pending_at      timestamptz,
    sent_at         timestamptz,
    CONSTRAINT payout_refunds_once_per_cause UNIQUE (payout_id, reason, deposit_tx_hash),
    CONSTRAINT payout_refunds_reason CHECK (reason IN ('payout_failed', 'payout_returned', 'deposit_late', 'deposit_short',
        'deposit_excess', 'deposit_wrong_token')),
    CONSTRAINT payout_refunds_status CHECK (status IN ('awaiting_address', 'pending', 'sent')),
    CONSTRAINT payout_refunds_amount CHECK (amount ~ '^[0-9]+(\.[0-9]+)?$'),
    CONSTRAINT payout_refunds_address CHECK ((status = 'awaiting_address') = (address IS NULL)
        AND (address IS NULL OR address ~ '^0x[0-9a-fA-F]{40}$')),
    CONSTRAINT payout_refunds_pending_at CHECK ((status = 'awaiting_address') = (pending_at IS NULL)),
    CONSTRAINT payout_refunds_sent CHECK ((status = 'sent') = (tx_hash IS NOT NULL AND sent_at IS NOT NULL))
);
CREATE INDEX payout_refunds_payout ON payout_refunds (payout_id);
CREATE INDEX payout_refunds_to_send ON payout_refunds (pending_at) WHERE status = 'pending';

-- +goose StatementBegin
CREATE FUNCTION payout_refunds_bound() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF (NEW.id, NEW.payout_id, NEW.reason, NEW.amount, NEW.crypto_currency, NEW.chain, NEW.deposit_tx_hash, NEW.created_at)
       IS DISTINCT FROM (OLD.id, OLD.payout_id, OLD.reason, OLD.amount, OLD.crypto_currency, OLD.chain, OLD.deposit_tx_hash, OLD.created_at)
       OR (OLD.address IS NOT NULL AND NEW.address IS DISTINCT FROM OLD.address)
       OR (OLD.pending_at IS NOT NULL AND NEW.pending_at IS DISTINCT FROM OLD.pending_at)
       OR (OLD.tx_hash IS NOT NULL AND NEW.tx_hash IS DISTINCT FROM OLD.tx_hash) THEN
        RAISE EXCEPTION 'refund %: what it returns, and where, never change', OLD.id;
    END IF;
    IF NEW.status <> OLD.status AND (OLD.status, NEW.status) NOT IN (('awaiting_address', 'pending'), ('pending', 'sent')) THEN
        RAISE EXCEPTION 'refund %: status % cannot follow %', OLD.id, NEW.status, OLD.status;
    END IF;
    RETURN NEW;
END
$$;
-- +goose StatementEnd
CREATE TRIGGER payout_refunds_bound BEFORE UPDATE ON payout_refunds FOR EACH ROW EXECUTE FUNCTION payout_refunds_bound();

-- +goose Down
-- +goose StatementBegin
DO $$ BEGIN RAISE EXCEPTION 'payout migration 00007 (the hand-over, the worker, refunds) is not reversed'; END $$;
-- +goose StatementEnd
