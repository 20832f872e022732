-- +goose Up
-- The partner's own reference on every record, what the lists answer, and
-- the indexes they page by (DESIGN §8).
-- An account keeps the status last read from the provider (the accounts
-- list brings a page's unsettled ones up to date); a row from before this
-- migration has none until then.
ALTER TABLE fiat_accounts
    ADD COLUMN status text CONSTRAINT fiat_accounts_status CHECK (status IN ('consent_required', 'identity_pending', 'active', 'rejected')),
    ADD COLUMN reference text CONSTRAINT fiat_accounts_reference CHECK (length(reference) BETWEEN 1 AND 64);
-- A virtual account is active from its creation; V1 closes none.
ALTER TABLE fiat_virtual_accounts
    ADD COLUMN status text NOT NULL DEFAULT 'active' CONSTRAINT fiat_virtual_accounts_status CHECK (status = 'active'),
    ADD COLUMN reference text CONSTRAINT fiat_virtual_accounts_reference CHECK (length(reference) BETWEEN 1 AND 64);
-- A one-off deposit keeps its instruction (none of it personal: the
-- collection account's details, the amount and the transfer's reference)
-- and its funding, which moves once, from awaiting_deposit to funded.
ALTER TABLE fiat_deposits
    ADD COLUMN status text NOT NULL DEFAULT 'awaiting_deposit' CONSTRAINT fiat_deposits_status CHECK (status IN ('awaiting_deposit', 'funded')),
    ADD COLUMN amount text,
    ADD COLUMN currency text,
    ADD COLUMN iban text,
    ADD COLUMN bic text,
    ADD COLUMN beneficiary text,
    ADD COLUMN transfer_reference text,
    ADD COLUMN expires_at timestamptz,
    ADD COLUMN reference text CONSTRAINT fiat_deposits_reference CHECK (length(reference) BETWEEN 1 AND 64);

CREATE INDEX fiat_accounts_key_page ON fiat_accounts (key_id, created_at DESC, id DESC);
CREATE INDEX fiat_accounts_key_status_page ON fiat_accounts (key_id, status, created_at DESC, id DESC);
CREATE INDEX fiat_accounts_key_reference_page ON fiat_accounts (key_id, reference, created_at DESC, id DESC) WHERE reference IS NOT NULL;
CREATE INDEX fiat_virtual_accounts_key_page ON fiat_virtual_accounts (key_id, created_at DESC, id DESC);
CREATE INDEX fiat_virtual_accounts_key_reference_page ON fiat_virtual_accounts (key_id, reference, created_at DESC, id DESC) WHERE reference IS NOT NULL;
CREATE INDEX fiat_deposits_key_page ON fiat_deposits (key_id, created_at DESC, id DESC);
CREATE INDEX fiat_deposits_key_status_page ON fiat_deposits (key_id, status, created_at DESC, id DESC);
CREATE INDEX fiat_deposits_key_reference_page ON fiat_deposits (key_id, reference, created_at DESC, id DESC) WHERE reference IS NOT NULL;

-- +goose StatementBegin
-- A record's owner, its link to the provider and what it was created with
-- never change. An account may move on to a newer consent session and take
-- the provider's newest status; a deposit's funding moves only forward.
CREATE OR REPLACE FUNCTION fiat_records_bound() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF to_jsonb(NEW) - 'consent_session_id' - 'status' IS DISTINCT FROM to_jsonb(OLD) - 'consent_session_id' - 'status' THEN
        RAISE EXCEPTION '% %: only an account''s consent session and a status may change', TG_TABLE_NAME, OLD.id;
    END IF;
    -- Each table's own rule, its fields named only in its branch (plpgsql
    -- does not short-circuit a condition).
    IF TG_TABLE_NAME = 'fiat_accounts' THEN
        IF NEW.consent_session_id IS NULL AND OLD.consent_session_id IS NOT NULL THEN
            RAISE EXCEPTION 'account %: its consent session cannot be unset', OLD.id;
        END IF;
        IF NEW.status IS NULL AND OLD.status IS NOT NULL THEN
            RAISE EXCEPTION 'account %: its status cannot be unset', OLD.id;
        END IF;
    ELSIF TG_TABLE_NAME = 'fiat_deposits' THEN
        IF OLD.status = 'funded' AND NEW.status <> 'funded' THEN
            RAISE EXCEPTION 'deposit %: a funded deposit stays funded', OLD.id;
        END IF;
    END IF;
    RETURN NEW;
END
$$;
-- +goose StatementEnd

-- +goose Down
-- +goose StatementBegin
CREATE OR REPLACE FUNCTION fiat_records_bound() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF to_jsonb(NEW) - 'consent_session_id' IS DISTINCT FROM to_jsonb(OLD) - 'consent_session_id' THEN
        RAISE EXCEPTION '% %: only an account''s consent session may change', TG_TABLE_NAME, OLD.id;
    END IF;
    IF TG_TABLE_NAME = 'fiat_accounts' AND NEW.consent_session_id IS NULL AND OLD.consent_session_id IS NOT NULL THEN
        RAISE EXCEPTION 'account %: its consent session cannot be unset', OLD.id;
    END IF;
    RETURN NEW;
END
$$;
-- +goose StatementEnd
DROP INDEX fiat_accounts_key_page, fiat_accounts_key_status_page, fiat_accounts_key_reference_page,
    fiat_virtual_accounts_key_page, fiat_virtual_accounts_key_reference_page,
    fiat_deposits_key_page, fiat_deposits_key_status_page, fiat_deposits_key_reference_page;
ALTER TABLE fiat_accounts DROP COLUMN status, DROP COLUMN reference;
ALTER TABLE fiat_virtual_accounts DROP COLUMN status, DROP COLUMN reference;
ALTER TABLE fiat_deposits DROP COLUMN status, DROP COLUMN amount, DROP COLUMN currency, DROP COLUMN iban, DROP COLUMN bic,
    DROP COLUMN beneficiary, DROP COLUMN transfer_reference, DROP COLUMN expires_at, DROP COLUMN reference;
