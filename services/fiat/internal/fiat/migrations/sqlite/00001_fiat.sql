-- +goose Up
-- The embedded engine's form of postgres/00001 (times are fixed-width UTC text).
CREATE TABLE fiat_accounts (
    id                   TEXT PRIMARY KEY,
    key_id               TEXT NOT NULL,
    provider_customer_id TEXT NOT NULL,
    consent_session_id   TEXT,
    created_at           TEXT NOT NULL,
    CONSTRAINT fiat_accounts_one_per_customer UNIQUE (provider_customer_id)
);

CREATE TABLE fiat_virtual_accounts (
    id                  TEXT PRIMARY KEY,
    key_id              TEXT NOT NULL,
    account_id          TEXT NOT NULL REFERENCES fiat_accounts (id),
    provider_account_id TEXT NOT NULL,
    currency            TEXT NOT NULL,
    created_at          TEXT NOT NULL,
    CONSTRAINT fiat_virtual_accounts_one_id_per_provider_account UNIQUE (provider_account_id)
);

CREATE TABLE fiat_deposits (
    id                      TEXT PRIMARY KEY,
    key_id                  TEXT NOT NULL,
    account_id              TEXT NOT NULL REFERENCES fiat_accounts (id),
    provider_instruction_id TEXT NOT NULL,
    created_at              TEXT NOT NULL,
    CONSTRAINT fiat_deposits_one_per_instruction UNIQUE (provider_instruction_id)
);

-- +goose StatementBegin
CREATE TRIGGER fiat_accounts_bound BEFORE UPDATE ON fiat_accounts FOR EACH ROW
    WHEN NEW.id IS NOT OLD.id OR NEW.key_id IS NOT OLD.key_id OR NEW.provider_customer_id IS NOT OLD.provider_customer_id
      OR NEW.created_at IS NOT OLD.created_at OR (NEW.consent_session_id IS NULL AND OLD.consent_session_id IS NOT NULL)
BEGIN
    SELECT RAISE(ABORT, 'only an account''s consent session may change');
END;
-- +goose StatementEnd
-- +goose StatementBegin
CREATE TRIGGER fiat_virtual_accounts_bound BEFORE UPDATE ON fiat_virtual_accounts FOR EACH ROW
BEGIN
    SELECT RAISE(ABORT, 'a virtual account record never changes');
END;
-- +goose StatementEnd
-- +goose StatementBegin
CREATE TRIGGER fiat_deposits_bound BEFORE UPDATE ON fiat_deposits FOR EACH ROW
BEGIN
    SELECT RAISE(ABORT, 'a deposit record never changes');
END;
-- +goose StatementEnd

-- +goose Down
DROP TABLE fiat_deposits;
DROP TABLE fiat_virtual_accounts;
DROP TABLE fiat_accounts;
