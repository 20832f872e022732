-- The payout service's schema, as its migrations (internal/store/migrations, and pkg/idempotency's)
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

CREATE FUNCTION public.payout_chain_sends_bound() RETURNS trigger
    LANGUAGE plpgsql
    AS $$
BEGIN
    IF (NEW.chain, NEW.sender, NEW.nonce, NEW.purpose, NEW.refund_id, NEW.sweep_id, NEW.token, NEW.recipient, NEW.units, NEW.created_at)
       IS DISTINCT FROM (OLD.chain, OLD.sender, OLD.nonce, OLD.purpose, OLD.refund_id, OLD.sweep_id, OLD.token, OLD.recipient, OLD.units, OLD.created_at) THEN
        RAISE EXCEPTION 'send %/%: what it sends, and where, never change', OLD.sender, OLD.nonce;
    END IF;
    IF NEW.state <> OLD.state AND (OLD.state, NEW.state) NOT IN (('signed', 'broadcast'), ('signed', 'dropped'), ('broadcast', 'confirmed'), ('broadcast', 'dropped')) THEN
        RAISE EXCEPTION 'send %/%: state % cannot follow %', OLD.sender, OLD.nonce, NEW.state, OLD.state;
    END IF;
    RETURN NEW;
END
$$;

CREATE FUNCTION public.payout_refunds_bound() RETURNS trigger
    LANGUAGE plpgsql
    AS $$
BEGIN
    IF (NEW.id, NEW.payout_id, NEW.reason, NEW.amount, NEW.crypto_currency, NEW.chain, NEW.deposit_tx_hash, NEW.created_at)
       IS DISTINCT FROM (OLD.id, OLD.payout_id, OLD.reason, OLD.amount, OLD.crypto_currency, OLD.chain, OLD.deposit_tx_hash, OLD.created_at)
       OR (OLD.address IS NOT NULL AND NEW.address IS DISTINCT FROM OLD.address)
       OR (OLD.pending_at IS NOT NULL AND NEW.pending_at IS DISTINCT FROM OLD.pending_at)
       OR (OLD.sent_at IS NOT NULL AND NEW.sent_at IS DISTINCT FROM OLD.sent_at)
       -- A sent refund's hash follows its transaction's replacements until
       -- one is confirmed; then nothing changes.
       OR (OLD.status = 'confirmed' AND (NEW.tx_hash, NEW.confirmed_at) IS DISTINCT FROM (OLD.tx_hash, OLD.confirmed_at)) THEN
        RAISE EXCEPTION 'refund %: what it returns, and where, never change', OLD.id;
    END IF;
    IF NEW.status <> OLD.status AND (OLD.status, NEW.status) NOT IN (('awaiting_address', 'pending'), ('pending', 'sent'), ('sent', 'confirmed')) THEN
        RAISE EXCEPTION 'refund %: status % cannot follow %', OLD.id, NEW.status, OLD.status;
    END IF;
    RETURN NEW;
END
$$;

CREATE FUNCTION public.payouts_bound() RETURNS trigger
    LANGUAGE plpgsql
    AS $$
