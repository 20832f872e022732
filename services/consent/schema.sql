-- The consent service's schema, as its migrations (internal/consent/migrations)
-- make it: pg_dump --schema-only of an empty database they were applied to.
-- Generated: change a migration, then run make schema. CI fails when this
-- file and the migrations differ.

CREATE FUNCTION public.consent_attempts_used_once() RETURNS trigger
    LANGUAGE plpgsql
    AS $$
BEGIN
    IF OLD.used_at IS NOT NULL OR (NEW.id, NEW.session_id, NEW.provider_session_id, NEW.return_url, NEW.created_at)
       IS DISTINCT FROM (OLD.id, OLD.session_id, OLD.provider_session_id, OLD.return_url, OLD.created_at) THEN
        RAISE EXCEPTION 'consent attempt %: redeemed at most once, never changed', OLD.id;
    END IF;
    RETURN NEW;
END
$$;

CREATE FUNCTION public.consent_sessions_forward_only() RETURNS trigger
    LANGUAGE plpgsql
    AS $$
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

CREATE TABLE public.consent_attempts (
    id text NOT NULL,
    session_id text NOT NULL,
    provider_session_id text NOT NULL,
    return_url text,
    created_at timestamp with time zone NOT NULL,
    used_at timestamp with time zone
);

CREATE TABLE public.consent_event_horizons (
    key_id text NOT NULL,
    deleted_through bigint NOT NULL
);

CREATE TABLE public.consent_event_sequencer (
    one boolean DEFAULT true NOT NULL,
    seq bigint DEFAULT 0 NOT NULL,
    CONSTRAINT consent_event_sequencer_one_check CHECK (one)
);

CREATE TABLE public.consent_events (
    n bigint NOT NULL,
    seq bigint,
    id text NOT NULL,
    key_id text NOT NULL,
    type text NOT NULL,
    object_id text NOT NULL,
    created_at timestamp with time zone NOT NULL,
    data json NOT NULL,
    CONSTRAINT consent_events_id CHECK ((id ~ '^evt_[0-9a-f]{32}$'::text)),
    CONSTRAINT consent_events_type CHECK ((type ~ '^[a-z_]+(\.[a-z_]+)+$'::text))
)
WITH (fillfactor='50');

ALTER TABLE public.consent_events ALTER COLUMN n ADD GENERATED ALWAYS AS IDENTITY (
    SEQUENCE NAME public.consent_events_n_seq
    START WITH 1
    INCREMENT BY 1
    NO MINVALUE
    NO MAXVALUE
    CACHE 1
);

CREATE TABLE public.consent_sessions (
    id text NOT NULL,
    key_id text NOT NULL,
    account_id text NOT NULL,
    provider_customer_id text NOT NULL,
    state text NOT NULL,
    result text,
    current_attempt text,
    created_at timestamp with time zone NOT NULL,
    returned_at timestamp with time zone,
    CONSTRAINT consent_sessions_result CHECK ((result = ANY (ARRAY['accepted'::text, 'declined'::text]))),
    CONSTRAINT consent_sessions_returned_with_result CHECK (((state = 'returned'::text) = ((result IS NOT NULL) AND (returned_at IS NOT NULL)))),
    CONSTRAINT consent_sessions_state CHECK ((state = ANY (ARRAY['pending'::text, 'returned'::text])))
);

ALTER TABLE ONLY public.consent_attempts
    ADD CONSTRAINT consent_attempts_pkey PRIMARY KEY (id);

ALTER TABLE ONLY public.consent_event_horizons
    ADD CONSTRAINT consent_event_horizons_pkey PRIMARY KEY (key_id);

ALTER TABLE ONLY public.consent_event_sequencer
    ADD CONSTRAINT consent_event_sequencer_pkey PRIMARY KEY (one);

ALTER TABLE ONLY public.consent_events
    ADD CONSTRAINT consent_events_pkey PRIMARY KEY (n);

ALTER TABLE ONLY public.consent_sessions
    ADD CONSTRAINT consent_sessions_pkey PRIMARY KEY (id);

CREATE INDEX consent_attempts_session ON public.consent_attempts USING btree (session_id);

CREATE UNIQUE INDEX consent_events_feed ON public.consent_events USING btree (key_id, seq) WHERE (seq IS NOT NULL);

CREATE INDEX consent_events_object ON public.consent_events USING btree (key_id, object_id, seq);

CREATE INDEX consent_events_unsequenced ON public.consent_events USING btree (n) WHERE (seq IS NULL);

CREATE TRIGGER consent_attempts_used_once BEFORE UPDATE ON public.consent_attempts FOR EACH ROW EXECUTE FUNCTION public.consent_attempts_used_once();

CREATE TRIGGER consent_sessions_forward_only BEFORE UPDATE ON public.consent_sessions FOR EACH ROW EXECUTE FUNCTION public.consent_sessions_forward_only();

ALTER TABLE ONLY public.consent_attempts
    ADD CONSTRAINT consent_attempts_session_id_fkey FOREIGN KEY (session_id) REFERENCES public.consent_sessions(id);
