// Package idempotency makes creating POSTs safe to retry, in the manner of
// Brandur Leach's "Implementing Stripe-like Idempotency Keys in Postgres".
//
// A request carrying an Idempotency-Key claims it for its partner key (one
// row in the system of record), runs to its end whether or not its caller
// stays, and leaves the answer it got: the same key with the same request
// gets that answer again (status and body byte for byte) for 24 hours;
// with another request, 422 idempotency_key_reused; while the first is
// still running, 409 idempotency_in_progress.
//
// The answer is written in the transaction that commits the record it
// answers for (Answer, called by the service's store), so a payout and the
// record of its answer exist together or not at all. An answer that made
// nothing, a server error or a refusal of the request as sent, is not
// kept: a partner who fixes a typo and retries with the same key is
// served. An answer whose outcome is not known (its commit did not report
// back in time: 409 idempotency_in_progress) keeps its claim: what it made
// may exist. A claim carries its owner and a short lease that the owner
// renews while it works; a request whose process died leaves a claim whose
// lease runs out within seconds, and the retry takes it over with the same
// seed, so the ids it makes (NewID) are those the first attempt may
// already have used (with a provider, or in a commit that did happen) and
// it answers what the first attempt made. A replay is sent only once the
// record it replays is confirmed on a synchronous standby (DESIGN §6).
package idempotency

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"strconv"
	"time"

	"github.com/partnerpay/api/pkg/database"
	"github.com/partnerpay/api/pkg/envelope"
	"github.com/partnerpay/api/pkg/format"
	"github.com/partnerpay/api/pkg/jsonbody"
	"github.com/partnerpay/api/pkg/kithttp"
	"github.com/partnerpay/api/pkg/obs"
	"github.com/partnerpay/api/pkg/partner"
)

// Header is the request header that names an idempotent request, as the
// partner sends it; the gateway forwards it to the service as
// partner.HeaderIdempotencyKey, which is what the middleware reads.
const Header = "Idempotency-Key"

// ReplayedHeader marks an answer that is a replay of the first one.
const ReplayedHeader = "Idempotent-Replayed"

// Retention is how long an answer is remembered.
const Retention = 24 * time.Hour

// Options tune the middleware.
type Options struct {
	// Budget is how long a creating request may run once started, caller
	// or no caller: above the longest upstream timeout of the service, and
	// below the gateway's timeout for the route, so that the caller hears
	// the outcome (or that it is not known yet) from the service.
	Budget time.Duration
	// Lease is how long a claim holds its key without being renewed; its
	// owner renews it every Lease/3 while it works, so a retry may take it
	// over only when the owner died. Zero: DefaultLease.
	Lease time.Duration
}

// DefaultLease is a claim's lease: a retry recovers a dead attempt's
// request within about this long.
const DefaultLease = 2 * time.Second

// claimWait bounds the claim's own statements: a claim that cannot be
// read or taken within it (its row is held by a commit still waiting for
// the standby) answers 409 idempotency_in_progress rather than hold the
// caller.
const claimWait = 2 * time.Second

// Middleware returns the layer every creating route of a service sits
// behind, with or without the header: the request runs detached from its
// caller, within opts.Budget. A route that is a Holder holds what it must
// before a keyed request's claim.
func Middleware(store *Store, opts Options, log *slog.Logger) func(http.Handler) http.Handler {
	if opts.Budget == 0 {
		opts.Budget = 30 * time.Second
	}
	if opts.Lease == 0 {
		opts.Lease = DefaultLease
	}
	return func(next http.Handler) http.Handler {
		h := &handler{store: store, opts: opts, log: log, next: next}
		if holder, ok := next.(Holder); ok {
			h.hold = holder.Hold
		}
		return h
	}
}

// Holder is a creating route whose request must hold something before its
// Idempotency-Key is claimed. The claim is a commit that waits for the
// synchronous standby; from the moment it is sent, the request may be
// answered 409 idempotency_in_progress ("retry shortly"), a promise that
// the retry, and nobody else, gets the request's outcome, through any
// single failure (DESIGN §6), even one that loses the claim itself. What
// makes the request's effect its own (a payout's quote bound to its
// beneficiary) is therefore held before the claim, as a request without a
// key holds it before its first write.
type Holder interface {
	http.Handler
	// Hold is called with the request, its body readable, before its claim
	// is taken; not when the key already answers another request (422).
	// It returns the context the request goes on with, its claim and its
	// route: r's, or one derived from it that carries what the hold
	// learned, so that the route need not learn it again (a payout's
	// offer, already read); nil is r's.
	Hold(r *http.Request) context.Context
}

