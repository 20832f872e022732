-- +goose Up
-- A payout's history is kept in its row as well, as two arrays in the
-- order it moved (statuses and their times), appended to by the row's own
-- trigger and never rewritten: a page of 100 payouts reads their rows
-- and nothing else for their history. Read from payout_history, one index
-- probe a payout, the history was two thirds of a page's shared buffers
-- (404 of 615 at 100,000 payouts; BenchmarkList). payout_history stays:
-- one row per status, which its key holds to once.
ALTER TABLE payouts
    ADD COLUMN history_statuses text[]        NOT NULL DEFAULT '{}',
    ADD COLUMN history_times    timestamptz[] NOT NULL DEFAULT '{}';

-- Payouts from before, in the order they moved: by time, and two moves of
-- one instant in the order of the arrows (processing before completed).
-- The rules' trigger has nothing to check here (only the new columns are
-- written): it is off for the fill, which then costs one pass.
ALTER TABLE payouts DISABLE TRIGGER payouts_bound;
UPDATE payouts p SET history_statuses = h.statuses, history_times = h.times
    FROM (SELECT payout_id, array_agg(status ORDER BY at, step) AS statuses, array_agg(at ORDER BY at, step) AS times
        FROM (SELECT payout_id, status, at, array_position('{awaiting_deposit,processing,expired,completed,failed,returned}'::text[], status) AS step
            FROM payout_history) s
        GROUP BY payout_id) h
    WHERE h.payout_id = p.id;
ALTER TABLE payouts ENABLE TRIGGER payouts_bound;

-- +goose StatementBegin
CREATE FUNCTION payouts_history_kept() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP = 'INSERT' THEN
        NEW.history_statuses := ARRAY[NEW.status];
        NEW.history_times := ARRAY[NEW.status_at];
        RETURN NEW;
    END IF;
    IF (NEW.history_statuses, NEW.history_times) IS DISTINCT FROM (OLD.history_statuses, OLD.history_times) THEN
        RAISE EXCEPTION 'payout %: its history is never rewritten', OLD.id;
    END IF;
    IF NEW.status <> OLD.status THEN
        NEW.history_statuses := OLD.history_statuses || NEW.status;
        NEW.history_times := OLD.history_times || NEW.status_at;
    END IF;
    RETURN NEW;
END
$$;
-- +goose StatementEnd
CREATE TRIGGER payouts_history_kept BEFORE INSERT OR UPDATE ON payouts FOR EACH ROW EXECUTE FUNCTION payouts_history_kept();

-- +goose Down
DROP TRIGGER payouts_history_kept ON payouts;
DROP FUNCTION payouts_history_kept();
ALTER TABLE payouts DROP COLUMN history_statuses, DROP COLUMN history_times;