BEGIN
    IF (NEW.id, NEW.quote_id, NEW.key_id, NEW.beneficiary_name, NEW.beneficiary, NEW.chain, NEW.crypto_currency,
        NEW.fiat_currency, NEW.country, NEW.crypto_amount, NEW.fiat_amount, NEW.rail, NEW.quote_expires_at, NEW.created_at,
        NEW.reference, NEW.deposit_address, NEW.deposit_expires_at)
       IS DISTINCT FROM
       (OLD.id, OLD.quote_id, OLD.key_id, OLD.beneficiary_name, OLD.beneficiary, OLD.chain, OLD.crypto_currency,
        OLD.fiat_currency, OLD.country, OLD.crypto_amount, OLD.fiat_amount, OLD.rail, OLD.quote_expires_at, OLD.created_at,
        OLD.reference, OLD.deposit_address, OLD.deposit_expires_at) THEN
        RAISE EXCEPTION 'payout %: its quote, owner, beneficiary, amount and deposit never change', OLD.id;
    END IF;
    -- What happened to it, and where its refunds go, are written once.
    IF (OLD.deposit_tx_hash IS NOT NULL AND NEW.deposit_tx_hash IS DISTINCT FROM OLD.deposit_tx_hash)
       OR (OLD.deposit_amount IS NOT NULL AND NEW.deposit_amount IS DISTINCT FROM OLD.deposit_amount)
       OR (OLD.handover_at IS NOT NULL AND NEW.handover_at IS DISTINCT FROM OLD.handover_at)
       OR (OLD.handed_over_at IS NOT NULL AND NEW.handed_over_at IS DISTINCT FROM OLD.handed_over_at)
       OR (OLD.completed_at IS NOT NULL AND NEW.completed_at IS DISTINCT FROM OLD.completed_at)
       OR (OLD.failure_reason IS NOT NULL AND NEW.failure_reason IS DISTINCT FROM OLD.failure_reason)
       OR (OLD.return_reason IS NOT NULL AND NEW.return_reason IS DISTINCT FROM OLD.return_reason)
       OR (OLD.return_code IS NOT NULL AND NEW.return_code IS DISTINCT FROM OLD.return_code)
       OR (OLD.provider_code IS NOT NULL AND NEW.provider_code IS DISTINCT FROM OLD.provider_code)
       OR (OLD.refund_address IS NOT NULL AND NEW.refund_address IS DISTINCT FROM OLD.refund_address)
       OR (OLD.sandbox_outcome IS NOT NULL AND NEW.sandbox_outcome IS DISTINCT FROM OLD.sandbox_outcome)
       OR (OLD.sandbox_reason IS NOT NULL AND NEW.sandbox_reason IS DISTINCT FROM OLD.sandbox_reason) THEN
        RAISE EXCEPTION 'payout %: what happened to it is never rewritten', OLD.id;
    END IF;
    IF NEW.status <> OLD.status AND (OLD.status, NEW.status) NOT IN (
        ('awaiting_deposit', 'processing'), ('awaiting_deposit', 'expired'), ('awaiting_deposit', 'failed'),
        ('processing', 'completed'), ('processing', 'failed'), ('completed', 'returned')) THEN
        RAISE EXCEPTION 'payout %: status % cannot follow %', OLD.id, NEW.status, OLD.status;
    END IF;
    RETURN NEW;
END
$$;

CREATE FUNCTION public.payouts_created_now() RETURNS trigger
    LANGUAGE plpgsql
    AS $$
BEGIN
    -- Whether a quote had expired is decided on the database's clock.
    NEW.created_at := now();
    RETURN NEW;
END
$$;

CREATE FUNCTION public.payouts_history() RETURNS trigger
    LANGUAGE plpgsql
    AS $$
BEGIN
    IF TG_OP = 'INSERT' OR NEW.status <> OLD.status THEN
        INSERT INTO payout_history (payout_id, status, at) VALUES (NEW.id, NEW.status, NEW.status_at);
    END IF;
    RETURN NULL;
END
$$;

CREATE FUNCTION public.payouts_history_kept() RETURNS trigger
    LANGUAGE plpgsql
    AS $$
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

CREATE TABLE public.payout_chain_blocks (
    chain bigint NOT NULL,
    number bigint NOT NULL,
    hash text NOT NULL,
    CONSTRAINT payout_chain_blocks_hash_check CHECK ((hash ~ '^0x[0-9a-f]{64}$'::text))
);

CREATE TABLE public.payout_chain_nonces (
    chain bigint NOT NULL,
    sender text NOT NULL,
    next bigint NOT NULL,
    CONSTRAINT payout_chain_nonces_next_check CHECK ((next >= 0)),
    CONSTRAINT payout_chain_nonces_sender_check CHECK ((sender ~ '^0x[0-9a-f]{40}$'::text))
);

CREATE TABLE public.payout_chain_send_versions (
    hash text NOT NULL,
    chain bigint NOT NULL,
    sender text NOT NULL,
    nonce bigint NOT NULL,
    raw bytea NOT NULL,
    gas bigint NOT NULL,
    tip_cap numeric NOT NULL,
    fee_cap numeric NOT NULL,
    signed_at timestamp with time zone NOT NULL,
    CONSTRAINT payout_chain_send_versions_check CHECK ((fee_cap >= tip_cap)),
    CONSTRAINT payout_chain_send_versions_gas_check CHECK ((gas > 0)),
    CONSTRAINT payout_chain_send_versions_hash_check CHECK ((hash ~ '^0x[0-9a-f]{64}$'::text)),
    CONSTRAINT payout_chain_send_versions_tip_cap_check CHECK ((tip_cap >= (0)::numeric))
);