type handler struct {
	store *Store
	opts  Options
	log   *slog.Logger
	next  http.Handler
	hold  func(*http.Request) context.Context // the route's Holder, or nil
}

var (
	errMalformed  = envelope.InvalidRequest("Idempotency-Key must be 1 to 255 printable ASCII characters.")
	errReused     = envelope.New(envelope.CodeIdempotencyKeyReused, "This Idempotency-Key was used for a different request in the last 24 hours; use a new key for a new request.")
	errInProgress = envelope.New(envelope.CodeIdempotencyInProgress, "A request with this Idempotency-Key is still in progress; retry shortly.")
)

// ValidKey reports whether k is 1–255 printable ASCII characters.
func ValidKey(k string) bool {
	if len(k) < 1 || len(k) > 255 {
		return false
	}
	for i := 0; i < len(k); i++ {
		if k[i] < 0x20 || k[i] > 0x7e {
			return false
		}
	}
	return true
}

func (h *handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	// The work is not tied to the caller's connection: a caller that gives
	// up (a client timeout, the gateway's) does not cut a payout in half.
	ctx, cancel := context.WithTimeout(context.WithoutCancel(r.Context()), h.opts.Budget)
	defer cancel()
	values := r.Header.Values(partner.HeaderIdempotencyKey)
	if len(values) == 0 {
		h.next.ServeHTTP(w, r.WithContext(ctx))
		return
	}
	if len(values) > 1 || !ValidKey(values[0]) {
		kithttp.WriteError(w, errMalformed)
		return
	}
	keyID := r.Header.Get(partner.HeaderKeyID)
	if keyID == "" {
		kithttp.WriteError(w, envelope.Unauthorized())
		return
	}
	body, err := io.ReadAll(http.MaxBytesReader(nil, r.Body, jsonbody.MaxBytes))
	if err != nil {
		var tooLarge *http.MaxBytesError
		if errors.As(err, &tooLarge) {
			kithttp.WriteError(w, envelope.TooLarge())
			return
		}
		kithttp.WriteError(w, envelope.InvalidRequest("Request body could not be read."))
		return
	}
	r.Body = io.NopCloser(bytes.NewReader(body))

	fp, raw := Fingerprint(r.Method, r.URL.Path, body), rawFingerprint(r.Method, r.URL.Path, body)
	keyHash := KeyHash(values[0])
	if h.hold != nil && h.mayHold(ctx, keyID, keyHash, fp, raw) {
		if held := h.hold(r.WithContext(ctx)); held != nil {
			ctx = held
		}
		r.Body = io.NopCloser(bytes.NewReader(body))
	}
	cctx, cancel := context.WithTimeout(ctx, claimWait)
	claim, existing, err := h.store.claim(cctx, keyID, keyHash, fp, raw, h.opts.Lease)
	cancel()
	if err != nil {
		h.storeFailed(ctx, w, r, keyID, err)
		return
	}
	if existing != nil {
		switch {
		case !existing.sameRequest(fp, raw):
			kithttp.WriteError(w, errReused)
		case !existing.Finished:
			kithttp.WriteError(w, errInProgress)
		default:
			// The record may have been made by a commit whose wait for the
			// standby was cut short: it is replayed only once confirmed.
			cctx, cancel := context.WithTimeout(ctx, claimWait)
			err := h.store.Confirm(cctx)
			cancel()
			if err != nil {
				h.storeFailed(ctx, w, r, keyID, err)
				return
			}
			replay(w, existing)
		}
		return
	}
	h.run(ctx, w, r, claim, keyID)
}

// mayHold reports whether the request may hold before its claim: unless
// its key answers another request (which is 422 and must change nothing).
// A record that cannot be read is no reason not to hold: the request is
// served, or fails, as it would have.
func (h *handler) mayHold(ctx context.Context, keyID, keyHash, fp, raw string) bool {
	cctx, cancel := context.WithTimeout(ctx, claimWait)
	defer cancel()
	rec, _, err := h.store.read(cctx, keyID, keyHash)
	if err != nil {
		return true
	}
	return rec.sameRequest(fp, raw) || (rec.released && !rec.Finished)
}

