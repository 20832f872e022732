-- +goose Up
-- Refunds leave on chain, exactly once (DESIGN §10; turn 7: a refund was
-- `sent` with a random hash one settle after it was pending, and nothing
-- was signed or broadcast).
--
-- A refund is `sent` once a node took its transaction (txHash, sentAt) and
-- `confirmed` once the chain mined it with its confirmations
-- (confirmedAt). While it is `sent`, its txHash may change: a transaction
-- not mined in time is replaced at the same nonce with a higher fee, and
-- the refund carries the version the chain mines.
ALTER TABLE payout_refunds ADD COLUMN confirmed_at timestamptz;
ALTER TABLE payout_refunds DROP CONSTRAINT payout_refunds_status;
ALTER TABLE payout_refunds ADD CONSTRAINT payout_refunds_status CHECK (status IN ('awaiting_address', 'pending', 'sent', 'confirmed'));
ALTER TABLE payout_refunds DROP CONSTRAINT payout_refunds_sent;
ALTER TABLE payout_refunds ADD CONSTRAINT payout_refunds_sent
    CHECK ((status IN ('sent', 'confirmed')) = (tx_hash IS NOT NULL AND sent_at IS NOT NULL));
ALTER TABLE payout_refunds ADD CONSTRAINT payout_refunds_confirmed CHECK ((status = 'confirmed') = (confirmed_at IS NOT NULL));
CREATE INDEX payout_refunds_by_chain_to_send ON payout_refunds (chain, pending_at) WHERE status = 'pending';

-- +goose StatementBegin
CREATE OR REPLACE FUNCTION payout_refunds_bound() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF (NEW.id, NEW.payout_id, NEW.reason, NEW.amount, NEW.crypto_currency, NEW.chain, NEW.deposit_tx_hash, NEW.created_at)
       IS DISTINCT FROM (OLD.id, OLD.payout_id, OLD.reason, OLD.amount, OLD.crypto_currency, OLD.chain, OLD.deposit_tx_hash, OLD.created_at)
       OR (OLD.address IS NOT NULL AND NEW.address IS DISTINCT FROM OLD.address)
       OR (OLD.pending_at IS NOT NULL AND NEW.pending_at IS DISTINCT FROM OLD.pending_at)
       OR (OLD.sent_at IS NOT NULL AND NEW.sent_at IS DISTINCT FROM OLD.sent_at)
       -- A sent refund's hash follows its transaction's replacements until
       -- one is confirmed; then nothing changes.
       OR (OLD.status = 'confirmed' AND (NEW.tx_hash, NEW.confirmed_at) IS DISTINCT FROM (OLD.tx_hash, OLD.confirmed_at)) THEN
        RAISE EXCEPTION 'refund %: what it returns, and where, never change', OLD.id;
    END IF;
    IF NEW.status <> OLD.status AND (OLD.status, NEW.status) NOT IN (('awaiting_address', 'pending'), ('pending', 'sent'), ('sent', 'confirmed')) THEN
        RAISE EXCEPTION 'refund %: status % cannot follow %', OLD.id, NEW.status, OLD.status;
    END IF;
    RETURN NEW;
END
$$;
-- +goose StatementEnd

-- Every transaction a wallet of ours sends is a send: one nonce of one
-- sender, taken for one purpose (a refund from the treasury), kept with
-- its signed transaction in the database transaction that takes the
-- nonce, before anything is broadcast (intent first: after a crash the
-- same signed transaction is broadcast again, never a second one).
--
-- state: signed (kept; no node has taken it yet) → broadcast (a node took
-- it; its refund is sent) → confirmed (mined with the chain's
-- confirmations; its refund is confirmed). A send whose nonce the chain
-- spent without it (mined and reverted, or another transaction of the
-- wallet took the nonce) is dropped, and its refund signed again at a new
-- nonce.
CREATE TABLE payout_chain_nonces (
    chain  bigint NOT NULL,
    sender text   NOT NULL CHECK (sender ~ '^0x[0-9a-f]{40}$'),
    next   bigint NOT NULL CHECK (next >= 0),
    PRIMARY KEY (chain, sender)
);

