// Package idempotency makes creating POSTs safe to retry. A request carrying
// an Idempotency-Key is remembered for 24 hours per partner key: the same key
// with the same request gets the first answer again (status and body byte for
// byte); with another request, 422 idempotency_key_reused; while the first is
// still running, 409 idempotency_in_progress. It is an http.Handler
// middleware that services put around their creating routes; it needs only
// the X-Partner-Key-Id the gateway vouches for.
package idempotency

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"strconv"
	"time"

	"github.com/partnerpay/api/pkg/envelope"
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

// Record is what the store keeps for one key.
type Record struct {
	Fingerprint string `json:"fingerprint"`
	Done        bool   `json:"done"`
	Status      int    `json:"status,omitempty"`
	ContentType string `json:"contentType,omitempty"`
	ErrorCode   string `json:"errorCode,omitempty"`
	Body        []byte `json:"body,omitempty"`
}

// Store keeps records. Claim must be atomic: of two concurrent claims of the
// same key, exactly one gets claimed == true.
type Store interface {
	// Claim records an in-flight request for key unless one exists; it
	// returns the existing record otherwise. The claim lapses after lock, so a
	// crashed request does not block retries for a day.
	Claim(ctx context.Context, key, fingerprint string, lock time.Duration) (existing *Record, claimed bool, err error)
	// Complete stores the answer for Retention.
	Complete(ctx context.Context, key string, rec Record) error
	// Release forgets the key, so the request can be retried.
	Release(ctx context.Context, key string) error
}

// Middleware returns the idempotency layer. lock bounds how long a request
// may hold its key in flight.
func Middleware(store Store, lock time.Duration, log *slog.Logger) func(http.Handler) http.Handler {
	return func(next http.Handler) http.Handler {
		return &handler{store: store, lock: lock, log: log, next: next}
	}
}

type handler struct {
	store Store
	lock  time.Duration
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
	values := r.Header.Values(Header)
	if len(values) == 0 {
		h.next.ServeHTTP(w, r)
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

	key := StoreKey(keyID, values[0])
	fp := Fingerprint(r.Method, r.URL.Path, body)
	existing, claimed, err := h.store.Claim(r.Context(), key, fp, h.lock)
	if err != nil {
		h.log.ErrorContext(r.Context(), "idempotency store failed", "err", err, "key_id", keyID, "request_id", r.Header.Get(partner.HeaderRequestID))
		kithttp.WriteError(w, envelope.Internal())
		return
	}
	if !claimed {
		switch {
		case existing.Fingerprint != fp:
			kithttp.WriteError(w, errReused)
		case !existing.Done:
			w.Header().Set("Retry-After", "1")
			kithttp.WriteError(w, errInProgress)
		default:
			replay(w, existing)
		}
		return
	}

	rec := &recorder{StatusWriter: obs.StatusWriter{ResponseWriter: w}}
	completed := false
	defer func() {
		if completed {
			return
		}
		// The handler panicked or the answer was a server error: let the
		// partner retry rather than replay a failure that may be transient.
		// A fresh context: the request's may be cancelled by now.
		ctx, cancel := context.WithTimeout(context.WithoutCancel(r.Context()), 2*time.Second)
		defer cancel()
		if err := h.store.Release(ctx, key); err != nil {
			h.log.Error("idempotency release failed", "err", err, "key_id", keyID, "request_id", r.Header.Get(partner.HeaderRequestID))
		}
	}()
	h.next.ServeHTTP(rec, r)
	if rec.Status() >= 500 {
		return
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(r.Context()), 2*time.Second)
	defer cancel()
	err = h.store.Complete(ctx, key, Record{
		Fingerprint: fp, Done: true, Status: rec.Status(),
		ContentType: rec.Header().Get("Content-Type"),
		ErrorCode:   rec.Header().Get(partner.HeaderErrorCode),
		Body:        rec.body.Bytes(),
	})
	if err != nil {
		// The answer is already on its way; a retry will re-run the request,
		// which every creating endpoint tolerates (execution is at most once
		// per quote on its own).
		h.log.Error("idempotency completion failed", "err", err, "key_id", keyID, "request_id", r.Header.Get(partner.HeaderRequestID))
		return
	}
	completed = true
}

func replay(w http.ResponseWriter, rec *Record) {
	h := w.Header()
	if rec.ContentType != "" {
		h.Set("Content-Type", rec.ContentType)
	}
	if rec.ErrorCode != "" {
		h.Set(partner.HeaderErrorCode, rec.ErrorCode)
	}
	h.Set("Content-Length", strconv.Itoa(len(rec.Body)))
	h.Set("Cache-Control", "no-store")
	h.Set(ReplayedHeader, "true")
	w.WriteHeader(rec.Status)
	_, _ = w.Write(rec.Body)
}

// StoreKey scopes a client's key to the partner key; hashing it keeps the
// store's keys short and free of whatever characters the client chose.
func StoreKey(keyID, idempotencyKey string) string {
	sum := sha256.Sum256([]byte(idempotencyKey))
	return "idem:" + keyID + ":" + hex.EncodeToString(sum[:])
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