CREATE TABLE public.payout_chain_sends (
    chain bigint NOT NULL,
    sender text NOT NULL,
    nonce bigint NOT NULL,
    purpose text NOT NULL,
    refund_id text,
    token text NOT NULL,
    recipient text NOT NULL,
    units numeric NOT NULL,
    state text NOT NULL,
    created_at timestamp with time zone NOT NULL,
    broadcast_at timestamp with time zone,
    mined_hash text,
    mined_block bigint,
    confirmed_at timestamp with time zone,
    sweep_id bigint,
    CONSTRAINT payout_chain_sends_broadcast CHECK (((state = ANY (ARRAY['signed'::text, 'dropped'::text])) OR (broadcast_at IS NOT NULL))),
    CONSTRAINT payout_chain_sends_confirmed CHECK (((state = 'confirmed'::text) = ((mined_hash IS NOT NULL) AND (mined_block IS NOT NULL) AND (confirmed_at IS NOT NULL)))),
    CONSTRAINT payout_chain_sends_mined_hash_check CHECK ((mined_hash ~ '^0x[0-9a-f]{64}$'::text)),
    CONSTRAINT payout_chain_sends_nonce_check CHECK ((nonce >= 0)),
    CONSTRAINT payout_chain_sends_purpose_check CHECK ((purpose = ANY (ARRAY['refund'::text, 'gas'::text]))),
    CONSTRAINT payout_chain_sends_recipient_check CHECK ((recipient ~ '^0x[0-9a-f]{40}$'::text)),
    CONSTRAINT payout_chain_sends_refund CHECK (((purpose = 'refund'::text) = (refund_id IS NOT NULL))),
    CONSTRAINT payout_chain_sends_sender_check CHECK ((sender ~ '^0x[0-9a-f]{40}$'::text)),
    CONSTRAINT payout_chain_sends_state_check CHECK ((state = ANY (ARRAY['signed'::text, 'broadcast'::text, 'confirmed'::text, 'dropped'::text]))),
    CONSTRAINT payout_chain_sends_sweep CHECK (((purpose = 'gas'::text) = (sweep_id IS NOT NULL))),
    CONSTRAINT payout_chain_sends_token_check CHECK ((token ~ '^0x[0-9a-f]{40}$'::text)),
    CONSTRAINT payout_chain_sends_units_check CHECK ((units > (0)::numeric))
);

CREATE TABLE public.payout_chain_watch (
    chain bigint NOT NULL,
    block_number bigint NOT NULL,
    block_hash text NOT NULL,
    lease_owner text,
    leased_until timestamp with time zone,
    updated_at timestamp with time zone NOT NULL,
    CONSTRAINT payout_chain_watch_block_hash_check CHECK ((block_hash ~ '^0x[0-9a-f]{64}$'::text)),
    CONSTRAINT payout_chain_watch_block_number_check CHECK ((block_number >= 0))
);

CREATE SEQUENCE public.payout_deposit_index
    START WITH 0
    INCREMENT BY 64
    MINVALUE 0
    MAXVALUE 2147483583
    CACHE 1;

CREATE TABLE public.payout_deposits (
    chain bigint NOT NULL,
    tx_hash text NOT NULL,
    log_index integer NOT NULL,
    payout_id text NOT NULL,
    token text NOT NULL,
    amount numeric NOT NULL,
    block_number bigint NOT NULL,
    block_hash text NOT NULL,
    recorded_at timestamp with time zone NOT NULL,
    sweep_id bigint,
    CONSTRAINT payout_deposits_amount_check CHECK ((amount > (0)::numeric)),
    CONSTRAINT payout_deposits_log_index_check CHECK ((log_index >= 0)),
    CONSTRAINT payout_deposits_token_check CHECK ((token ~ '^0x[0-9a-fA-F]{40}$'::text)),
    CONSTRAINT payout_deposits_tx_hash_check CHECK ((tx_hash ~ '^0x[0-9a-f]{64}$'::text))
);

CREATE TABLE public.payout_deposits_held (
    chain bigint NOT NULL,
    tx_hash text NOT NULL,
    log_index integer NOT NULL,
    address text NOT NULL,
    token text NOT NULL,
    units text NOT NULL,
    block_number bigint NOT NULL,
    block_hash text NOT NULL,
    block_time timestamp with time zone NOT NULL,
    failures integer NOT NULL,
    held_at timestamp with time zone NOT NULL,
    retry_at timestamp with time zone NOT NULL,
    CONSTRAINT payout_deposits_held_failures_check CHECK ((failures > 0)),
    CONSTRAINT payout_deposits_held_log_index_check CHECK ((log_index >= 0)),
    CONSTRAINT payout_deposits_held_tx_hash_check CHECK ((tx_hash ~ '^0x[0-9a-f]{64}$'::text))
);

