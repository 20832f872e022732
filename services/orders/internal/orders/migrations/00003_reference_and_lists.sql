-- +goose Up
-- The partner's own reference on an order, and the indexes GET /v1/orders
-- pages by (DESIGN §8). The terms trigger compares the whole row but for
-- what moves, so the reference never changes either.
ALTER TABLE orders ADD COLUMN reference text CONSTRAINT orders_reference CHECK (reference IS NULL OR length(reference) BETWEEN 1 AND 64);
CREATE INDEX orders_key_page ON orders (key_id, created_at DESC, id DESC);
CREATE INDEX orders_key_status_page ON orders (key_id, status, created_at DESC, id DESC);
CREATE INDEX orders_key_reference_page ON orders (key_id, reference, created_at DESC, id DESC) WHERE reference IS NOT NULL;
DROP INDEX orders_key;

-- +goose Down
CREATE INDEX orders_key ON orders (key_id);
DROP INDEX orders_key_page;
DROP INDEX orders_key_status_page;
DROP INDEX orders_key_reference_page;
ALTER TABLE orders DROP COLUMN reference;
