-- +goose Up
-- The embedded engine's form of postgres/00002; its triggers name their
-- columns, so they are made anew.
ALTER TABLE fiat_accounts ADD COLUMN status TEXT CHECK (status IN ('consent_required', 'identity_pending', 'active', 'rejected'));
ALTER TABLE fiat_accounts ADD COLUMN reference TEXT CHECK (length(reference) BETWEEN 1 AND 64);
ALTER TABLE fiat_virtual_accounts ADD COLUMN status TEXT NOT NULL DEFAULT 'active' CHECK (status = 'active');
ALTER TABLE fiat_virtual_accounts ADD COLUMN reference TEXT CHECK (length(reference) BETWEEN 1 AND 64);
ALTER TABLE fiat_deposits ADD COLUMN status TEXT NOT NULL DEFAULT 'awaiting_deposit' CHECK (status IN ('awaiting_deposit', 'funded'));
ALTER TABLE fiat_deposits ADD COLUMN amount TEXT;
ALTER TABLE fiat_deposits ADD COLUMN currency TEXT;
ALTER TABLE fiat_deposits ADD COLUMN iban TEXT;
ALTER TABLE fiat_deposits ADD COLUMN bic TEXT;
ALTER TABLE fiat_deposits ADD COLUMN beneficiary TEXT;
ALTER TABLE fiat_deposits ADD COLUMN transfer_reference TEXT;
ALTER TABLE fiat_deposits ADD COLUMN expires_at TEXT;
ALTER TABLE fiat_deposits ADD COLUMN reference TEXT CHECK (length(reference) BETWEEN 1 AND 64);

CREATE INDEX fiat_accounts_key_page ON fiat_accounts (key_id, created_at DESC, id DESC);
CREATE INDEX fiat_accounts_key_status_page ON fiat_accounts (key_id, status, created_at DESC, id DESC);
CREATE INDEX fiat_accounts_key_reference_page ON fiat_accounts (key_id, reference, created_at DESC, id DESC) WHERE reference IS NOT NULL;
CREATE INDEX fiat_virtual_accounts_key_page ON fiat_virtual_accounts (key_id, created_at DESC, id DESC);
CREATE INDEX fiat_virtual_accounts_key_reference_page ON fiat_virtual_accounts (key_id, reference, created_at DESC, id DESC) WHERE reference IS NOT NULL;
CREATE INDEX fiat_deposits_key_page ON fiat_deposits (key_id, created_at DESC, id DESC);
CREATE INDEX fiat_deposits_key_status_page ON fiat_deposits (key_id, status, created_at DESC, id DESC);
CREATE INDEX fiat_deposits_key_reference_page ON fiat_deposits (key_id, reference, created_at DESC, id DESC) WHERE reference IS NOT NULL;

DROP TRIGGER fiat_accounts_bound;
DROP TRIGGER fiat_deposits_bound;
-- +goose StatementBegin
CREATE TRIGGER fiat_accounts_bound BEFORE UPDATE ON fiat_accounts FOR EACH ROW
    WHEN NEW.id IS NOT OLD.id OR NEW.key_id IS NOT OLD.key_id OR NEW.provider_customer_id IS NOT OLD.provider_customer_id
      OR NEW.created_at IS NOT OLD.created_at OR NEW.reference IS NOT OLD.reference
      OR (NEW.consent_session_id IS NULL AND OLD.consent_session_id IS NOT NULL)
      OR (NEW.status IS NULL AND OLD.status IS NOT NULL)
BEGIN
    SELECT RAISE(ABORT, 'only an account''s consent session and status may change');
END;
-- +goose StatementEnd
-- +goose StatementBegin
CREATE TRIGGER fiat_deposits_bound BEFORE UPDATE ON fiat_deposits FOR EACH ROW
    WHEN NEW.id IS NOT OLD.id OR NEW.key_id IS NOT OLD.key_id OR NEW.account_id IS NOT OLD.account_id
      OR NEW.provider_instruction_id IS NOT OLD.provider_instruction_id OR NEW.created_at IS NOT OLD.created_at
      OR NEW.amount IS NOT OLD.amount OR NEW.currency IS NOT OLD.currency OR NEW.iban IS NOT OLD.iban OR NEW.bic IS NOT OLD.bic
      OR NEW.beneficiary IS NOT OLD.beneficiary OR NEW.transfer_reference IS NOT OLD.transfer_reference
      OR NEW.expires_at IS NOT OLD.expires_at OR NEW.reference IS NOT OLD.reference
      OR (OLD.status = 'funded' AND NEW.status IS NOT 'funded')
BEGIN
    SELECT RAISE(ABORT, 'only a deposit''s funding may change, and only forward');
END;
-- +goose StatementEnd

-- +goose Down
SELECT 1;
