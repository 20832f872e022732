-- +goose Up
-- The card provider's side of an order (its id, set when the order is
-- opened and never after), and the hosted card page links minted for it:
-- one is current, the rest no longer count; each is redeemed once.
ALTER TABLE orders ADD COLUMN provider_order_id text;

CREATE TABLE order_links (
    id                  text        PRIMARY KEY,
    order_id            text        NOT NULL REFERENCES orders (id),
    provider_session_id text        NOT NULL,
    return_url          text,
    is_current          boolean     NOT NULL,
    created_at          timestamptz NOT NULL,
    used_at             timestamptz
);
CREATE UNIQUE INDEX order_links_one_current ON order_links (order_id) WHERE is_current;

-- +goose StatementBegin
CREATE FUNCTION order_links_used_once() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF OLD.used_at IS NOT NULL AND NEW.used_at IS DISTINCT FROM OLD.used_at THEN
        RAISE EXCEPTION 'order link %: already used', OLD.id;
    END IF;
    IF to_jsonb(NEW) - 'is_current' - 'used_at' IS DISTINCT FROM to_jsonb(OLD) - 'is_current' - 'used_at'
       OR (NEW.is_current AND NOT OLD.is_current) THEN
        RAISE EXCEPTION 'order link %: a link never changes, and a superseded one stays so', OLD.id;
    END IF;
    RETURN NEW;
END
$$;
-- +goose StatementEnd
CREATE TRIGGER order_links_used_once BEFORE UPDATE ON order_links FOR EACH ROW EXECUTE FUNCTION order_links_used_once();

-- +goose Down
DROP TABLE order_links;
DROP FUNCTION order_links_used_once();
ALTER TABLE orders DROP COLUMN provider_order_id;
