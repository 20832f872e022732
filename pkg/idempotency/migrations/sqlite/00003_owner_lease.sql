-- +goose Up
-- The embedded engine's form of postgres/00003.
ALTER TABLE idempotency_keys ADD COLUMN owner TEXT;

-- +goose Down
ALTER TABLE idempotency_keys DROP COLUMN owner;
