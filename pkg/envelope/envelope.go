// Package envelope is the one error type of the API and its wire form, the
// ErrorEnvelope of the partner contract: {environment, error: {code, message, fields?}}.
//
// Services return *Error (or wrap one with %w); a single encoder maps it to the
// wire. Anything that is not an *Error is an internal error: its detail belongs
// in the log and the wire only ever says "internal".
package envelope

import (
	"encoding/json"
	"errors"
	"net/http"
	"strconv"
)

// Wire codes. Clients branch on these, never on messages.
const (
	CodeInvalidRequest         = "invalid_request"
	CodeNoRoute                = "no_route"
	CodeUnauthorized           = "unauthorized"
	CodePermissionDenied       = "permission_denied"
	CodeChainNotAllowed        = "chain_not_allowed"
	CodeTokenNotAllowed        = "token_not_allowed"
	CodeExecutionCapped        = "execution_capped"
	CodeNotFound               = "not_found"
	CodeNotConfigured          = "not_configured"
	CodeRateLimited            = "rate_limited"
	CodeInternal               = "internal"
	CodeQuoteNotFound          = "quote_not_found"
	CodeQuoteExpired           = "quote_expired"
	CodeIdempotencyKeyReused   = "idempotency_key_reused"
	CodeIdempotencyInProgress  = "idempotency_in_progress"
	CodeSandboxReset           = "sandbox_reset"
	CodeAccountNotFound        = "account_not_found"
	CodeVirtualAccountNotFound = "virtual_account_not_found"
	CodeConsentSessionNotFound = "consent_session_not_found"
	CodeAccountNotActive       = "account_not_active"
)

// Error is an API error: what the partner sees. Fields, when set, holds field
// names and constraint labels only, never submitted values.
type Error struct {
	Status  int
	Code    string
	Message string
	Fields  map[string]string
}

func (e *Error) Error() string { return e.Code + ": " + e.Message }

// New returns an API error with the given status, code and message.
func New(status int, code, message string) *Error {
	return &Error{Status: status, Code: code, Message: message}
}

// InvalidRequest is the 400 for a malformed or invalid request.
func InvalidRequest(message string) *Error {
	return New(http.StatusBadRequest, CodeInvalidRequest, message)
}

// NotFound is the 404 for a path or method that is not an endpoint.
func NotFound() *Error {
	return New(http.StatusNotFound, CodeNotFound, "No such endpoint.")
}

// Unauthorized is the single 401 for every key problem; the cause is never told.
func Unauthorized() *Error {
	return New(http.StatusUnauthorized, CodeUnauthorized, "Missing, malformed or unknown API key.")
}

// Internal is what the wire says about any unexpected failure.
func Internal() *Error {
	return New(http.StatusInternalServerError, CodeInternal, "Internal error; it has been logged.")
}

// From maps err to its wire form. known is false when err carries no *Error:
// the caller must log err in full, since the wire will only say "internal".
func From(err error) (e *Error, known bool) {
	if errors.As(err, &e) {
		return e, true
	}
	return Internal(), false
}

type wireError struct {
	Code    string            `json:"code"`
	Message string            `json:"message"`
	Fields  map[string]string `json:"fields,omitempty"`
}

type wireEnvelope struct {
	Environment string    `json:"environment,omitempty"`
	Error       wireError `json:"error"`
}

// Marshal encodes e as the envelope. An empty environment leaves the field out:
// that is how services answer the gateway, which stamps it first itself.
func Marshal(environment string, e *Error) []byte {
	b, err := json.Marshal(wireEnvelope{
		Environment: environment,
		Error:       wireError{Code: e.Code, Message: e.Message, Fields: e.Fields},
	})
	if err != nil { // strings and a string map always encode
		panic("envelope: " + err.Error())
	}
	return b
}

// Write sends e as the envelope with its status.
func Write(w http.ResponseWriter, environment string, e *Error) {
	body := Marshal(environment, e)
	h := w.Header()
	h.Set("Content-Type", "application/json")
	h.Set("Content-Length", strconv.Itoa(len(body)))
	h.Set("Cache-Control", "no-store")
	w.WriteHeader(e.Status)
	_, _ = w.Write(body)
}

// CodeOf is the wire code err will be answered with: "" for no error,
// "internal" for one that is not an *Error.
func CodeOf(err error) string {
	if err == nil {
		return ""
	}
	e, _ := From(err)
	return e.Code
}
