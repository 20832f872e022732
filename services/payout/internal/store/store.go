// Package store keeps payouts in PostgreSQL, the system of record: a
// payout's execution (once per quote, bound to its beneficiary), every
// change the service or the mover decides (record.Change), with its
// events, in one short transaction that reads the payout as it stands,
// and the queues the mover claims from (queues.go). The migrations here
// make services/payout/schema.sql.
package store

import (
	"context"
	"embed"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/partnerpay/api/pkg/database"
	"github.com/partnerpay/api/pkg/environment"
	"github.com/partnerpay/api/pkg/events"
	"github.com/partnerpay/api/pkg/idempotency"
	"github.com/partnerpay/api/pkg/lifecycle"
	"github.com/partnerpay/api/pkg/listing"
	"github.com/partnerpay/api/services/payout/internal/answer"
	"github.com/partnerpay/api/services/payout/internal/record"
	"github.com/partnerpay/api/services/payout/internal/simbug"
)

//go:embed migrations
var migrations embed.FS

// Migrations is the payout service's schema (services/payout/schema.sql
// is what they make).
var Migrations = database.MigrationsIn("payout", migrations)

// Feed is the service's events feed (DESIGN §9), in tables of its own.
var Feed = events.For("payout")

// ErrNotFound is a payout the store does not have.
var ErrNotFound = errors.New("payout not found")

// ErrExpired is a payout refused by the database because its quote had
// expired on the database's clock.
var ErrExpired = errors.New("payout: the quote expired")

// Store keeps payouts in the system of record.
type Store struct {
	db *database.DB
	// view renders the objects of the events the store writes: every
	// status change of a payout or of one of its refunds writes its event
	// (pkg/events) in the transaction of the change.
	view answer.View
	env  environment.Name
	// metrics counts the moves that commit (nil: not counted).
	metrics *Metrics
}

// Measure has the store count the moves that commit in m.
func (s *Store) Measure(m *Metrics) { s.metrics = m }

// counted counts the moves of changes, committed.
func (s *Store) counted(changes ...record.Change) {
	for _, c := range changes {
		for _, st := range c.Steps {
			if st.To != "" {
				s.metrics.Moved(st.To, 1)
			}
		}
	}
}

// NewStore returns the store on db, of payouts in env.
func NewStore(db *database.DB, env environment.Name) *Store {
	return &Store{db: db, view: answer.NewView(env), env: env}
}

const payoutColumns = `p.id, p.quote_id, p.key_id, p.beneficiary_name, p.beneficiary, p.chain, p.crypto_currency, p.fiat_currency,
	p.country, COALESCE(p.crypto_amount, ''), COALESCE(p.fiat_amount, ''), p.rail, p.estimated_settlement, p.status, p.quote_expires_at,
	p.created_at, COALESCE(p.reference, ''), COALESCE(p.refund_address, ''), p.deposit_address, p.deposit_expires_at,
	COALESCE(p.deposit_tx_hash, ''), COALESCE(p.deposit_amount, ''), p.handover_at, p.handed_over_at, p.completed_at,
	COALESCE(p.failure_reason, ''), COALESCE(p.return_reason, ''), COALESCE(p.return_code, ''), COALESCE(p.provider_code, ''),
	COALESCE(p.sandbox_outcome, ''), COALESCE(p.sandbox_reason, ''), p.status_at, p.provider_missing_at, p.reconcile_checks, p.failures`

// recordColumns are a payout's columns and, in the same row, its history
// (its statuses and their times, in the order it moved, as two arrays the
// row keeps: its triggers append to them, and pgx reads them in binary
// without a JSON decoder) and its refunds (a JSON array, most often
// empty), from recordFrom: one statement reads a payout or a page whole.
const recordColumns = payoutColumns + `, p.history_statuses, p.history_times, r.refunds`

