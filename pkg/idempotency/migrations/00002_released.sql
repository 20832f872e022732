-- +goose Up
-- A claim whose request answered without making anything is released, not
-- deleted: released_at is set and the claim unlocked. The same request
-- retried takes it over with its seed, so it makes the same ids (a provider
-- call keyed by them after a failed commit is not made twice); another
-- request with the key starts afresh.
ALTER TABLE idempotency_keys ADD COLUMN released_at timestamptz;

-- +goose Down
ALTER TABLE idempotency_keys DROP COLUMN released_at;
