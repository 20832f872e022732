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
// served. A request whose process died leaves a claim that lapses; the
// retry takes it over with the same seed, so the ids it makes (NewID) are
// those the first attempt may already have used with a provider.
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

// Header is the request header that names an idempotent request.
const Header = "Idempotency-Key"

// ReplayedHeader marks an answer that is a replay of the first one.
const ReplayedHeader = "Idempotent-Replayed"

// Retention is how long an answer is remembered.
const Retention = 24 * time.Hour

// Options tune the middleware.
type Options struct {
	// Budget is how long a creating request may run once started, caller
	// or no caller: above the longest upstream timeout of the service.
	Budget time.Duration
	// Lock is how long a claim holds its key before a retry may take it
	// over (its process died): above Budget, so a live request is never
	// taken over.
	Lock time.Duration
}

// Middleware returns the layer every creating route of a service sits
// behind, with or without the header: the request runs detached from its
// caller, within opts.Budget.
func Middleware(store *Store, opts Options, log *slog.Logger) func(http.Handler) http.Handler {
	if opts.Budget == 0 {
		opts.Budget = 30 * time.Second
	}
	if opts.Lock <= opts.Budget {
		opts.Lock = 2 * opts.Budget
	}
	return func(next http.Handler) http.Handler {
		return &handler{store: store, opts: opts, log: log, next: next}
	}
}

type handler struct {
	store *Store
	opts  Options
	log   *slog.Logger
	next  http.Handler
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
	values := r.Header.Values(Header)
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

	fp := Fingerprint(r.Method, r.URL.Path, body)
	claim, existing, err := h.store.claim(ctx, keyID, KeyHash(values[0]), fp, h.opts.Lock)
	if err != nil {
		h.log.ErrorContext(ctx, "idempotency store failed", "err", err, "key_id", keyID, "request_id", r.Header.Get(partner.HeaderRequestID))
		kithttp.WriteError(w, envelope.Internal())
		return
	}
	if existing != nil {
		switch {
		case existing.Fingerprint != fp:
			kithttp.WriteError(w, errReused)
		case !existing.Finished:
			w.Header().Set("Retry-After", "1")
			kithttp.WriteError(w, errInProgress)
		default:
			replay(w, existing)
		}
		return
	}
	h.run(ctx, w, r, claim, keyID)
}

// run serves a claimed request and leaves its outcome: the answer when it
// made something (2xx), nothing otherwise.
func (h *handler) run(ctx context.Context, w http.ResponseWriter, r *http.Request, c *Claim, keyID string) {
	rec := &recorder{StatusWriter: obs.StatusWriter{ResponseWriter: w}}
	kept := false
	defer func() {
		if kept {
			return
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
	body, err := json.Marshal(v)
	if err != nil {
		return err
	}
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

// Fingerprint identifies the request: endpoint and exact body bytes.
func Fingerprint(method, path string, body []byte) string {
	h := sha256.New()
	io.WriteString(h, method+" "+path+"\n")
	h.Write(body)
	return hex.EncodeToString(h.Sum(nil))
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
