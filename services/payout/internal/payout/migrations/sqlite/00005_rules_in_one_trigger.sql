-- +goose Up
-- postgres/00005 moves the payout's CHECK constraints into a trigger, for
-- PostgreSQL's sake (it plans each CHECK again for every statement). The
-- embedded engine keeps them as CHECK constraints, under the same names:
-- nothing to change. Kept so that both engines stand at the same version.
SELECT 1;

-- +goose Down
SELECT 1;