// storeFailed answers a request whose claim or replay the store could not
// settle: still in progress (409, retry) while the database is there but
// slow to confirm, 500 when it is not.
func (h *handler) storeFailed(ctx context.Context, w http.ResponseWriter, r *http.Request, keyID string, err error) {
	if errors.Is(err, context.DeadlineExceeded) || database.IsOutcomeUnknown(err) {
		h.log.WarnContext(ctx, "idempotency: not settled in time; answered as in progress", "err", err, "key_id", keyID,
			"request_id", r.Header.Get(partner.HeaderRequestID))
		kithttp.WriteError(w, errInProgress)
		return
	}
	h.log.ErrorContext(ctx, "idempotency store failed", "err", err, "key_id", keyID, "request_id", r.Header.Get(partner.HeaderRequestID))
	kithttp.WriteError(w, envelope.Internal())
}

// run serves a claimed request and leaves its outcome: the answer when it
// made something (2xx), the claim as it is when its outcome is not known
// (409 idempotency_in_progress: a commit goes on, and the retry that takes
// the claim over once its lease runs out finds what it made), nothing
// otherwise.
func (h *handler) run(ctx context.Context, w http.ResponseWriter, r *http.Request, c *Claim, keyID string) {
	rec := &recorder{StatusWriter: obs.StatusWriter{ResponseWriter: w}}
	stopRenewing := h.renew(ctx, c)
	kept := false
	defer func() {
		stopRenewing()
		if kept {
			return
		}
		if rec.Header().Get(partner.HeaderErrorCode) == string(envelope.CodeIdempotencyInProgress) {
			return // the outcome is not known: the claim stays until its lease runs out
		}
		// A panic, a server error or a refusal: nothing was made, so the
		// retry runs again. A fresh context: the budget may be spent.
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer cancel()
		if err := c.store.release(rctx, c); err != nil {
			h.log.ErrorContext(rctx, "idempotency release failed; the key answers 409 until its claim lapses",
				"err", err, "key_id", keyID, "request_id", r.Header.Get(partner.HeaderRequestID))
		}
	}()
	h.next.ServeHTTP(rec, r.WithContext(withClaim(ctx, c)))
	if rec.Status() < 200 || rec.Status() > 299 {
		return
	}
	kept = true
	if c.answered != nil {
		if !bytes.Equal(c.answered, rec.body.Bytes()) {
			h.log.ErrorContext(ctx, "idempotency: the answer kept with the record differs from the one sent",
				"key_id", keyID, "request_id", r.Header.Get(partner.HeaderRequestID))
		}
		return
	}
	// The record this answers for was there before (an executed quote's
	// payout) or lives at the provider: the answer is kept on its own.
	fctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	if err := c.store.finish(fctx, c.store.db, c, rec.Status(), rec.body.Bytes()); err != nil {
		// The answer has gone out; a retry runs the request again, which
		// finds what this one made (its ids come from the claim's seed).
		kept = false
		h.log.ErrorContext(fctx, "idempotency completion failed", "err", err, "key_id", keyID, "request_id", r.Header.Get(partner.HeaderRequestID))
	}
}

// renew keeps c's lease while the request works, until the returned func
// is called or the request's record is being committed (Answer). One
// renewal at a time; one that fails is tried again at the next tick, so a
// slow database costs the lease only when it outlasts it.
func (h *handler) renew(ctx context.Context, c *Claim) (stop func()) {
	done := make(chan struct{})
	every := c.lease / 3
	go func() {
		t := time.NewTicker(every)
		defer t.Stop()
		for {
			select {
			case <-done:
				return
			case <-t.C:
			}
			if c.answering.Load() {
				return
			}
			rctx, cancel := context.WithTimeout(ctx, every)
			err := c.store.renew(rctx, c)
			cancel()
			if errors.Is(err, errClaimLost) {
				h.log.WarnContext(ctx, "idempotency: a claim was taken over while its request ran; its answer will not be kept")
				return
			}
		}
	}()
	return func() { close(done) }
}

type claimKey struct{}

func withClaim(ctx context.Context, c *Claim) context.Context {
	return context.WithValue(ctx, claimKey{}, c)
}

