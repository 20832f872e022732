-- +goose Up
-- Who moves an order: the service's worker, not a reader (DESIGN §3, §7).
-- status_at is when its status last changed; next_check_at when the
-- worker next asks the card provider about it (or closes its window), NULL
-- once it is final. The worker claims due rows with FOR UPDATE SKIP LOCKED
-- through an index of the orders in flight only.
ALTER TABLE orders ADD COLUMN status_at timestamptz, ADD COLUMN next_check_at timestamptz;
UPDATE orders SET status_at = created_at,
    next_check_at = CASE WHEN status IN ('completed', 'failed', 'expired') THEN NULL ELSE now() END;
ALTER TABLE orders ALTER COLUMN status_at SET NOT NULL;
CREATE INDEX orders_due ON orders (next_check_at) WHERE next_check_at IS NOT NULL;

-- +goose StatementBegin
-- An order's terms never change, and its status only moves forward:
-- awaiting → processing → completed or failed; awaiting → expired;
-- completed, failed and expired are final. When the worker next looks at
-- it is the worker's own.
CREATE OR REPLACE FUNCTION orders_forward_only() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    rank_old int := CASE OLD.status WHEN 'awaiting_payment' THEN 0 WHEN 'awaiting_deposit' THEN 0 WHEN 'processing' THEN 1 ELSE 2 END;
    rank_new int := CASE NEW.status WHEN 'awaiting_payment' THEN 0 WHEN 'awaiting_deposit' THEN 0 WHEN 'processing' THEN 1 ELSE 2 END;
BEGIN
    IF to_jsonb(NEW) - 'status' - 'payment_method' - 'tx_hash' - 'failure_reason' - 'status_at' - 'next_check_at'
       IS DISTINCT FROM to_jsonb(OLD) - 'status' - 'payment_method' - 'tx_hash' - 'failure_reason' - 'status_at' - 'next_check_at' THEN
        RAISE EXCEPTION 'order %: its terms never change', OLD.id;
    END IF;
    IF rank_old = 2 AND to_jsonb(NEW) - 'next_check_at' IS DISTINCT FROM to_jsonb(OLD) - 'next_check_at' THEN
        RAISE EXCEPTION 'order %: % is final', OLD.id, OLD.status;
    END IF;
    IF rank_new < rank_old OR (rank_new = rank_old AND NEW.status <> OLD.status) THEN
        RAISE EXCEPTION 'order %: % cannot follow %', OLD.id, NEW.status, OLD.status;
    END IF;
    IF NEW.status = 'expired' AND rank_old <> 0 THEN
        RAISE EXCEPTION 'order %: only an unpaid order expires', OLD.id;
    END IF;
    RETURN NEW;
END
$$;
-- +goose StatementEnd

-- +goose Down
DROP INDEX orders_due;
ALTER TABLE orders DROP COLUMN status_at, DROP COLUMN next_check_at;
-- +goose StatementBegin
CREATE OR REPLACE FUNCTION orders_forward_only() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    rank_old int := CASE OLD.status WHEN 'awaiting_payment' THEN 0 WHEN 'awaiting_deposit' THEN 0 WHEN 'processing' THEN 1 ELSE 2 END;
    rank_new int := CASE NEW.status WHEN 'awaiting_payment' THEN 0 WHEN 'awaiting_deposit' THEN 0 WHEN 'processing' THEN 1 ELSE 2 END;
BEGIN
    IF to_jsonb(NEW) - 'status' - 'payment_method' - 'tx_hash' - 'failure_reason'
       IS DISTINCT FROM to_jsonb(OLD) - 'status' - 'payment_method' - 'tx_hash' - 'failure_reason' THEN
        RAISE EXCEPTION 'order %: its terms never change', OLD.id;
    END IF;
    IF rank_old = 2 AND to_jsonb(NEW) IS DISTINCT FROM to_jsonb(OLD) THEN
        RAISE EXCEPTION 'order %: % is final', OLD.id, OLD.status;
    END IF;
    IF rank_new < rank_old OR (rank_new = rank_old AND NEW.status <> OLD.status) THEN
        RAISE EXCEPTION 'order %: % cannot follow %', OLD.id, NEW.status, OLD.status;
    END IF;
    IF NEW.status = 'expired' AND rank_old <> 0 THEN
        RAISE EXCEPTION 'order %: only an unpaid order expires', OLD.id;
    END IF;
    RETURN NEW;
END
$$;
-- +goose StatementEnd
