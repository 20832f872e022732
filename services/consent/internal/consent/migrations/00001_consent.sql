-- +goose Up
-- Consent sessions and the links minted for them. A session moves only
-- forward (pending, then returned with the provider's decision, final);
-- an attempt (a minted link) is redeemed at most once, and only while it
-- is its session's current one.
CREATE TABLE consent_sessions (
    id                   text        PRIMARY KEY,
    key_id               text        NOT NULL,
    account_id           text        NOT NULL,
    provider_customer_id text        NOT NULL,
    state                text        NOT NULL,
    result               text,
    current_attempt      text,
    created_at           timestamptz NOT NULL,
    returned_at          timestamptz,
    CONSTRAINT consent_sessions_state CHECK (state IN ('pending', 'returned')),
    CONSTRAINT consent_sessions_result CHECK (result IN ('accepted', 'declined')),
    CONSTRAINT consent_sessions_returned_with_result CHECK ((state = 'returned') = (result IS NOT NULL AND returned_at IS NOT NULL))
);

CREATE TABLE consent_attempts (
    id                  text        PRIMARY KEY,
    session_id          text        NOT NULL REFERENCES consent_sessions (id),
    provider_session_id text        NOT NULL,
    return_url          text,
    created_at          timestamptz NOT NULL,
    used_at             timestamptz
);
CREATE INDEX consent_attempts_session ON consent_attempts (session_id);

-- +goose StatementBegin
CREATE FUNCTION consent_sessions_forward_only() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF (NEW.id, NEW.key_id, NEW.account_id, NEW.provider_customer_id, NEW.created_at)
       IS DISTINCT FROM (OLD.id, OLD.key_id, OLD.account_id, OLD.provider_customer_id, OLD.created_at) THEN
        RAISE EXCEPTION 'consent session %: its owner and account never change', OLD.id;
    END IF;
    IF OLD.state = 'returned' AND (NEW.state, NEW.result, NEW.returned_at) IS DISTINCT FROM (OLD.state, OLD.result, OLD.returned_at) THEN
        RAISE EXCEPTION 'consent session %: returned is final', OLD.id;
    END IF;
    RETURN NEW;
END
$$;
CREATE FUNCTION consent_attempts_used_once() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF OLD.used_at IS NOT NULL OR (NEW.id, NEW.session_id, NEW.provider_session_id, NEW.return_url, NEW.created_at)
       IS DISTINCT FROM (OLD.id, OLD.session_id, OLD.provider_session_id, OLD.return_url, OLD.created_at) THEN
        RAISE EXCEPTION 'consent attempt %: redeemed at most once, never changed', OLD.id;
    END IF;
    RETURN NEW;
END
$$;
-- +goose StatementEnd
CREATE TRIGGER consent_sessions_forward_only BEFORE UPDATE ON consent_sessions FOR EACH ROW EXECUTE FUNCTION consent_sessions_forward_only();
CREATE TRIGGER consent_attempts_used_once BEFORE UPDATE ON consent_attempts FOR EACH ROW EXECUTE FUNCTION consent_attempts_used_once();

-- +goose Down
DROP TABLE consent_attempts;
DROP TABLE consent_sessions;
DROP FUNCTION consent_sessions_forward_only();
DROP FUNCTION consent_attempts_used_once();
