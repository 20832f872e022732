-- +goose Up
-- Who moves the on-ramp's records: the service's worker, not a reader
-- (DESIGN §3). It asks the bank provider about every record still in
-- flight (an account's identity check, a virtual account's or a one-off
-- deposit's transactions) and keeps its word here; every status call and
-- list answers from these rows alone. next_check_at is when the worker next
-- asks (NULL: never again); status_at and changed_at are when the record
-- last changed, which sets its pace. The worker claims due rows with FOR
-- UPDATE SKIP LOCKED through indexes of the rows in flight only.
ALTER TABLE fiat_accounts ADD COLUMN status_at timestamptz, ADD COLUMN next_check_at timestamptz;
UPDATE fiat_accounts SET status_at = created_at,
    next_check_at = CASE WHEN status IN ('active', 'rejected') THEN NULL ELSE now() END;
ALTER TABLE fiat_accounts ALTER COLUMN status_at SET NOT NULL;

-- A virtual account's and a deposit's transactions: the provider's raw
-- records, as it last listed them (the funding status adds them up).
ALTER TABLE fiat_virtual_accounts
    ADD COLUMN transactions jsonb NOT NULL DEFAULT '[]' CONSTRAINT fiat_virtual_accounts_transactions CHECK (jsonb_typeof(transactions) = 'array'),
    ADD COLUMN changed_at timestamptz, ADD COLUMN next_check_at timestamptz;
UPDATE fiat_virtual_accounts SET changed_at = created_at, next_check_at = now();
ALTER TABLE fiat_virtual_accounts ALTER COLUMN changed_at SET NOT NULL;

ALTER TABLE fiat_deposits
    ADD COLUMN transactions jsonb NOT NULL DEFAULT '[]' CONSTRAINT fiat_deposits_transactions CHECK (jsonb_typeof(transactions) = 'array'),
    ADD COLUMN changed_at timestamptz, ADD COLUMN next_check_at timestamptz;
UPDATE fiat_deposits SET changed_at = created_at, next_check_at = CASE WHEN status = 'funded' THEN NULL ELSE now() END;
ALTER TABLE fiat_deposits ALTER COLUMN changed_at SET NOT NULL;

CREATE INDEX fiat_accounts_due ON fiat_accounts (next_check_at) WHERE next_check_at IS NOT NULL;
CREATE INDEX fiat_virtual_accounts_due ON fiat_virtual_accounts (next_check_at) WHERE next_check_at IS NOT NULL;
CREATE INDEX fiat_deposits_due ON fiat_deposits (next_check_at) WHERE next_check_at IS NOT NULL;

-- +goose StatementBegin
-- A record's owner, its link to the provider and what it was created with
-- never change. An account may move on to a newer consent session and take
-- the provider's newest status; a deposit's funding moves only forward;
-- the provider's word (transactions) and the worker's pace are the
-- worker's.
CREATE OR REPLACE FUNCTION fiat_records_bound() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF to_jsonb(NEW) - 'consent_session_id' - 'status' - 'status_at' - 'transactions' - 'changed_at' - 'next_check_at'
       IS DISTINCT FROM to_jsonb(OLD) - 'consent_session_id' - 'status' - 'status_at' - 'transactions' - 'changed_at' - 'next_check_at' THEN
        RAISE EXCEPTION '% %: only an account''s consent session, a status and the provider''s word may change', TG_TABLE_NAME, OLD.id;
    END IF;
    -- Each table's own rule, its fields named only in its branch (plpgsql
    -- does not short-circuit a condition).
    IF TG_TABLE_NAME = 'fiat_accounts' THEN
        IF NEW.consent_session_id IS NULL AND OLD.consent_session_id IS NOT NULL THEN
            RAISE EXCEPTION 'account %: its consent session cannot be unset', OLD.id;
        END IF;
        IF NEW.status IS NULL AND OLD.status IS NOT NULL THEN
            RAISE EXCEPTION 'account %: its status cannot be unset', OLD.id;
        END IF;
    ELSIF TG_TABLE_NAME = 'fiat_deposits' THEN
        IF OLD.status = 'funded' AND NEW.status <> 'funded' THEN
            RAISE EXCEPTION 'deposit %: a funded deposit stays funded', OLD.id;
        END IF;
    END IF;
    RETURN NEW;
END
$$;
-- +goose StatementEnd

-- +goose Down
-- +goose StatementBegin
DO $$ BEGIN RAISE EXCEPTION 'fiat migration 00003 (the worker) is not reversed'; END $$;
-- +goose StatementEnd
