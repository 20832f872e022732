-- +goose Up
-- The embedded engine's form of postgres/00001 (times are fixed-width UTC text).
CREATE TABLE idempotency_keys (
    key_id       TEXT    NOT NULL,
    key_hash     TEXT    NOT NULL,
    fingerprint  TEXT    NOT NULL,
    seed         TEXT    NOT NULL,
    created_at   TEXT    NOT NULL,
    locked_until TEXT,
    finished_at  TEXT,
    status       INTEGER,
    body         BLOB,
    PRIMARY KEY (key_id, key_hash),
    CONSTRAINT idempotency_keys_claimed_or_finished CHECK ((locked_until IS NULL) <> (finished_at IS NULL)),
    CONSTRAINT idempotency_keys_answer_when_finished CHECK ((finished_at IS NULL) = (status IS NULL AND body IS NULL))
);
CREATE INDEX idempotency_keys_created_at ON idempotency_keys (created_at);

-- +goose StatementBegin
CREATE TRIGGER idempotency_keys_finished_is_final BEFORE UPDATE ON idempotency_keys
    FOR EACH ROW WHEN OLD.finished_at IS NOT NULL
BEGIN
    SELECT RAISE(ABORT, 'idempotency record is finished: its answer is final');
END;
-- +goose StatementEnd

-- +goose Down
DROP TABLE idempotency_keys;
