-- +goose Up
-- One row per Idempotency-Key of a partner key: claimed while its request
-- runs (locked_until), then the answer it got (finished_at, status, body),
-- kept 24 hours from created_at. A finished row is never changed again.
CREATE TABLE idempotency_keys (
    key_id       text        NOT NULL,
    key_hash     text        NOT NULL, -- SHA-256 of the client's key: never stored as sent
    fingerprint  text        NOT NULL, -- SHA-256 of method, path and body
    seed         text        NOT NULL, -- the ids of what the request makes derive from it
    created_at   timestamptz NOT NULL,
    locked_until timestamptz,
    finished_at  timestamptz,
    status       integer,
    body         bytea,
    PRIMARY KEY (key_id, key_hash),
    CONSTRAINT idempotency_keys_claimed_or_finished CHECK ((locked_until IS NULL) <> (finished_at IS NULL)),
    CONSTRAINT idempotency_keys_answer_when_finished CHECK ((finished_at IS NULL) = (status IS NULL AND body IS NULL))
);
CREATE INDEX idempotency_keys_created_at ON idempotency_keys (created_at);

-- +goose StatementBegin
CREATE FUNCTION idempotency_keys_finished_is_final() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    RAISE EXCEPTION 'idempotency record % is finished: its answer is final', OLD.key_hash;
END
$$;
-- +goose StatementEnd
CREATE TRIGGER idempotency_keys_finished_is_final BEFORE UPDATE ON idempotency_keys
    FOR EACH ROW WHEN (OLD.finished_at IS NOT NULL) EXECUTE FUNCTION idempotency_keys_finished_is_final();

-- +goose Down
DROP TABLE idempotency_keys;
DROP FUNCTION idempotency_keys_finished_is_final();
