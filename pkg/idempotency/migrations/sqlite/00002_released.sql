-- +goose Up
-- The embedded engine's form of postgres/00002.
ALTER TABLE idempotency_keys ADD COLUMN released_at TEXT;

-- +goose Down
ALTER TABLE idempotency_keys DROP COLUMN released_at;