// recordFrom is payouts p with each row's refunds, read by one probe of
// their index per payout. The history is the row's own (migration 15): read
// from payout_history, by a probe per payout, it was 404 of a page's 615
// shared buffers at 100,000 payouts (and 1,019 when its two arrays were two
// subqueries; BenchmarkList). Only the rows a page keeps are probed: the
// nested loop runs under its LIMIT.
const recordFrom = `payouts p
	CROSS JOIN LATERAL (SELECT COALESCE(json_agg(json_build_object('id', r.id, 'reason', r.reason, 'status', r.status, 'amount', r.amount,
		'crypto_currency', r.crypto_currency, 'chain', r.chain, 'deposit_tx_hash', r.deposit_tx_hash, 'address', COALESCE(r.address, ''),
		'tx_hash', COALESCE(r.tx_hash, ''), 'created_at', r.created_at, 'sent_at', r.sent_at, 'confirmed_at', r.confirmed_at) ORDER BY r.created_at, r.id), '[]') AS refunds
		FROM payout_refunds r WHERE r.payout_id = p.id) r`

func payoutFields(p *record.StoredPayout, fields *string) []any {
	return []any{&p.ID, &p.QuoteID, &p.KeyID, &p.BeneficiaryName, fields, &p.Chain, &p.CryptoCurrency,
		&p.FiatCurrency, &p.Country, &p.CryptoAmount, &p.FiatAmount, &p.Rail, &p.Settlement, &p.Status, &p.QuoteExpiresAt,
		&p.CreatedAt, &p.Reference, &p.RefundAddress, &p.DepositAddress, &p.DepositExpiresAt, &p.DepositTxHash, &p.DepositAmount,
		&p.HandoverAt, &p.HandedOverAt, &p.CompletedAt, &p.FailureReason, &p.ReturnReason, &p.ReturnCode, &p.ProviderCode,
		&p.SandboxOutcome, &p.SandboxReason, &p.StatusAt, &p.ProviderMissingAt, &p.ReconcileChecks, &p.Failures}
}

func scanPayout(row pgx.Row) (record.StoredPayout, error) {
	var p record.StoredPayout
	var fields string
	err := row.Scan(payoutFields(&p, &fields)...)
	if errors.Is(err, database.ErrNoRows) {
		return p, ErrNotFound
	}
	p.Beneficiary = []byte(fields)
	return p, err
}

func scanRecord(row pgx.Row) (record.Record, error) {
	var r record.Record
	var fields string
	var statuses []string
	var times []time.Time
	var refunds []byte
	err := row.Scan(append(payoutFields(&r.StoredPayout, &fields), &statuses, &times, &refunds)...)
	if errors.Is(err, database.ErrNoRows) {
		return r, ErrNotFound
	}
	if err != nil {
		return r, err
	}
	r.Beneficiary = []byte(fields)
	if len(statuses) != len(times) {
		return r, fmt.Errorf("payout history: %d statuses, %d times", len(statuses), len(times))
	}
	r.History = make([]record.Move, len(statuses))
	for i := range statuses {
		r.History[i] = record.Move{Status: statuses[i], At: times[i].UTC()}
	}
	r.Refunds = []record.Refund{}
	if string(refunds) != "[]" {
		if err := json.Unmarshal(refunds, &r.Refunds); err != nil {
			return r, fmt.Errorf("payout refunds: %w", err)
		}
	}
	for i := range r.Refunds {
		r.Refunds[i].CreatedAt = r.Refunds[i].CreatedAt.UTC()
		if t := r.Refunds[i].SentAt; t != nil {
			*t = t.UTC()
		}
	}
	r.History = orderMoves(r.History)
	return r, nil
}

func byQuote(ctx context.Context, q database.Querier, quoteID string) (record.Record, error) {
	return scanRecord(q.QueryRow(ctx, `SELECT `+recordColumns+` FROM `+recordFrom+` WHERE p.quote_id = $1`, quoteID))
}

func byID(ctx context.Context, q database.Querier, id string, lock string) (record.Record, error) {
	return scanRecord(q.QueryRow(ctx, `SELECT `+recordColumns+` FROM `+recordFrom+` WHERE p.id = $1`+lock, id))
}

