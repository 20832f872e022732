-- +goose Up
-- The embedded engine's form of postgres/00004.
CREATE INDEX payouts_key_page ON payouts (key_id, created_at DESC, id DESC);
CREATE INDEX payouts_key_status_page ON payouts (key_id, status, created_at DESC, id DESC);
CREATE INDEX payouts_key_reference_page ON payouts (key_id, reference, created_at DESC, id DESC) WHERE reference IS NOT NULL;
DROP INDEX payouts_key_created;

-- +goose Down
CREATE INDEX payouts_key_created ON payouts (key_id, created_at);
DROP INDEX payouts_key_page;
DROP INDEX payouts_key_status_page;
DROP INDEX payouts_key_reference_page;
