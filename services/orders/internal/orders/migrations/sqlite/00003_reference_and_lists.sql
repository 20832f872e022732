-- +goose Up
-- The embedded engine's form of postgres/00003; its terms trigger names
-- its columns, so it is made anew with the reference among them.
ALTER TABLE orders ADD COLUMN reference TEXT CHECK (reference IS NULL OR length(reference) BETWEEN 1 AND 64);
CREATE INDEX orders_key_page ON orders (key_id, created_at DESC, id DESC);
CREATE INDEX orders_key_status_page ON orders (key_id, status, created_at DESC, id DESC);
CREATE INDEX orders_key_reference_page ON orders (key_id, reference, created_at DESC, id DESC) WHERE reference IS NOT NULL;
DROP INDEX orders_key;
DROP TRIGGER orders_forward_only;

-- +goose StatementBegin
CREATE TRIGGER orders_forward_only BEFORE UPDATE ON orders FOR EACH ROW
    WHEN NEW.id IS NOT OLD.id OR NEW.key_id IS NOT OLD.key_id OR NEW.direction IS NOT OLD.direction
      OR NEW.crypto_currency IS NOT OLD.crypto_currency OR NEW.chain IS NOT OLD.chain
      OR NEW.fiat_currency IS NOT OLD.fiat_currency OR NEW.country IS NOT OLD.country
      OR NEW.crypto_amount IS NOT OLD.crypto_amount OR NEW.fiat_amount IS NOT OLD.fiat_amount
      OR NEW.wallet_address IS NOT OLD.wallet_address OR NEW.deposit_address IS NOT OLD.deposit_address
      OR NEW.expires_at IS NOT OLD.expires_at OR NEW.created_at IS NOT OLD.created_at OR NEW.reference IS NOT OLD.reference
      OR (OLD.status IN ('completed', 'failed', 'expired') AND (NEW.status IS NOT OLD.status
          OR NEW.payment_method IS NOT OLD.payment_method OR NEW.tx_hash IS NOT OLD.tx_hash OR NEW.failure_reason IS NOT OLD.failure_reason))
      OR (OLD.status = 'processing' AND NEW.status IN ('awaiting_payment', 'awaiting_deposit', 'expired'))
      OR (OLD.status IN ('awaiting_payment', 'awaiting_deposit') AND NEW.status IN ('awaiting_payment', 'awaiting_deposit') AND NEW.status IS NOT OLD.status)
BEGIN
    SELECT RAISE(ABORT, 'an order''s terms never change and its status moves only forward');
END;
-- +goose StatementEnd

-- +goose Down
SELECT 1;