CREATE TABLE public.payout_event_horizons (
    key_id text NOT NULL,
    deleted_through bigint NOT NULL
);

CREATE TABLE public.payout_event_sequencer (
    one boolean DEFAULT true NOT NULL,
    seq bigint DEFAULT 0 NOT NULL,
    CONSTRAINT payout_event_sequencer_one_check CHECK (one)
);

CREATE TABLE public.payout_events (
    n bigint NOT NULL,
    seq bigint,
    id text NOT NULL,
    key_id text NOT NULL,
    type text NOT NULL,
    object_id text NOT NULL,
    created_at timestamp with time zone NOT NULL,
    data json NOT NULL,
    CONSTRAINT payout_events_id CHECK ((id ~ '^evt_[0-9a-f]{32}$'::text)),
    CONSTRAINT payout_events_type CHECK ((type ~ '^[a-z_]+(\.[a-z_]+)+$'::text))
)
WITH (fillfactor='50');

ALTER TABLE public.payout_events ALTER COLUMN n ADD GENERATED ALWAYS AS IDENTITY (
    SEQUENCE NAME public.payout_events_n_seq
    START WITH 1
    INCREMENT BY 1
    NO MINVALUE
    NO MAXVALUE
    CACHE 1
);

CREATE TABLE public.payout_faucet_sends (
    id text NOT NULL,
    chain bigint NOT NULL,
    raw bytea NOT NULL,
    kept_at timestamp with time zone NOT NULL
);

CREATE TABLE public.payout_history (
    payout_id text NOT NULL,
    status text NOT NULL,
    at timestamp with time zone NOT NULL
);

CREATE TABLE public.payout_provider_changes (
    change_id text NOT NULL,
    payout_id text NOT NULL,
    applied_at timestamp with time zone NOT NULL
);

CREATE TABLE public.payout_provider_feed (
    provider text NOT NULL,
    after text NOT NULL,
    updated_at timestamp with time zone NOT NULL,
    lease_owner text,
    leased_until timestamp with time zone
);

CREATE TABLE public.payout_quote_holds (
    quote_id text NOT NULL,
    beneficiary_digest text NOT NULL,
    held_at timestamp with time zone NOT NULL
);

CREATE TABLE public.payout_refunds (
    id text NOT NULL,
    payout_id text NOT NULL,
    reason text NOT NULL,
    status text NOT NULL,
    amount text NOT NULL,
    crypto_currency text NOT NULL,
    chain bigint NOT NULL,
    deposit_tx_hash text NOT NULL,
    address text,
    tx_hash text,
    created_at timestamp with time zone NOT NULL,
    pending_at timestamp with time zone,
    sent_at timestamp with time zone,
    retry_at timestamp with time zone,
    failures integer DEFAULT 0 NOT NULL,
    deposit_log_index integer DEFAULT 0 NOT NULL,
    confirmed_at timestamp with time zone,
    CONSTRAINT payout_refunds_address CHECK ((((status = 'awaiting_address'::text) = (address IS NULL)) AND ((address IS NULL) OR (address ~ '^0x[0-9a-fA-F]{40}$'::text)))),
    CONSTRAINT payout_refunds_amount CHECK ((amount ~ '^[0-9]+(\.[0-9]+)?$'::text)),
    CONSTRAINT payout_refunds_confirmed CHECK (((status = 'confirmed'::text) = (confirmed_at IS NOT NULL))),
    CONSTRAINT payout_refunds_deposit_log_index_check CHECK ((deposit_log_index >= 0)),
    CONSTRAINT payout_refunds_pending_at CHECK (((status = 'awaiting_address'::text) = (pending_at IS NULL))),
    CONSTRAINT payout_refunds_reason CHECK ((reason = ANY (ARRAY['payout_failed'::text, 'payout_returned'::text, 'deposit_late'::text, 'deposit_short'::text, 'deposit_excess'::text, 'deposit_wrong_token'::text, 'deposit_unexpected'::text]))),
    CONSTRAINT payout_refunds_sent CHECK (((status = ANY (ARRAY['sent'::text, 'confirmed'::text])) = ((tx_hash IS NOT NULL) AND (sent_at IS NOT NULL)))),
    CONSTRAINT payout_refunds_status CHECK ((status = ANY (ARRAY['awaiting_address'::text, 'pending'::text, 'sent'::text, 'confirmed'::text])))
);

