-- The orders service's schema, as its migrations (internal/orders/migrations, and pkg/idempotency's)
-- make it: pg_dump --schema-only of an empty database they were applied to.
-- Generated: change a migration, then run make schema. CI fails when this
-- file and the migrations differ.

CREATE FUNCTION public.idempotency_keys_finished_is_final() RETURNS trigger
    LANGUAGE plpgsql
    AS $$
BEGIN
    RAISE EXCEPTION 'idempotency record % is finished: its answer is final', OLD.key_hash;
END
$$;

CREATE FUNCTION public.order_links_used_once() RETURNS trigger
    LANGUAGE plpgsql
    AS $$
BEGIN
    IF OLD.used_at IS NOT NULL AND NEW.used_at IS DISTINCT FROM OLD.used_at THEN
        RAISE EXCEPTION 'order link %: already used', OLD.id;
    END IF;
    IF to_jsonb(NEW) - 'is_current' - 'used_at' IS DISTINCT FROM to_jsonb(OLD) - 'is_current' - 'used_at'
       OR (NEW.is_current AND NOT OLD.is_current) THEN
        RAISE EXCEPTION 'order link %: a link never changes, and a superseded one stays so', OLD.id;
    END IF;
    RETURN NEW;
END
$$;

CREATE FUNCTION public.orders_forward_only() RETURNS trigger
    LANGUAGE plpgsql
    AS $$
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

CREATE TABLE public.order_links (
    id text NOT NULL,
    order_id text NOT NULL,
    provider_session_id text NOT NULL,
    return_url text,
    is_current boolean NOT NULL,
    created_at timestamp with time zone NOT NULL,
    used_at timestamp with time zone
);

CREATE TABLE public.orders (
    id text NOT NULL,
    key_id text NOT NULL,
    direction text NOT NULL,
    status text NOT NULL,
    crypto_currency text NOT NULL,
    chain bigint NOT NULL,
    fiat_currency text NOT NULL,
    country text NOT NULL,
    crypto_amount text,
    fiat_amount text,
    wallet_address text NOT NULL,
    deposit_address text,
    payment_method text,
    tx_hash text,
    failure_reason text,
    expires_at timestamp with time zone NOT NULL,
    created_at timestamp with time zone NOT NULL,
    provider_order_id text,
    reference text,
    status_at timestamp with time zone NOT NULL,
    next_check_at timestamp with time zone,
    CONSTRAINT orders_awaits_its_own CHECK (((NOT ((direction = 'buy'::text) AND (status = 'awaiting_deposit'::text))) AND (NOT ((direction = 'sell'::text) AND (status = 'awaiting_payment'::text))))),
    CONSTRAINT orders_completed_has_hash CHECK (((status <> 'completed'::text) OR (direction = 'sell'::text) OR (tx_hash IS NOT NULL))),
    CONSTRAINT orders_direction CHECK ((direction = ANY (ARRAY['buy'::text, 'sell'::text]))),
    CONSTRAINT orders_failed_has_reason CHECK (((status = 'failed'::text) = (failure_reason IS NOT NULL))),
    CONSTRAINT orders_one_amount CHECK (((crypto_amount IS NULL) <> (fiat_amount IS NULL))),
    CONSTRAINT orders_reference CHECK (((reference IS NULL) OR ((length(reference) >= 1) AND (length(reference) <= 64)))),
    CONSTRAINT orders_sell_has_deposit_address CHECK (((direction = 'sell'::text) = (deposit_address IS NOT NULL))),
    CONSTRAINT orders_status CHECK ((status = ANY (ARRAY['awaiting_payment'::text, 'awaiting_deposit'::text, 'processing'::text, 'completed'::text, 'failed'::text, 'expired'::text])))
);

CREATE TABLE public.orders_event_horizons (
    key_id text NOT NULL,
    deleted_through bigint NOT NULL
);

CREATE TABLE public.orders_event_sequencer (
    one boolean DEFAULT true NOT NULL,
    seq bigint DEFAULT 0 NOT NULL,
    CONSTRAINT orders_event_sequencer_one_check CHECK (one)
);

CREATE TABLE public.orders_events (
    n bigint NOT NULL,
    seq bigint,
    id text NOT NULL,
    key_id text NOT NULL,
    type text NOT NULL,
    object_id text NOT NULL,
    created_at timestamp with time zone NOT NULL,
    data json NOT NULL,
    CONSTRAINT orders_events_id CHECK ((id ~ '^evt_[0-9a-f]{32}$'::text)),
    CONSTRAINT orders_events_type CHECK ((type ~ '^[a-z_]+(\.[a-z_]+)+$'::text))
)
WITH (fillfactor='50');

ALTER TABLE public.orders_events ALTER COLUMN n ADD GENERATED ALWAYS AS IDENTITY (
    SEQUENCE NAME public.orders_events_n_seq
    START WITH 1
    INCREMENT BY 1
    NO MINVALUE
    NO MAXVALUE
    CACHE 1
);

ALTER TABLE ONLY public.idempotency_keys
    ADD CONSTRAINT idempotency_keys_pkey PRIMARY KEY (key_id, key_hash);

ALTER TABLE ONLY public.order_links
    ADD CONSTRAINT order_links_pkey PRIMARY KEY (id);

ALTER TABLE ONLY public.orders_event_horizons
    ADD CONSTRAINT orders_event_horizons_pkey PRIMARY KEY (key_id);

ALTER TABLE ONLY public.orders_event_sequencer
    ADD CONSTRAINT orders_event_sequencer_pkey PRIMARY KEY (one);

ALTER TABLE ONLY public.orders_events
    ADD CONSTRAINT orders_events_pkey PRIMARY KEY (n);

ALTER TABLE ONLY public.orders
    ADD CONSTRAINT orders_pkey PRIMARY KEY (id);

CREATE INDEX idempotency_keys_created_at ON public.idempotency_keys USING btree (created_at);

CREATE UNIQUE INDEX order_links_one_current ON public.order_links USING btree (order_id) WHERE is_current;

CREATE INDEX orders_due ON public.orders USING btree (next_check_at) WHERE (next_check_at IS NOT NULL);

CREATE UNIQUE INDEX orders_events_feed ON public.orders_events USING btree (key_id, seq) WHERE (seq IS NOT NULL);

CREATE INDEX orders_events_object ON public.orders_events USING btree (key_id, object_id, seq);

CREATE INDEX orders_events_unsequenced ON public.orders_events USING btree (n) WHERE (seq IS NULL);

CREATE INDEX orders_key_page ON public.orders USING btree (key_id, created_at DESC, id DESC);

CREATE INDEX orders_key_reference_page ON public.orders USING btree (key_id, reference, created_at DESC, id DESC) WHERE (reference IS NOT NULL);

CREATE INDEX orders_key_status_page ON public.orders USING btree (key_id, status, created_at DESC, id DESC);

CREATE TRIGGER idempotency_keys_finished_is_final BEFORE UPDATE ON public.idempotency_keys FOR EACH ROW WHEN ((old.finished_at IS NOT NULL)) EXECUTE FUNCTION public.idempotency_keys_finished_is_final();

CREATE TRIGGER order_links_used_once BEFORE UPDATE ON public.order_links FOR EACH ROW EXECUTE FUNCTION public.order_links_used_once();

CREATE TRIGGER orders_forward_only BEFORE UPDATE ON public.orders FOR EACH ROW EXECUTE FUNCTION public.orders_forward_only();

ALTER TABLE ONLY public.order_links
    ADD CONSTRAINT order_links_order_id_fkey FOREIGN KEY (order_id) REFERENCES public.orders(id);
