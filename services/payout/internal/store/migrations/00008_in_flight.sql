-- +goose Up
-- What the payout service's metrics count at each scrape (metrics.go):
-- the payouts in flight by status and rail, and the refunds owed, each
-- one small index.
CREATE INDEX payouts_in_flight ON payouts (status, rail, status_at) WHERE status IN ('awaiting_deposit', 'processing');
CREATE INDEX payout_refunds_owed ON payout_refunds (status) WHERE status IN ('awaiting_address', 'pending');

-- +goose Down
DROP INDEX payout_refunds_owed;
DROP INDEX payouts_in_flight;