CREATE TABLE public.payout_sweeps (
    id bigint NOT NULL,
    chain bigint NOT NULL,
    address text NOT NULL,
    deposit_index bigint NOT NULL,
    token text NOT NULL,
    units numeric NOT NULL,
    state text NOT NULL,
    gas bigint,
    raw bytea,
    tx_hash text,
    created_at timestamp with time zone NOT NULL,
    swept_at timestamp with time zone,
    earlier_tx_hashes text[] DEFAULT '{}'::text[] NOT NULL,
    CONSTRAINT payout_sweeps_address_check CHECK ((address ~ '^0x[0-9a-f]{40}$'::text)),
    CONSTRAINT payout_sweeps_deposit_index_check CHECK ((deposit_index >= 0)),
    CONSTRAINT payout_sweeps_funded CHECK (((state = 'funding'::text) OR (gas IS NOT NULL))),
    CONSTRAINT payout_sweeps_gas_check CHECK ((gas > 0)),
    CONSTRAINT payout_sweeps_signed CHECK (((state = ANY (ARRAY['sweeping'::text, 'swept'::text])) = ((raw IS NOT NULL) AND (tx_hash IS NOT NULL)))),
    CONSTRAINT payout_sweeps_state_check CHECK ((state = ANY (ARRAY['funding'::text, 'funded'::text, 'sweeping'::text, 'swept'::text]))),
    CONSTRAINT payout_sweeps_swept CHECK (((state = 'swept'::text) = (swept_at IS NOT NULL))),
    CONSTRAINT payout_sweeps_token_check CHECK ((token ~ '^0x[0-9a-f]{40}$'::text)),
    CONSTRAINT payout_sweeps_tx_hash_check CHECK ((tx_hash ~ '^0x[0-9a-f]{64}$'::text)),
    CONSTRAINT payout_sweeps_units_check CHECK ((units > (0)::numeric))
);

CREATE SEQUENCE public.payout_sweeps_id_seq
    START WITH 1
    INCREMENT BY 1
    NO MINVALUE
    NO MAXVALUE
    CACHE 1;

ALTER SEQUENCE public.payout_sweeps_id_seq OWNED BY public.payout_sweeps.id;