// ByQuote is the payout a quote was executed as; ErrNotFound when it was
// not. A payout found is confirmed on a synchronous standby before it is
// returned (database.DB.ReadBack): it may have been made by a commit whose
// wait for the standby was cut short, and an answer rests on it.
func (s *Store) ByQuote(ctx context.Context, quoteID string) (record.Record, error) {
	r, err := byQuote(ctx, s.db, quoteID)
	return r, s.db.ReadBack(ctx, err)
}

// ByID is a payout with its history and refunds; ErrNotFound when there is
// none. Like ByQuote, what it returns is confirmed on the standby.
func (s *Store) ByID(ctx context.Context, id string) (record.Record, error) {
	r, err := byID(ctx, s.db, id, "")
	return r, s.db.ReadBack(ctx, err)
}

// IsDepositAddress reports whether address (checksummed) is one of our
// deposit addresses.
func (s *Store) IsDepositAddress(ctx context.Context, address string) (bool, error) {
	var ours bool
	err := s.db.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM payouts WHERE deposit_address = $1)`, address).Scan(&ours)
	return ours, err
}

// orderMoves puts moves made in the same instant in the order of the
// arrows (a worker that learns of a completion and a return at once).
func orderMoves(m []record.Move) []record.Move {
	rank := map[string]int{"awaiting_deposit": 0, "processing": 1, "expired": 1, "completed": 2, "failed": 2, "returned": 3}
	for i := 1; i < len(m); i++ {
		for j := i; j > 0 && m[j].At.Equal(m[j-1].At) && rank[m[j].Status] < rank[m[j-1].Status]; j-- {
			m[j], m[j-1] = m[j-1], m[j]
		}
	}
	return m
}

// Execute commits p unless its quote was executed already, and answers
// whichever payout the quote was executed as, through render (which
// refuses another beneficiary). The payout, its first history row (a
// trigger) and, for a request with an Idempotency-Key, the answer commit
// together, once. The commit returns once a synchronous standby has it, so
// an acknowledged payout survives the primary's loss; when it does not
// return in time, the outcome is unknown (database.ErrOutcomeUnknown) and
// the commit goes on. A payout read back, made by another request, is
// confirmed on the standby before it is answered (a commit of ours that
// wrote the idempotency answer confirms it by itself).
func (s *Store) Execute(ctx context.Context, p record.StoredPayout, render func(record.Record) (answer.Payout, error)) (answer.Payout, error) {
	if !idempotency.Claimed(ctx) {
		// Nothing to keep beside the payout: one statement (its history row
		// is a trigger's), committed on its own, one round trip.
		args, err := s.insertArgs(p)
		if err != nil {
			return answer.Payout{}, err
		}
		err = s.db.CommitRow(ctx, []any{&p.CreatedAt}, insertSQL, args...)
		switch {
		case err == nil:
			s.metrics.Moved(p.Status, 1)
			return render(newRecord(p))
		case database.Violates(err, "payouts_not_after_expiry"):
			return answer.Payout{}, ErrExpired
		case !errors.Is(err, database.ErrNoRows):
			return answer.Payout{}, fmt.Errorf("insert payout: %w", err)
		}
		stored, err := s.ByQuote(ctx, p.QuoteID) // confirmed on the standby
		switch {
		case errors.Is(err, ErrNotFound):
			return answer.Payout{}, ErrHeld // no payout of it, and not made: bound to another
		case err != nil:
			return answer.Payout{}, fmt.Errorf("read the quote's payout: %w", err)
		}
		return render(stored)
	}
	var out answer.Payout
	made := false
	err := s.db.Tx(ctx, func(tx pgx.Tx) error {
		stored, err := s.insertPayout(ctx, tx, p)
		if err != nil {
			return err
		}
		made = stored.ID == p.ID
		if out, err = render(stored); err != nil {
			return err
		}
		// The answer commits with the payout: this commit waits for the
		// standby, and so confirms a payout read back as well.
		return idempotency.Answer(ctx, tx, out)
	})
	if err != nil {
		return answer.Payout{}, err
	}
	if made {
		s.metrics.Moved(p.Status, 1)
	}
	return out, nil
}

// newRecord is p just made: awaiting its deposit since its creation,
// owing nothing.
func newRecord(p record.StoredPayout) record.Record {
	return record.Record{StoredPayout: p, History: []record.Move{{Status: p.Status, At: p.StatusAt}}, Refunds: []record.Refund{}}
}

// A new payout is in the expiry queue by its deposit window's end. Its
// event (payout.awaiting_deposit) is written by the same statement, once
// the insert is known to have made it: its object's createdAt is the
// database's (createdMark, replaced).
const insertSQL = `WITH p AS (
		INSERT INTO payouts (id, quote_id, key_id, beneficiary_name, beneficiary, chain,
			crypto_currency, fiat_currency, country, crypto_amount, fiat_amount, rail, estimated_settlement, status,
			quote_expires_at, created_at, reference, refund_address, deposit_address, deposit_expires_at, status_at, deposit_index)
		SELECT $1, $2, $3, $4, $5, $6::bigint, $7, $8, $9, NULLIF($10, ''), NULLIF($11, ''), $12, $13, $14, $15::timestamptz,
			$16::timestamptz, NULLIF($17, ''), NULLIF($18, ''), $19, $20::timestamptz, $21::timestamptz, $26::bigint
		WHERE NOT EXISTS (SELECT 1 FROM payout_quote_holds h WHERE h.quote_id = $2 AND h.beneficiary_digest <> $25)
		ON CONFLICT (quote_id) DO NOTHING RETURNING id, key_id, created_at),
	e AS (
		INSERT INTO payout_events (id, key_id, type, object_id, created_at, data)
		SELECT $22, p.key_id, $23, p.id, p.created_at,
			replace($24, '` + createdMark + `', to_char(p.created_at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS"Z"'))::json
		FROM p)
	SELECT created_at FROM p`

// ErrHeld is a payout refused because its quote is bound to another
// beneficiary (payout_quote_holds): a keyed execution for that one holds it.
var ErrHeld = errors.New("payout: the quote is bound to another beneficiary")

// Hold binds the quote to a beneficiary (digest of its fields) before a
// keyed execution claims its Idempotency-Key, so a claim that survives a
// failover has its binding too. A binding there already stays. Its commit
// waits for the local flush only (synchronous_commit = local): WAL is
// ordered, so the claim's commit, which waits for the synchronous standby,
// is after it on every standby that has the claim; waiting for the
// standby twice would only double a stalled standby's wait.
func (s *Store) Hold(ctx context.Context, quoteID, beneficiaryDigest string) error {
	return s.db.Tx(ctx, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `SET LOCAL synchronous_commit = local`); err != nil {
			return err
		}
		_, err := tx.Exec(ctx, `INSERT INTO payout_quote_holds (quote_id, beneficiary_digest, held_at) VALUES ($1, $2, now())
			ON CONFLICT (quote_id) DO NOTHING`, quoteID, beneficiaryDigest)
		return err
	})
}

// Held is the digest of the beneficiary quote quoteID is bound to, ""
// when none is.
func (s *Store) Held(ctx context.Context, quoteID string) (string, error) {
	var d string
	err := s.db.QueryRow(ctx, `SELECT beneficiary_digest FROM payout_quote_holds WHERE quote_id = $1`, quoteID).Scan(&d)
	if errors.Is(err, database.ErrNoRows) {
		return "", nil
	}
	return d, err
}

// ForgetHolds deletes up to a batch of the bindings older than before:
// their quotes have long expired.
func (s *Store) ForgetHolds(ctx context.Context, before time.Time) error {
	_, err := s.db.Exec(ctx, `DELETE FROM payout_quote_holds WHERE quote_id IN (
		SELECT quote_id FROM payout_quote_holds WHERE held_at < $1 ORDER BY held_at LIMIT 1000)`, before)
	return err
}

// createdMark stands for a new payout's createdAt in its event's object,
// until the insert knows it.
const createdMark = "@@created_at@@"

// insertArgs are insertSQL's arguments for p, with its event.
func (s *Store) insertArgs(p record.StoredPayout) ([]any, error) {
	r := newRecord(p)
	st := s.view.Status(r)
	st.CreatedAt = createdMark
	e, err := events.New(s.env, p.KeyID, eventType(p.Status), p.ID, p.StatusAt, st, "")
	if err != nil {
		return nil, err
	}
	return []any{p.ID, p.QuoteID, p.KeyID, p.BeneficiaryName, string(p.Beneficiary), p.Chain, p.CryptoCurrency, p.FiatCurrency,
		p.Country, p.CryptoAmount, p.FiatAmount, p.Rail, p.Settlement, p.Status, p.QuoteExpiresAt, p.CreatedAt,
		p.Reference, p.RefundAddress, p.DepositAddress, p.DepositExpiresAt, p.StatusAt, events.NewID(), e.Type, string(e.Data),
		record.Digest(p.Beneficiary), p.DepositIndex}, nil
}

// eventType is the event of a payout's move to status; refundEventType of
// a refund's.
func eventType(status string) string       { return "payout." + status }
func refundEventType(status string) string { return "payout.refund." + status }

// insertPayout inserts p unless its quote has a payout, and returns the
// quote's payout: p (inserted, with the database's created_at), or the one
// executed before. created_at is the database's now() (a trigger), and a
// quote past its expiry on that clock is refused (ErrExpired).
func (s *Store) insertPayout(ctx context.Context, tx pgx.Tx, p record.StoredPayout) (record.Record, error) {
	args, err := s.insertArgs(p)
	if err != nil {
		return record.Record{}, err
	}
	err = tx.QueryRow(ctx, insertSQL, args...).Scan(&p.CreatedAt)
	switch {
	case err == nil:
		return newRecord(p), nil
	case database.Violates(err, "payouts_not_after_expiry"):
		return record.Record{}, ErrExpired
	case !errors.Is(err, database.ErrNoRows):
		return record.Record{}, fmt.Errorf("insert payout: %w", err)
	}
	stored, err := byQuote(ctx, tx, p.QuoteID)
	switch {
	case errors.Is(err, ErrNotFound):
		return record.Record{}, ErrHeld
	case err != nil:
		return record.Record{}, fmt.Errorf("read the quote's payout: %w", err)
	}
	return stored, nil
}

const stepSQL = `UPDATE payouts SET status = COALESCE(NULLIF($2, ''), status),
		status_at = CASE WHEN $2 = '' THEN status_at ELSE $3 END,
		deposit_tx_hash = COALESCE(NULLIF($4, ''), deposit_tx_hash), deposit_amount = COALESCE(NULLIF($5, ''), deposit_amount),
		handover_at = COALESCE($6, handover_at), handed_over_at = COALESCE($7, handed_over_at), completed_at = COALESCE($8, completed_at),
		failure_reason = COALESCE(NULLIF($9, ''), failure_reason), return_reason = COALESCE(NULLIF($10, ''), return_reason),
		return_code = COALESCE(NULLIF($11, ''), return_code), sandbox_outcome = COALESCE(NULLIF($12, ''), sandbox_outcome),
		sandbox_reason = COALESCE(NULLIF($13, ''), sandbox_reason), refund_address = COALESCE(NULLIF($14, ''), refund_address),
		provider_code = COALESCE(NULLIF($15, ''), provider_code)
	WHERE id = $1`

// queueSQL writes where a payout stands in the worker's queues, and
// clears its failures: it moved.
const queueSQL = `UPDATE payouts SET
		handover_next_at = CASE WHEN $2::boolean THEN NULL ELSE COALESCE($3::timestamptz, handover_next_at) END,
		reconcile_at = CASE WHEN $4::boolean THEN NULL ELSE COALESCE($5::timestamptz, reconcile_at) END,
		reconcile_checks = reconcile_checks + CASE WHEN $6::boolean THEN 1 ELSE 0 END,
		provider_missing_at = COALESCE(provider_missing_at, $7::timestamptz),
		retry_at = NULL, failures = 0
	WHERE id = $1`

// A refund owed is awaiting its address until the payout has one, then
// pending; once per cause.
const refundSQL = `INSERT INTO payout_refunds (id, payout_id, reason, status, amount, crypto_currency, chain, deposit_tx_hash,
		address, created_at, pending_at, deposit_log_index)
	SELECT $1, p.id, $3, CASE WHEN p.refund_address IS NULL THEN 'awaiting_address' ELSE 'pending' END, $4, $5, $6, $7,
		p.refund_address, $8, CASE WHEN p.refund_address IS NULL THEN NULL ELSE $8::timestamptz END, $9
	FROM payouts p WHERE p.id = $2
	ON CONFLICT (payout_id, reason, deposit_tx_hash, deposit_log_index) DO NOTHING`

// apply writes c to payout id, in tx, with the events of what it changed:
// the payout's moves (status was its status before) and its refunds' (made
// owed, or sent to the address just set). Every event carries the payout
// as it stands once c is written.
func (s *Store) apply(ctx context.Context, tx pgx.Tx, id, status string, c record.Change) error {
	var pending []string // refunds that went to the address set
	for _, st := range c.Steps {
		if _, err := tx.Exec(ctx, stepSQL, id, st.To, st.At, st.DepositTxHash, st.DepositAmount, st.HandoverAt, st.HandedOverAt,
			st.CompletedAt, st.FailureReason, st.ReturnReason, st.ReturnCode, st.SandboxOutcome, st.SandboxReason, st.RefundAddress,
			st.ProviderCode); err != nil {
			return fmt.Errorf("payout %s → %q: %w", id, st.To, err)
		}
		if st.RefundAddress != "" {
			// Refunds awaiting the address go to it now.
			rows, err := tx.Query(ctx, `UPDATE payout_refunds SET status = 'pending', address = $2, pending_at = $3
				WHERE payout_id = $1 AND status = 'awaiting_address' RETURNING id`, id, st.RefundAddress, st.At)
			if err == nil {
				pending, err = pgx.CollectRows(rows, pgx.RowTo[string])
			}
			if err != nil {
				return fmt.Errorf("refunds of %s to their address: %w", id, err)
			}
		}
	}
	for _, r := range c.Refunds {
		if _, err := tx.Exec(ctx, refundSQL, r.ID, id, r.Reason, r.Amount, r.CryptoCurrency, r.Chain, r.DepositTxHash, r.CreatedAt,
			r.DepositLogIndex); err != nil {
			return fmt.Errorf("refund %s of %s: %w", r.Reason, id, err)
		}
	}
	if c.Queued() {
		if _, err := tx.Exec(ctx, queueSQL, id, c.HandedOver, c.HandOver, c.Reconciled, c.Reconcile, c.Checked, c.Missing); err != nil {
			return fmt.Errorf("payout %s in its queues: %w", id, err)
		}
	}
	return s.changed(ctx, tx, id, status, c, pending)
}

// changed writes the events of c, a change of payout id from status (and
// of the refunds that went pending), in tx.
func (s *Store) changed(ctx context.Context, tx pgx.Tx, id, status string, c record.Change, pending []string) error {
	type happened struct {
		typ, previous, refund string
		at                    time.Time
	}
	var what []happened
	for _, st := range c.Steps {
		if st.To != "" {
			what = append(what, happened{eventType(st.To), status, "", st.At})
			status = st.To
		}
		if st.RefundAddress != "" {
			for _, refund := range pending {
				what = append(what, happened{refundEventType(lifecycle.RefundPending), lifecycle.RefundAwaitingAddress, refund, st.At})
			}
		}
	}
	for _, r := range c.Refunds {
		what = append(what, happened{"", "", r.ID, r.CreatedAt}) // made owed, if it was (once per cause)
	}
	// A refund's event says which refund it is about (data.refundId).
	if len(what) == 0 {
		return nil
	}
	r, err := byID(ctx, tx, id, "")
	if err != nil {
		return err
	}
	object := s.view.Status(r)
	evs := make([]events.Event, 0, len(what))
	for _, h := range what {
		if h.refund != "" && h.typ == "" {
			i := slices.IndexFunc(r.Refunds, func(f record.Refund) bool { return f.ID == h.refund })
			if i < 0 {
				continue // owed already, for the same cause: no new refund
			}
			h.typ = refundEventType(r.Refunds[i].Status)
		}
		e, err := events.New(s.env, r.KeyID, h.typ, id, h.at, object, h.previous)
		if err != nil {
			return err
		}
		if h.refund != "" {
			e = e.With("refundId", h.refund)
		}
		evs = append(evs, e)
	}
	return Feed.Write(ctx, tx, evs...)
}

// Update locks payout id, asks decide what to make of it as it stands, and
// writes that in the same transaction: two callers deciding on one payout
// take turns, each deciding on what the other left. It answers the payout
// as it then is; ErrNotFound when there is none. decide's error rolls the
// transaction back and is returned as it is.
func (s *Store) Update(ctx context.Context, id string, decide func(record.Record) (record.Change, error)) (record.Record, error) {
	var out record.Record
	var c record.Change
	var apart []record.Refund
	err := s.db.Tx(ctx, func(tx pgx.Tx) error {
		r, err := byID(ctx, tx, id, " FOR UPDATE OF p")
		if err != nil {
			return err
		}
		if c, err = decide(r); err != nil {
			return err
		}
		write := c
		if simbug.Planted("refund-apart") {
			apart, write.Refunds = c.Refunds, nil
		}
		if err := s.apply(ctx, tx, id, r.Status, write); err != nil {
			return err
		}
		out, err = byID(ctx, tx, id, "")
		return err
	})
	if err == nil && len(apart) > 0 {
		err = s.db.Tx(ctx, func(tx pgx.Tx) error {
			r, err := byID(ctx, tx, id, " FOR UPDATE OF p")
			if err != nil {
				return err
			}
			return s.apply(ctx, tx, id, r.Status, record.Change{Refunds: apart})
		})
	}
	if err == nil {
		s.counted(c)
	}
	return out, err
}

// sent marks refund id of payout sent with txHash at at, with its event.
func (s *Store) sent(ctx context.Context, tx pgx.Tx, id, payout, txHash string, at time.Time) error {
	if _, err := tx.Exec(ctx, `UPDATE payout_refunds SET status = 'sent', tx_hash = $2, sent_at = $3, retry_at = NULL, failures = 0 WHERE id = $1`,
		id, txHash, at); err != nil {
		return fmt.Errorf("refund %s sent: %w", id, err)
	}
	p, err := byID(ctx, tx, payout, "")
	if err != nil {
		return err
	}
	e, err := events.New(s.env, p.KeyID, refundEventType(lifecycle.RefundSent), p.ID, at, s.view.Status(p), lifecycle.RefundPending)
	if err != nil {
		return err
	}
	return Feed.Write(ctx, tx, e.With("refundId", id))
}

// PageSQL is the statement of a page of limit payouts where where holds,
// newest first, one more to tell whether more follow.
func PageSQL(where string, limit int) string {
	return `SELECT ` + recordColumns + ` FROM ` + recordFrom + ` WHERE ` + where +
		` ORDER BY p.created_at DESC, p.id DESC LIMIT ` + strconv.Itoa(limit+1)
}

// List reads a page of the key's payouts, newest first, as p says (Limit+1
// rows at most: the extra one says there are more), each with its history
// and refunds, in one statement; what it returns is confirmed on the
// standby.
func (s *Store) List(ctx context.Context, keyID string, p listing.Params) ([]record.Record, error) {
	where, args := p.Where(keyID)
	rows, err := s.db.Query(ctx, PageSQL(where, p.Limit), args...)
	if err != nil {
		return nil, err
	}
	out, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (record.Record, error) { return scanRecord(row) })
	if err != nil {
		return nil, err
	}
	return out, s.db.Confirm(ctx)
}
