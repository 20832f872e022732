-- +goose Up
-- The embedded engine's form of postgres/00002.
ALTER TABLE orders ADD COLUMN provider_order_id TEXT;

-- +goose StatementBegin
CREATE TRIGGER orders_provider_fixed BEFORE UPDATE ON orders FOR EACH ROW
    WHEN NEW.provider_order_id IS NOT OLD.provider_order_id
BEGIN
    SELECT RAISE(ABORT, 'an order''s terms never change and its status moves only forward');
END;
-- +goose StatementEnd

CREATE TABLE order_links (
    id                  TEXT    PRIMARY KEY,
    order_id            TEXT    NOT NULL REFERENCES orders (id),
    provider_session_id TEXT    NOT NULL,
    return_url          TEXT,
    is_current          INTEGER NOT NULL,
    created_at          TEXT    NOT NULL,
    used_at             TEXT
);
CREATE UNIQUE INDEX order_links_one_current ON order_links (order_id) WHERE is_current;

-- +goose StatementBegin
CREATE TRIGGER order_links_used_once BEFORE UPDATE ON order_links FOR EACH ROW
    WHEN (OLD.used_at IS NOT NULL AND NEW.used_at IS NOT OLD.used_at)
      OR NEW.id IS NOT OLD.id OR NEW.order_id IS NOT OLD.order_id OR NEW.provider_session_id IS NOT OLD.provider_session_id
      OR NEW.return_url IS NOT OLD.return_url OR NEW.created_at IS NOT OLD.created_at
      OR (NEW.is_current AND NOT OLD.is_current)
BEGIN
    SELECT RAISE(ABORT, 'an order link never changes, is used once, and a superseded one stays so');
END;
-- +goose StatementEnd

-- +goose Down
DROP TABLE order_links;
DROP TRIGGER orders_provider_fixed;
