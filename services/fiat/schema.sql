-- The fiat service's schema, as its migrations (internal/fiat/migrations, and pkg/idempotency's)
-- make it: pg_dump --schema-only of an empty database they were applied to.
-- Generated: change a migration, then run make schema. CI fails when this
-- file and the migrations differ.

CREATE FUNCTION public.fiat_records_bound() RETURNS trigger
    LANGUAGE plpgsql
    AS $$
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

CREATE FUNCTION public.idempotency_keys_finished_is_final() RETURNS trigger
    LANGUAGE plpgsql
    AS $$
BEGIN
    RAISE EXCEPTION 'idempotency record % is finished: its answer is final', OLD.key_hash;
END
$$;

CREATE TABLE public.fiat_accounts (
    id text NOT NULL,
    key_id text NOT NULL,
    provider_customer_id text NOT NULL,
    consent_session_id text,
    created_at timestamp with time zone NOT NULL,
    status text,
    reference text,
    status_at timestamp with time zone NOT NULL,
    next_check_at timestamp with time zone,
    CONSTRAINT fiat_accounts_reference CHECK (((length(reference) >= 1) AND (length(reference) <= 64))),
    CONSTRAINT fiat_accounts_status CHECK ((status = ANY (ARRAY['consent_required'::text, 'identity_pending'::text, 'active'::text, 'rejected'::text])))
);

CREATE TABLE public.fiat_deposits (
    id text NOT NULL,
    key_id text NOT NULL,
    account_id text NOT NULL,
    provider_instruction_id text NOT NULL,
    created_at timestamp with time zone NOT NULL,
    status text DEFAULT 'awaiting_deposit'::text NOT NULL,
    amount text,
    currency text,
    iban text,
    bic text,
    beneficiary text,
    transfer_reference text,
    expires_at timestamp with time zone,
    reference text,
    transactions jsonb DEFAULT '[]'::jsonb NOT NULL,
    changed_at timestamp with time zone NOT NULL,
    next_check_at timestamp with time zone,
    CONSTRAINT fiat_deposits_reference CHECK (((length(reference) >= 1) AND (length(reference) <= 64))),
    CONSTRAINT fiat_deposits_status CHECK ((status = ANY (ARRAY['awaiting_deposit'::text, 'funded'::text]))),
    CONSTRAINT fiat_deposits_transactions CHECK ((jsonb_typeof(transactions) = 'array'::text))
);

CREATE TABLE public.fiat_event_horizons (
    key_id text NOT NULL,
    deleted_through bigint NOT NULL
);

CREATE TABLE public.fiat_event_sequencer (
    one boolean DEFAULT true NOT NULL,
    seq bigint DEFAULT 0 NOT NULL,
    CONSTRAINT fiat_event_sequencer_one_check CHECK (one)
);

CREATE TABLE public.fiat_events (
    n bigint NOT NULL,
    seq bigint,
    id text NOT NULL,
    key_id text NOT NULL,
    type text NOT NULL,
    object_id text NOT NULL,
    created_at timestamp with time zone NOT NULL,
    data json NOT NULL,
    CONSTRAINT fiat_events_id CHECK ((id ~ '^evt_[0-9a-f]{32}$'::text)),
    CONSTRAINT fiat_events_type CHECK ((type ~ '^[a-z_]+(\.[a-z_]+)+$'::text))
)
WITH (fillfactor='50');

ALTER TABLE public.fiat_events ALTER COLUMN n ADD GENERATED ALWAYS AS IDENTITY (
    SEQUENCE NAME public.fiat_events_n_seq
    START WITH 1
    INCREMENT BY 1
    NO MINVALUE
    NO MAXVALUE
    CACHE 1
);

CREATE TABLE public.fiat_virtual_accounts (
    id text NOT NULL,
    key_id text NOT NULL,
    account_id text NOT NULL,
    provider_account_id text NOT NULL,
    currency text NOT NULL,
    created_at timestamp with time zone NOT NULL,
    status text DEFAULT 'active'::text NOT NULL,
    reference text,
    transactions jsonb DEFAULT '[]'::jsonb NOT NULL,
    changed_at timestamp with time zone NOT NULL,
    next_check_at timestamp with time zone,
    CONSTRAINT fiat_virtual_accounts_reference CHECK (((length(reference) >= 1) AND (length(reference) <= 64))),
    CONSTRAINT fiat_virtual_accounts_status CHECK ((status = 'active'::text)),
    CONSTRAINT fiat_virtual_accounts_transactions CHECK ((jsonb_typeof(transactions) = 'array'::text))
);

CREATE TABLE public.idempotency_keys (
    key_id text NOT NULL,
    key_hash text NOT NULL,
    fingerprint text NOT NULL,
    seed text NOT NULL,
    created_at timestamp with time zone NOT NULL,
    locked_until timestamp with time zone,
    finished_at timestamp with time zone,
    status integer,
    body bytea,
    released_at timestamp with time zone,
    owner text,
    CONSTRAINT idempotency_keys_answer_when_finished CHECK (((finished_at IS NULL) = ((status IS NULL) AND (body IS NULL)))),
    CONSTRAINT idempotency_keys_claimed_or_finished CHECK (((locked_until IS NULL) <> (finished_at IS NULL)))
);

