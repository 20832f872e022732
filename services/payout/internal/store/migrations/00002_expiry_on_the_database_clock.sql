-- +goose Up
-- Whether a quote has expired when it is executed is decided by one clock,
-- PostgreSQL's (DESIGN §3): a payout's created_at is the database's now(),
-- whatever the replica that executes it reads on its own clock, and
-- payouts_not_after_expiry (created_at < quote_expires_at) holds against
-- it.
-- +goose StatementBegin
CREATE FUNCTION payouts_created_now() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    NEW.created_at := now();
    RETURN NEW;
END
$$;
-- +goose StatementEnd
CREATE TRIGGER payouts_created_now BEFORE INSERT ON payouts FOR EACH ROW EXECUTE FUNCTION payouts_created_now();

-- +goose Down
DROP TRIGGER payouts_created_now ON payouts;
DROP FUNCTION payouts_created_now();
