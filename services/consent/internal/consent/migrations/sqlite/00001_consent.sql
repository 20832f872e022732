-- +goose Up
-- The embedded engine's form of postgres/00001 (times are fixed-width UTC text).
CREATE TABLE consent_sessions (
    id                   TEXT PRIMARY KEY,
    key_id               TEXT NOT NULL,
    account_id           TEXT NOT NULL,
    provider_customer_id TEXT NOT NULL,
    state                TEXT NOT NULL,
    result               TEXT,
    current_attempt      TEXT,
    created_at           TEXT NOT NULL,
    returned_at          TEXT,
    CONSTRAINT consent_sessions_state CHECK (state IN ('pending', 'returned')),
    CONSTRAINT consent_sessions_result CHECK (result IN ('accepted', 'declined')),
    CONSTRAINT consent_sessions_returned_with_result CHECK ((state = 'returned') = (result IS NOT NULL AND returned_at IS NOT NULL))
);

CREATE TABLE consent_attempts (
    id                  TEXT PRIMARY KEY,
    session_id          TEXT NOT NULL REFERENCES consent_sessions (id),
    provider_session_id TEXT NOT NULL,
    return_url          TEXT,
    created_at          TEXT NOT NULL,
    used_at             TEXT
);
CREATE INDEX consent_attempts_session ON consent_attempts (session_id);

-- +goose StatementBegin
CREATE TRIGGER consent_sessions_forward_only BEFORE UPDATE ON consent_sessions FOR EACH ROW
    WHEN NEW.id IS NOT OLD.id OR NEW.key_id IS NOT OLD.key_id OR NEW.account_id IS NOT OLD.account_id
      OR NEW.provider_customer_id IS NOT OLD.provider_customer_id OR NEW.created_at IS NOT OLD.created_at
      OR (OLD.state = 'returned' AND (NEW.state IS NOT OLD.state OR NEW.result IS NOT OLD.result OR NEW.returned_at IS NOT OLD.returned_at))
BEGIN
    SELECT RAISE(ABORT, 'a consent session moves only forward: returned is final');
END;
-- +goose StatementEnd
-- +goose StatementBegin
CREATE TRIGGER consent_attempts_used_once BEFORE UPDATE ON consent_attempts FOR EACH ROW
    WHEN OLD.used_at IS NOT NULL OR NEW.id IS NOT OLD.id OR NEW.session_id IS NOT OLD.session_id
      OR NEW.provider_session_id IS NOT OLD.provider_session_id OR NEW.return_url IS NOT OLD.return_url
      OR NEW.created_at IS NOT OLD.created_at
BEGIN
    SELECT RAISE(ABORT, 'a consent attempt is redeemed at most once');
END;
-- +goose StatementEnd

-- +goose Down
DROP TABLE consent_attempts;
DROP TABLE consent_sessions;