CREATE TABLE public.payouts (
    id text NOT NULL,
    quote_id text NOT NULL,
    key_id text NOT NULL,
    beneficiary_name text NOT NULL,
    chain bigint NOT NULL,
    crypto_currency text NOT NULL,
    fiat_currency text NOT NULL,
    country text NOT NULL,
    crypto_amount text,
    fiat_amount text,
    rail text NOT NULL,
    estimated_settlement text NOT NULL,
    status text NOT NULL,
    quote_expires_at timestamp with time zone NOT NULL,
    created_at timestamp with time zone NOT NULL,
    beneficiary text NOT NULL,
    reference text,
    deposit_address text NOT NULL,
    deposit_expires_at timestamp with time zone NOT NULL,
    deposit_tx_hash text,
    completed_at timestamp with time zone,
    failure_reason text,
    return_reason text,
    sandbox_outcome text,
    sandbox_reason text,
    status_at timestamp with time zone NOT NULL,
    refund_address text,
    deposit_amount text,
    handover_at timestamp with time zone,
    handed_over_at timestamp with time zone,
    return_code text,
    provider_code text,
    handover_next_at timestamp with time zone,
    reconcile_at timestamp with time zone,
    reconcile_checks integer DEFAULT 0 NOT NULL,
    provider_missing_at timestamp with time zone,
    retry_at timestamp with time zone,
    failures integer DEFAULT 0 NOT NULL,
    deposit_seen_at timestamp with time zone,
    deposit_index bigint,
    history_statuses text[] DEFAULT '{}'::text[] NOT NULL,
    history_times timestamp with time zone[] DEFAULT '{}'::timestamp with time zone[] NOT NULL,
    CONSTRAINT payouts_completed_at CHECK (((status = ANY (ARRAY['completed'::text, 'returned'::text])) = (completed_at IS NOT NULL))),
    CONSTRAINT payouts_deposit_amount CHECK (((deposit_amount IS NULL) OR (deposit_amount ~ '^[0-9]+(\.[0-9]+)?$'::text))),
    CONSTRAINT payouts_deposit_arrived CHECK (
CASE status
    WHEN 'awaiting_deposit'::text THEN true
    WHEN 'expired'::text THEN (deposit_tx_hash IS NULL)
    ELSE (deposit_tx_hash IS NOT NULL)
END),
    CONSTRAINT payouts_deposit_index_range CHECK (((deposit_index IS NULL) OR ((deposit_index >= 0) AND (deposit_index <= 2147483647)))),
    CONSTRAINT payouts_failure_reason CHECK (((status = 'failed'::text) = (failure_reason IS NOT NULL))),
    CONSTRAINT payouts_handed_over_after_intent CHECK (((handed_over_at IS NULL) OR (handover_at IS NOT NULL))),
    CONSTRAINT payouts_handover_after_deposit CHECK (((handover_at IS NULL) OR (deposit_tx_hash IS NOT NULL))),
    CONSTRAINT payouts_not_after_expiry CHECK ((created_at < quote_expires_at)),
    CONSTRAINT payouts_one_amount CHECK (((crypto_amount IS NULL) <> (fiat_amount IS NULL))),
    CONSTRAINT payouts_processing_handed_over CHECK (((status <> ALL (ARRAY['processing'::text, 'completed'::text, 'returned'::text])) OR (handed_over_at IS NOT NULL))),
    CONSTRAINT payouts_provider_code CHECK (((provider_code IS NULL) OR (provider_code ~ '^[A-Za-z0-9_.-]{1,32}$'::text))),
    CONSTRAINT payouts_reconcile_checks CHECK (((reconcile_checks >= 0) AND (failures >= 0))),
    CONSTRAINT payouts_reference CHECK (((reference IS NULL) OR ((length(reference) >= 1) AND (length(reference) <= 64)))),
    CONSTRAINT payouts_refund_address CHECK (((refund_address IS NULL) OR (refund_address ~ '^0x[0-9a-fA-F]{40}$'::text))),
    CONSTRAINT payouts_return_code CHECK (((return_code IS NULL) OR (return_reason IS NOT NULL))),
    CONSTRAINT payouts_return_reason CHECK (((status = 'returned'::text) = (return_reason IS NOT NULL))),
    CONSTRAINT payouts_short_not_handed_over CHECK (((failure_reason IS DISTINCT FROM 'deposit_short'::text) OR (handover_at IS NULL))),
    CONSTRAINT payouts_status CHECK ((status = ANY (ARRAY['awaiting_deposit'::text, 'processing'::text, 'completed'::text, 'returned'::text, 'expired'::text, 'failed'::text])))
);

ALTER TABLE ONLY public.payout_sweeps ALTER COLUMN id SET DEFAULT nextval('public.payout_sweeps_id_seq'::regclass);

ALTER TABLE ONLY public.idempotency_keys
    ADD CONSTRAINT idempotency_keys_pkey PRIMARY KEY (key_id, key_hash);

ALTER TABLE ONLY public.payout_chain_blocks
    ADD CONSTRAINT payout_chain_blocks_pkey PRIMARY KEY (chain, number);

ALTER TABLE ONLY public.payout_chain_nonces
    ADD CONSTRAINT payout_chain_nonces_pkey PRIMARY KEY (chain, sender);

ALTER TABLE ONLY public.payout_chain_send_versions
    ADD CONSTRAINT payout_chain_send_versions_pkey PRIMARY KEY (hash);

ALTER TABLE ONLY public.payout_chain_sends
    ADD CONSTRAINT payout_chain_sends_pkey PRIMARY KEY (chain, sender, nonce);

ALTER TABLE ONLY public.payout_chain_watch
    ADD CONSTRAINT payout_chain_watch_pkey PRIMARY KEY (chain);

ALTER TABLE ONLY public.payout_deposits_held
    ADD CONSTRAINT payout_deposits_held_pkey PRIMARY KEY (chain, tx_hash, log_index);

ALTER TABLE ONLY public.payout_deposits
    ADD CONSTRAINT payout_deposits_pkey PRIMARY KEY (chain, tx_hash, log_index);

ALTER TABLE ONLY public.payout_event_horizons
    ADD CONSTRAINT payout_event_horizons_pkey PRIMARY KEY (key_id);

ALTER TABLE ONLY public.payout_event_sequencer
    ADD CONSTRAINT payout_event_sequencer_pkey PRIMARY KEY (one);