ALTER TABLE ONLY public.fiat_accounts
    ADD CONSTRAINT fiat_accounts_one_per_customer UNIQUE (provider_customer_id);

ALTER TABLE ONLY public.fiat_accounts
    ADD CONSTRAINT fiat_accounts_pkey PRIMARY KEY (id);

ALTER TABLE ONLY public.fiat_deposits
    ADD CONSTRAINT fiat_deposits_one_per_instruction UNIQUE (provider_instruction_id);

ALTER TABLE ONLY public.fiat_deposits
    ADD CONSTRAINT fiat_deposits_pkey PRIMARY KEY (id);

ALTER TABLE ONLY public.fiat_event_horizons
    ADD CONSTRAINT fiat_event_horizons_pkey PRIMARY KEY (key_id);

ALTER TABLE ONLY public.fiat_event_sequencer
    ADD CONSTRAINT fiat_event_sequencer_pkey PRIMARY KEY (one);

ALTER TABLE ONLY public.fiat_events
    ADD CONSTRAINT fiat_events_pkey PRIMARY KEY (n);

ALTER TABLE ONLY public.fiat_virtual_accounts
    ADD CONSTRAINT fiat_virtual_accounts_one_id_per_provider_account UNIQUE (provider_account_id);

ALTER TABLE ONLY public.fiat_virtual_accounts
    ADD CONSTRAINT fiat_virtual_accounts_pkey PRIMARY KEY (id);

ALTER TABLE ONLY public.idempotency_keys
    ADD CONSTRAINT idempotency_keys_pkey PRIMARY KEY (key_id, key_hash);

CREATE INDEX fiat_accounts_due ON public.fiat_accounts USING btree (next_check_at) WHERE (next_check_at IS NOT NULL);

CREATE INDEX fiat_accounts_key_page ON public.fiat_accounts USING btree (key_id, created_at DESC, id DESC);

CREATE INDEX fiat_accounts_key_reference_page ON public.fiat_accounts USING btree (key_id, reference, created_at DESC, id DESC) WHERE (reference IS NOT NULL);

CREATE INDEX fiat_accounts_key_status_page ON public.fiat_accounts USING btree (key_id, status, created_at DESC, id DESC);

CREATE INDEX fiat_deposits_due ON public.fiat_deposits USING btree (next_check_at) WHERE (next_check_at IS NOT NULL);

CREATE INDEX fiat_deposits_key_page ON public.fiat_deposits USING btree (key_id, created_at DESC, id DESC);

CREATE INDEX fiat_deposits_key_reference_page ON public.fiat_deposits USING btree (key_id, reference, created_at DESC, id DESC) WHERE (reference IS NOT NULL);

CREATE INDEX fiat_deposits_key_status_page ON public.fiat_deposits USING btree (key_id, status, created_at DESC, id DESC);

CREATE UNIQUE INDEX fiat_events_feed ON public.fiat_events USING btree (key_id, seq) WHERE (seq IS NOT NULL);

CREATE INDEX fiat_events_object ON public.fiat_events USING btree (key_id, object_id, seq);

CREATE INDEX fiat_events_unsequenced ON public.fiat_events USING btree (n) WHERE (seq IS NULL);

CREATE INDEX fiat_virtual_accounts_due ON public.fiat_virtual_accounts USING btree (next_check_at) WHERE (next_check_at IS NOT NULL);

CREATE INDEX fiat_virtual_accounts_key_page ON public.fiat_virtual_accounts USING btree (key_id, created_at DESC, id DESC);

CREATE INDEX fiat_virtual_accounts_key_reference_page ON public.fiat_virtual_accounts USING btree (key_id, reference, created_at DESC, id DESC) WHERE (reference IS NOT NULL);

CREATE INDEX idempotency_keys_created_at ON public.idempotency_keys USING btree (created_at);

CREATE TRIGGER fiat_accounts_bound BEFORE UPDATE ON public.fiat_accounts FOR EACH ROW EXECUTE FUNCTION public.fiat_records_bound();

CREATE TRIGGER fiat_deposits_bound BEFORE UPDATE ON public.fiat_deposits FOR EACH ROW EXECUTE FUNCTION public.fiat_records_bound();

CREATE TRIGGER fiat_virtual_accounts_bound BEFORE UPDATE ON public.fiat_virtual_accounts FOR EACH ROW EXECUTE FUNCTION public.fiat_records_bound();

CREATE TRIGGER idempotency_keys_finished_is_final BEFORE UPDATE ON public.idempotency_keys FOR EACH ROW WHEN ((old.finished_at IS NOT NULL)) EXECUTE FUNCTION public.idempotency_keys_finished_is_final();

ALTER TABLE ONLY public.fiat_deposits
    ADD CONSTRAINT fiat_deposits_account_id_fkey FOREIGN KEY (account_id) REFERENCES public.fiat_accounts(id);

ALTER TABLE ONLY public.fiat_virtual_accounts
    ADD CONSTRAINT fiat_virtual_accounts_account_id_fkey FOREIGN KEY (account_id) REFERENCES public.fiat_accounts(id);
