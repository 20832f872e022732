-- +goose Up
-- The on-ramp's records: our ids for the provider's customers, virtual
-- accounts and deposit instructions, and whose they are. Personal data
-- stays with the provider.
CREATE TABLE fiat_accounts (
    id                   text        PRIMARY KEY,
    key_id               text        NOT NULL,
    provider_customer_id text        NOT NULL,
    consent_session_id   text,
    created_at           timestamptz NOT NULL,
    CONSTRAINT fiat_accounts_one_per_customer UNIQUE (provider_customer_id)
);

CREATE TABLE fiat_virtual_accounts (
    id                  text        PRIMARY KEY,
    key_id              text        NOT NULL,
    account_id          text        NOT NULL REFERENCES fiat_accounts (id),
    provider_account_id text        NOT NULL,
    currency            text        NOT NULL,
    created_at          timestamptz NOT NULL,
    CONSTRAINT fiat_virtual_accounts_one_id_per_provider_account UNIQUE (provider_account_id)
);

CREATE TABLE fiat_deposits (
    id                      text        PRIMARY KEY,
    key_id                  text        NOT NULL,
    account_id              text        NOT NULL REFERENCES fiat_accounts (id),
    provider_instruction_id text        NOT NULL,
    created_at              timestamptz NOT NULL,
    CONSTRAINT fiat_deposits_one_per_instruction UNIQUE (provider_instruction_id)
);

-- +goose StatementBegin
-- A record's owner and its link to the provider never change; an account
-- may only move on to a newer consent session.
CREATE FUNCTION fiat_records_bound() RETURNS trigger LANGUAGE plpgsql AS $$
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
CREATE TRIGGER fiat_accounts_bound BEFORE UPDATE ON fiat_accounts FOR EACH ROW EXECUTE FUNCTION fiat_records_bound();
CREATE TRIGGER fiat_virtual_accounts_bound BEFORE UPDATE ON fiat_virtual_accounts FOR EACH ROW EXECUTE FUNCTION fiat_records_bound();
CREATE TRIGGER fiat_deposits_bound BEFORE UPDATE ON fiat_deposits FOR EACH ROW EXECUTE FUNCTION fiat_records_bound();

-- +goose Down
DROP TABLE fiat_deposits;
DROP TABLE fiat_virtual_accounts;
DROP TABLE fiat_accounts;
DROP FUNCTION fiat_records_bound();