ALTER TABLE ONLY public.payout_events
    ADD CONSTRAINT payout_events_pkey PRIMARY KEY (n);

ALTER TABLE ONLY public.payout_faucet_sends
    ADD CONSTRAINT payout_faucet_sends_pkey PRIMARY KEY (id);

ALTER TABLE ONLY public.payout_history
    ADD CONSTRAINT payout_history_pkey PRIMARY KEY (payout_id, status);

ALTER TABLE ONLY public.payout_provider_changes
    ADD CONSTRAINT payout_provider_changes_pkey PRIMARY KEY (change_id);

ALTER TABLE ONLY public.payout_provider_feed
    ADD CONSTRAINT payout_provider_feed_pkey PRIMARY KEY (provider);

ALTER TABLE ONLY public.payout_quote_holds
    ADD CONSTRAINT payout_quote_holds_pkey PRIMARY KEY (quote_id);

ALTER TABLE ONLY public.payout_refunds
    ADD CONSTRAINT payout_refunds_once_per_cause UNIQUE (payout_id, reason, deposit_tx_hash, deposit_log_index);

ALTER TABLE ONLY public.payout_refunds
    ADD CONSTRAINT payout_refunds_pkey PRIMARY KEY (id);

ALTER TABLE ONLY public.payout_sweeps
    ADD CONSTRAINT payout_sweeps_pkey PRIMARY KEY (id);

ALTER TABLE ONLY public.payouts
    ADD CONSTRAINT payouts_deposit_address_unique UNIQUE (deposit_address);

ALTER TABLE ONLY public.payouts
    ADD CONSTRAINT payouts_deposit_index_unique UNIQUE (deposit_index);

ALTER TABLE ONLY public.payouts
    ADD CONSTRAINT payouts_pkey PRIMARY KEY (id);

ALTER TABLE ONLY public.payouts
    ADD CONSTRAINT payouts_quote_executes_once UNIQUE (quote_id);

CREATE INDEX idempotency_keys_created_at ON public.idempotency_keys USING btree (created_at);

CREATE INDEX payout_chain_send_versions_send ON public.payout_chain_send_versions USING btree (chain, sender, nonce, signed_at);

CREATE INDEX payout_chain_sends_dropped ON public.payout_chain_sends USING btree (chain) WHERE (state = 'dropped'::text);

CREATE UNIQUE INDEX payout_chain_sends_one_open_per_sweep ON public.payout_chain_sends USING btree (sweep_id) WHERE (state = ANY (ARRAY['signed'::text, 'broadcast'::text]));

CREATE UNIQUE INDEX payout_chain_sends_one_per_refund ON public.payout_chain_sends USING btree (refund_id) WHERE (state <> 'dropped'::text);

CREATE INDEX payout_chain_sends_open ON public.payout_chain_sends USING btree (chain, sender, nonce) WHERE (state = ANY (ARRAY['signed'::text, 'broadcast'::text]));

CREATE INDEX payout_deposits_held_due ON public.payout_deposits_held USING btree (chain, retry_at);

CREATE INDEX payout_deposits_payout ON public.payout_deposits USING btree (payout_id);

CREATE INDEX payout_deposits_unswept ON public.payout_deposits USING btree (chain, recorded_at) WHERE (sweep_id IS NULL);

CREATE UNIQUE INDEX payout_events_feed ON public.payout_events USING btree (key_id, seq) WHERE (seq IS NOT NULL);

CREATE INDEX payout_events_object ON public.payout_events USING btree (key_id, object_id, seq);

CREATE INDEX payout_events_unsequenced ON public.payout_events USING btree (n) WHERE (seq IS NULL);

CREATE INDEX payout_provider_changes_applied_at ON public.payout_provider_changes USING btree (applied_at);

CREATE INDEX payout_quote_holds_held_at ON public.payout_quote_holds USING btree (held_at);

CREATE INDEX payout_refunds_by_chain_to_send ON public.payout_refunds USING btree (chain, pending_at) WHERE (status = 'pending'::text);

CREATE INDEX payout_refunds_owed ON public.payout_refunds USING btree (status) WHERE (status = ANY (ARRAY['awaiting_address'::text, 'pending'::text]));

CREATE INDEX payout_refunds_payout ON public.payout_refunds USING btree (payout_id);

CREATE INDEX payout_refunds_to_send ON public.payout_refunds USING btree (pending_at) WHERE (status = 'pending'::text);