CREATE TABLE payout_chain_sends (
    chain        bigint      NOT NULL,
    sender       text        NOT NULL CHECK (sender ~ '^0x[0-9a-f]{40}$'),
    nonce        bigint      NOT NULL CHECK (nonce >= 0),
    purpose      text        NOT NULL CHECK (purpose IN ('refund')),
    refund_id    text        REFERENCES payout_refunds (id),
    token        text        NOT NULL CHECK (token ~ '^0x[0-9a-f]{40}$'),
    recipient    text        NOT NULL CHECK (recipient ~ '^0x[0-9a-f]{40}$'),
    units        numeric     NOT NULL CHECK (units > 0),
    state        text        NOT NULL CHECK (state IN ('signed', 'broadcast', 'confirmed', 'dropped')),
    created_at   timestamptz NOT NULL,
    broadcast_at timestamptz,
    mined_hash   text        CHECK (mined_hash ~ '^0x[0-9a-f]{64}$'),
    mined_block  bigint,
    confirmed_at timestamptz,
    PRIMARY KEY (chain, sender, nonce),
    CONSTRAINT payout_chain_sends_refund CHECK ((purpose = 'refund') = (refund_id IS NOT NULL)),
    CONSTRAINT payout_chain_sends_broadcast CHECK ((state IN ('signed', 'dropped')) OR broadcast_at IS NOT NULL),
    CONSTRAINT payout_chain_sends_confirmed CHECK ((state = 'confirmed') = (mined_hash IS NOT NULL AND mined_block IS NOT NULL AND confirmed_at IS NOT NULL))
);
-- One live send per refund: a refund is sent once.
CREATE UNIQUE INDEX payout_chain_sends_one_per_refund ON payout_chain_sends (refund_id) WHERE state <> 'dropped';
CREATE INDEX payout_chain_sends_open ON payout_chain_sends (chain, sender, nonce) WHERE state IN ('signed', 'broadcast');
CREATE INDEX payout_chain_sends_dropped ON payout_chain_sends (chain) WHERE state = 'dropped';

-- Each signing of a send: the first, and every replacement at the same
-- nonce with a higher fee. Whichever the chain mines is the send's.
CREATE TABLE payout_chain_send_versions (
    hash      text        PRIMARY KEY CHECK (hash ~ '^0x[0-9a-f]{64}$'),
    chain     bigint      NOT NULL,
    sender    text        NOT NULL,
    nonce     bigint      NOT NULL,
    raw       bytea       NOT NULL,
    gas       bigint      NOT NULL CHECK (gas > 0),
    tip_cap   numeric     NOT NULL CHECK (tip_cap >= 0),
    fee_cap   numeric     NOT NULL CHECK (fee_cap >= tip_cap),
    signed_at timestamptz NOT NULL,
    FOREIGN KEY (chain, sender, nonce) REFERENCES payout_chain_sends (chain, sender, nonce)
);
CREATE INDEX payout_chain_send_versions_send ON payout_chain_send_versions (chain, sender, nonce, signed_at);

-- +goose StatementBegin
CREATE FUNCTION payout_chain_sends_bound() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF (NEW.chain, NEW.sender, NEW.nonce, NEW.purpose, NEW.refund_id, NEW.token, NEW.recipient, NEW.units, NEW.created_at)
       IS DISTINCT FROM (OLD.chain, OLD.sender, OLD.nonce, OLD.purpose, OLD.refund_id, OLD.token, OLD.recipient, OLD.units, OLD.created_at) THEN
        RAISE EXCEPTION 'send %/%: what it sends, and where, never change', OLD.sender, OLD.nonce;
    END IF;
    IF NEW.state <> OLD.state AND (OLD.state, NEW.state) NOT IN (('signed', 'broadcast'), ('signed', 'dropped'), ('broadcast', 'confirmed'), ('broadcast', 'dropped')) THEN
        RAISE EXCEPTION 'send %/%: state % cannot follow %', OLD.sender, OLD.nonce, NEW.state, OLD.state;
    END IF;
    RETURN NEW;
END
$$;
-- +goose StatementEnd
CREATE TRIGGER payout_chain_sends_bound BEFORE UPDATE ON payout_chain_sends FOR EACH ROW EXECUTE FUNCTION payout_chain_sends_bound();

-- +goose Down
-- +goose StatementBegin
DO $$ BEGIN RAISE EXCEPTION 'payout migration 00011 (refunds on chain) is not reversed'; END $$;
-- +goose StatementEnd
