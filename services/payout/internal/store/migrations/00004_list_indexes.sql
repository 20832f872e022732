-- +goose Up
-- GET /v1/bank/payouts pages a key's payouts newest first by (created_at,
-- id), filtered by status or the partner's reference: an index for each,
-- so a page is an index range scan whatever the key holds (DESIGN §8).
CREATE INDEX payouts_key_page ON payouts (key_id, created_at DESC, id DESC);
CREATE INDEX payouts_key_status_page ON payouts (key_id, status, created_at DESC, id DESC);
CREATE INDEX payouts_key_reference_page ON payouts (key_id, reference, created_at DESC, id DESC) WHERE reference IS NOT NULL;
DROP INDEX payouts_key_created;

-- +goose Down
CREATE INDEX payouts_key_created ON payouts (key_id, created_at);
DROP INDEX payouts_key_page;
DROP INDEX payouts_key_status_page;
DROP INDEX payouts_key_reference_page;