CREATE UNIQUE INDEX payout_sweeps_one_open_per_address ON public.payout_sweeps USING btree (chain, address) WHERE (state <> 'swept'::text);

CREATE INDEX payout_sweeps_open ON public.payout_sweeps USING btree (chain, state, id) WHERE (state <> 'swept'::text);

CREATE INDEX payouts_expiring ON public.payouts USING btree (deposit_expires_at) WHERE ((status = 'awaiting_deposit'::text) AND (handover_at IS NULL));

CREATE INDEX payouts_handover_due ON public.payouts USING btree (handover_next_at) WHERE (handover_next_at IS NOT NULL);

CREATE INDEX payouts_in_flight ON public.payouts USING btree (status, rail, status_at) WHERE (status = ANY (ARRAY['awaiting_deposit'::text, 'processing'::text]));

CREATE INDEX payouts_key_page ON public.payouts USING btree (key_id, created_at DESC, id DESC);

CREATE INDEX payouts_key_reference_page ON public.payouts USING btree (key_id, reference, created_at DESC, id DESC) WHERE (reference IS NOT NULL);

CREATE INDEX payouts_key_status_page ON public.payouts USING btree (key_id, status, created_at DESC, id DESC);

CREATE INDEX payouts_missing_at_provider ON public.payouts USING btree (provider_missing_at) WHERE (provider_missing_at IS NOT NULL);

CREATE INDEX payouts_reconcile_due ON public.payouts USING btree (reconcile_at) WHERE (reconcile_at IS NOT NULL);

CREATE TRIGGER idempotency_keys_finished_is_final BEFORE UPDATE ON public.idempotency_keys FOR EACH ROW WHEN ((old.finished_at IS NOT NULL)) EXECUTE FUNCTION public.idempotency_keys_finished_is_final();

CREATE TRIGGER payout_chain_sends_bound BEFORE UPDATE ON public.payout_chain_sends FOR EACH ROW EXECUTE FUNCTION public.payout_chain_sends_bound();

CREATE TRIGGER payout_refunds_bound BEFORE UPDATE ON public.payout_refunds FOR EACH ROW EXECUTE FUNCTION public.payout_refunds_bound();

CREATE TRIGGER payouts_bound BEFORE UPDATE ON public.payouts FOR EACH ROW EXECUTE FUNCTION public.payouts_bound();

CREATE TRIGGER payouts_created_now BEFORE INSERT ON public.payouts FOR EACH ROW EXECUTE FUNCTION public.payouts_created_now();

CREATE TRIGGER payouts_history AFTER INSERT OR UPDATE OF status ON public.payouts FOR EACH ROW EXECUTE FUNCTION public.payouts_history();

CREATE TRIGGER payouts_history_kept BEFORE INSERT OR UPDATE ON public.payouts FOR EACH ROW EXECUTE FUNCTION public.payouts_history_kept();

ALTER TABLE ONLY public.payout_chain_send_versions
    ADD CONSTRAINT payout_chain_send_versions_chain_sender_nonce_fkey FOREIGN KEY (chain, sender, nonce) REFERENCES public.payout_chain_sends(chain, sender, nonce);

ALTER TABLE ONLY public.payout_chain_sends
    ADD CONSTRAINT payout_chain_sends_refund_id_fkey FOREIGN KEY (refund_id) REFERENCES public.payout_refunds(id);

ALTER TABLE ONLY public.payout_chain_sends
    ADD CONSTRAINT payout_chain_sends_sweep_id_fkey FOREIGN KEY (sweep_id) REFERENCES public.payout_sweeps(id);

ALTER TABLE ONLY public.payout_deposits
    ADD CONSTRAINT payout_deposits_payout_id_fkey FOREIGN KEY (payout_id) REFERENCES public.payouts(id);

ALTER TABLE ONLY public.payout_deposits
    ADD CONSTRAINT payout_deposits_sweep_id_fkey FOREIGN KEY (sweep_id) REFERENCES public.payout_sweeps(id);

ALTER TABLE ONLY public.payout_history
    ADD CONSTRAINT payout_history_payout_id_fkey FOREIGN KEY (payout_id) REFERENCES public.payouts(id);

ALTER TABLE ONLY public.payout_refunds
    ADD CONSTRAINT payout_refunds_payout_id_fkey FOREIGN KEY (payout_id) REFERENCES public.payouts(id);
