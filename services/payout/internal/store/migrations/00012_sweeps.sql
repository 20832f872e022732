-- +goose Up
-- Deposits are swept home (DESIGN §10): a deposit that is final (its
-- payout completed, failed, returned or expired with every refund it owes
-- confirmed, or its own refund confirmed) is moved from its deposit
-- address to the treasury, so funds never rest in many small places and
-- the treasury pays the refunds.
--
-- A sweep moves the final, unswept deposits of one token at one deposit
-- address: their sum, never the address's whole balance (a deposit not yet
-- final stays where it landed). One open sweep per address at a time (its
-- transfer takes the address's own next nonce). state: funding (the
-- address needs gas for its transfer: the treasury sends it, a send of
-- purpose 'gas') → funded (the address can pay its transfer's gas) →
-- sweeping (its transfer signed and kept before the broadcast) → swept
-- (mined with the chain's confirmations). A transfer that reverts sends
-- the sweep back to funding.
CREATE TABLE payout_sweeps (
    id            bigserial   PRIMARY KEY,
    chain         bigint      NOT NULL,
    address       text        NOT NULL CHECK (address ~ '^0x[0-9a-f]{40}$'),
    deposit_index bigint      NOT NULL CHECK (deposit_index >= 0),
    token         text        NOT NULL CHECK (token ~ '^0x[0-9a-f]{40}$'),
    units         numeric     NOT NULL CHECK (units > 0),
    state         text        NOT NULL CHECK (state IN ('funding', 'funded', 'sweeping', 'swept')),
    gas           bigint      CHECK (gas > 0),
    raw           bytea,
    tx_hash       text        CHECK (tx_hash ~ '^0x[0-9a-f]{64}$'),
    created_at    timestamptz NOT NULL,
    swept_at      timestamptz,
    CONSTRAINT payout_sweeps_funded CHECK ((state = 'funding') OR gas IS NOT NULL),
    CONSTRAINT payout_sweeps_signed CHECK ((state IN ('sweeping', 'swept')) = (raw IS NOT NULL AND tx_hash IS NOT NULL)),
    CONSTRAINT payout_sweeps_swept CHECK ((state = 'swept') = (swept_at IS NOT NULL))
);
CREATE UNIQUE INDEX payout_sweeps_one_open_per_address ON payout_sweeps (chain, address) WHERE state <> 'swept';
CREATE INDEX payout_sweeps_open ON payout_sweeps (chain, state, id) WHERE state <> 'swept';

-- Which sweep took a deposit: each is swept once.
ALTER TABLE payout_deposits ADD COLUMN sweep_id bigint REFERENCES payout_sweeps (id);
CREATE INDEX payout_deposits_unswept ON payout_deposits (chain, recorded_at) WHERE sweep_id IS NULL;

-- A send of the treasury is a refund, or gas for a sweep (its token the
-- zero address: the chain's native coin; its units wei).
ALTER TABLE payout_chain_sends ADD COLUMN sweep_id bigint REFERENCES payout_sweeps (id);
ALTER TABLE payout_chain_sends DROP CONSTRAINT payout_chain_sends_purpose_check;
ALTER TABLE payout_chain_sends ADD CONSTRAINT payout_chain_sends_purpose_check CHECK (purpose IN ('refund', 'gas'));
ALTER TABLE payout_chain_sends DROP CONSTRAINT payout_chain_sends_refund;
ALTER TABLE payout_chain_sends ADD CONSTRAINT payout_chain_sends_refund CHECK ((purpose = 'refund') = (refund_id IS NOT NULL));
ALTER TABLE payout_chain_sends ADD CONSTRAINT payout_chain_sends_sweep CHECK ((purpose = 'gas') = (sweep_id IS NOT NULL));
CREATE UNIQUE INDEX payout_chain_sends_one_per_sweep ON payout_chain_sends (sweep_id) WHERE state <> 'dropped';

-- +goose StatementBegin
CREATE OR REPLACE FUNCTION payout_chain_sends_bound() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF (NEW.chain, NEW.sender, NEW.nonce, NEW.purpose, NEW.refund_id, NEW.sweep_id, NEW.token, NEW.recipient, NEW.units, NEW.created_at)
       IS DISTINCT FROM (OLD.chain, OLD.sender, OLD.nonce, OLD.purpose, OLD.refund_id, OLD.sweep_id, OLD.token, OLD.recipient, OLD.units, OLD.created_at) THEN
        RAISE EXCEPTION 'send %/%: what it sends, and where, never change', OLD.sender, OLD.nonce;
    END IF;
    IF NEW.state <> OLD.state AND (OLD.state, NEW.state) NOT IN (('signed', 'broadcast'), ('signed', 'dropped'), ('broadcast', 'confirmed'), ('broadcast', 'dropped')) THEN
        RAISE EXCEPTION 'send %/%: state % cannot follow %', OLD.sender, OLD.nonce, NEW.state, OLD.state;
    END IF;
    RETURN NEW;
END
$$;
-- +goose StatementEnd

-- +goose Down
-- +goose StatementBegin
DO $$ BEGIN RAISE EXCEPTION 'payout migration 00012 (sweeps) is not reversed'; END $$;
-- +goose StatementEnd
