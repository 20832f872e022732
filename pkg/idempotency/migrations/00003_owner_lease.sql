-- +goose Up
-- A claim carries its owner (a token of the attempt that holds it) and a
-- short lease (locked_until) that the owner renews while it works: a retry
-- that finds the lease run out (its owner died) takes the claim over within
-- seconds. The owner's later writes (its answer, its release) match on the
-- owner, so an attempt whose claim was taken over can no longer write.
ALTER TABLE idempotency_keys ADD COLUMN owner text;

-- +goose Down
ALTER TABLE idempotency_keys DROP COLUMN owner;
