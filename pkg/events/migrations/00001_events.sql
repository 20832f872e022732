-- +goose Up
-- The events feed (DESIGN §9) of one service ({{feed}}: each service has
-- its own tables, and reads no other's): one row per status change of a
-- record this service owns, written in the transaction of the change. n orders the
-- rows as they were written; seq is the row's place in the feed, given by
-- the sequencer once the row's transaction has committed (NULL until
-- then), so a place is never given to a row that a later-committing
-- transaction could still put before it. data is the event's data as the
-- feed answers it ({"object": …, "previousStatus": …}), kept as its text.
CREATE TABLE {{feed}}_events (
    n          bigint      GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    seq        bigint,
    id         text        NOT NULL,
    key_id     text        NOT NULL,
    type       text        NOT NULL,
    object_id  text        NOT NULL,
    created_at timestamptz NOT NULL,
    data       json        NOT NULL,
    CONSTRAINT {{feed}}_events_id CHECK (id ~ '^evt_[0-9a-f]{32}$'),
    CONSTRAINT {{feed}}_events_type CHECK (type ~ '^[a-z_]+(\.[a-z_]+)+$')
);
-- A key's feed, in order: one index range per page.
CREATE UNIQUE INDEX {{feed}}_events_feed ON {{feed}}_events (key_id, seq) WHERE seq IS NOT NULL;
-- One object's events (the objectId filter).
CREATE INDEX {{feed}}_events_object ON {{feed}}_events (key_id, object_id, seq);
-- What the sequencer has yet to place.
CREATE INDEX {{feed}}_events_unsequenced ON {{feed}}_events (n) WHERE seq IS NULL;

-- The sequencer's row: the last place given. Whoever holds its lock
-- places rows; another replica skips the round.
CREATE TABLE {{feed}}_event_sequencer (
    one boolean PRIMARY KEY DEFAULT true CHECK (one),
    seq bigint  NOT NULL DEFAULT 0
);
INSERT INTO {{feed}}_event_sequencer DEFAULT VALUES;

-- How far retention has deleted a key's feed: a cursor before it has lost
-- events (410 cursor_expired).
CREATE TABLE {{feed}}_event_horizons (
    key_id          text   PRIMARY KEY,
    deleted_through bigint NOT NULL
);

-- +goose Down
DROP TABLE {{feed}}_event_horizons;
DROP TABLE {{feed}}_event_sequencer;
DROP TABLE {{feed}}_events;
