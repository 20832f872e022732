-- +goose Up
-- A page of events is filled to half when they are written: the other
-- half takes each event's new version when the sequencer places it. An
-- update within its page writes to the WAL only the bytes that changed
-- (the place, not the kilobyte of data), and the dead version's space is
-- taken back at the page's next read; an update to another page writes
-- the whole row again. WAL per placed event: 1,517 B before, 305 B after
-- (TestPlacingAnEventWritesLessWALThanWritingIt, 1 KB events); the table
-- holds half as many events a page. The place cannot be a HOT update:
-- seq is what the feed's indexes are ordered by.
ALTER TABLE {{feed}}_events SET (fillfactor = 50);

-- +goose Down
ALTER TABLE {{feed}}_events RESET (fillfactor);