func claimFrom(ctx context.Context) *Claim {
	c, _ := ctx.Value(claimKey{}).(*Claim)
	return c
}

// Claimed reports whether ctx is a request's that holds an
// Idempotency-Key: one whose record must commit with Answer.
func Claimed(ctx context.Context) bool { return claimFrom(ctx) != nil }

// Answer keeps v, the 200 answer the request will get, with the record it
// answers for: call it inside the transaction (tx) that commits that
// record. Without an Idempotency-Key it does nothing. It fails when the
// request's claim was taken over, so the transaction rolls back and
// nothing is made twice.
func Answer(ctx context.Context, tx database.Querier, v any) error {
	c := claimFrom(ctx)
	if c == nil {
		return nil
	}
	// The bytes the wire gets (kithttp.EncodeJSON), so a replay is the
	// first answer byte for byte.
	body, err := envelope.JSON(v)
	if err != nil {
		return err
	}
	c.answering.Store(true)
	if err := c.store.finish(ctx, tx, c, http.StatusOK, body); err != nil {
		return err
	}
	c.answered = body
	return nil
}

// NewID is a new id with prefix for what the request makes (format.NewID):
// for a request with an Idempotency-Key, the same id on every attempt, so
// a provider call keyed by it is not made twice after a crash.
func NewID(ctx context.Context, prefix string) string {
	c := claimFrom(ctx)
	if c == nil {
		return format.NewID(prefix)
	}
	sum := sha256.Sum256([]byte(c.seed + "\x00" + prefix))
	return prefix + hex.EncodeToString(sum[:])[:format.IDHexLen]
}

func replay(w http.ResponseWriter, rec *Record) {
	h := w.Header()
	h.Set("Content-Type", "application/json")
	h.Set("Content-Length", strconv.Itoa(len(rec.Body)))
	h.Set("Cache-Control", "no-store")
	h.Set(ReplayedHeader, "true")
	w.WriteHeader(rec.Status)
	_, _ = w.Write(rec.Body)
}

// KeyHash is how a client's key is stored: hashed, so the store's keys
// are short and hold nothing the client chose.
func KeyHash(idempotencyKey string) string {
	sum := sha256.Sum256([]byte(idempotencyKey))
	return hex.EncodeToString(sum[:])
}

// Fingerprint identifies the request by its meaning: the endpoint and the
// body as JSON means it (keys in any order, any spacing, the same escapes
// written either way are one request, as Stripe compares parameters, not
// bytes); a body that is not JSON by its bytes. Numbers are compared as
// written ("1.0" is not "1": the API reads amounts as strings anyway).
func Fingerprint(method, path string, body []byte) string {
	return fingerprint(method, path, canonical(body))
}

// rawFingerprint is the fingerprint of the exact bytes: what records made
// before fingerprints were by meaning hold (for the day they are kept).
func rawFingerprint(method, path string, body []byte) string { return fingerprint(method, path, body) }

func fingerprint(method, path string, body []byte) string {
	h := sha256.New()
	io.WriteString(h, method+" "+path+"\n")
	h.Write(body)
	return hex.EncodeToString(h.Sum(nil))
}

// canonical is body as JSON means it, written one way (encoding/json sorts
// object keys and drops spacing); body itself when it is not one JSON
// value.
func canonical(body []byte) []byte {
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil || dec.More() {
		return body
	}
	out, err := json.Marshal(v)
	if err != nil {
		return body
	}
	return out
}

// recorder passes the answer through and keeps a copy of the body; the
// status comes from the StatusWriter it embeds.
type recorder struct {
	obs.StatusWriter
	body bytes.Buffer
}

func (r *recorder) Write(b []byte) (int, error) {
	r.body.Write(b)
	return r.StatusWriter.Write(b)
}

// ForService is a service's idempotency on its system of record db: the
// records kept there (on the database's clock), swept of expired ones
// every 10 minutes while ctx lasts, and the middleware for its creating
// routes.
func ForService(ctx context.Context, db *database.DB, opts Options, log *slog.Logger) func(http.Handler) http.Handler {
	store := NewStore(db, db.Now)
	go store.Janitor(ctx, 10*time.Minute, func(err error) { log.Warn("idempotency sweep failed", "err", err) })
	return Middleware(store, opts, log)
}
