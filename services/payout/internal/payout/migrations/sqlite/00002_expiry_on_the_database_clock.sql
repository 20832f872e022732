-- +goose Up
-- The embedded engine has no clock but the process's, which is the one
-- that sets created_at (database.DB.Now): nothing to change. Kept so that
-- both engines stand at the same version.
SELECT 1;

-- +goose Down
SELECT 1;
