// Package envelope is the one error type of the API and its wire form, the
// ErrorEnvelope of the partner contract: {environment, error: {code, message, fields?}}.
//
// Every wire code is declared once, in the table below, with the HTTP status
// it is always answered with. Services build errors from a code and a
// message; they never choose a status. A single encoder maps an *Error to
// the wire. Anything that is not an *Error is an internal error: its detail
// belongs in the log and the wire only ever says "internal".
package envelope

import (
	"bytes"
	"encoding/json"
	"errors"
	"net/http"
	"sort"
	"strconv"
)

// Code is a wire code. Clients branch on it, never on messages.
type Code string

// The wire codes, each with its status in statuses.
const (
	CodeInvalidRequest         Code = "invalid_request"
	CodeNoRoute                Code = "no_route"
	CodeUnauthorized           Code = "unauthorized"
	CodePermissionDenied       Code = "permission_denied"
	CodeIPNotAllowed           Code = "ip_not_allowed"
	CodeChainNotAllowed        Code = "chain_not_allowed"
	CodeTokenNotAllowed        Code = "token_not_allowed"
	CodeExecutionCapped        Code = "execution_capped"
	CodeNotFound               Code = "not_found"
	CodeNotConfigured          Code = "not_configured"
	CodeQuoteNotFound          Code = "quote_not_found"
	CodeAccountNotFound        Code = "account_not_found"
	CodeVirtualAccountNotFound Code = "virtual_account_not_found"
	CodeDepositNotFound        Code = "deposit_not_found"
	CodeConsentSessionNotFound Code = "consent_session_not_found"
	CodeOrderNotFound          Code = "order_not_found"
	CodePayoutNotFound         Code = "payout_not_found"
	CodePayoutNotAwaiting      Code = "payout_not_awaiting_deposit"
	CodeRefundAddressLocked    Code = "refund_address_locked"
	CodePayoutUnavailable      Code = "payout_unavailable"
	CodeRequestTimeout         Code = "request_timeout"
	CodeQuoteAlreadyExecuted   Code = "quote_already_executed"
	CodeIdempotencyInProgress  Code = "idempotency_in_progress"
	CodeAccountNotActive       Code = "account_not_active"
	CodeSandboxReset           Code = "sandbox_reset"
	CodeQuoteExpired           Code = "quote_expired"
	CodeReturnLinkExpired      Code = "return_link_expired"
	CodeCursorExpired          Code = "cursor_expired"
	CodeIdempotencyKeyReused   Code = "idempotency_key_reused"
	CodeRateLimited            Code = "rate_limited"
	CodeInternal               Code = "internal"
)

// statuses is the one place a code meets its HTTP status.
var statuses = map[Code]int{
	CodeInvalidRequest:         http.StatusBadRequest,
	CodeNoRoute:                http.StatusBadRequest,
	CodeUnauthorized:           http.StatusUnauthorized,
	CodePermissionDenied:       http.StatusForbidden,
	CodeIPNotAllowed:           http.StatusForbidden,
	CodeChainNotAllowed:        http.StatusForbidden,
	CodeTokenNotAllowed:        http.StatusForbidden,
	CodeExecutionCapped:        http.StatusForbidden,
	CodeNotFound:               http.StatusNotFound,
	CodeNotConfigured:          http.StatusNotFound,
	CodeQuoteNotFound:          http.StatusNotFound,
	CodeAccountNotFound:        http.StatusNotFound,
	CodeVirtualAccountNotFound: http.StatusNotFound,
	CodeDepositNotFound:        http.StatusNotFound,
	CodeConsentSessionNotFound: http.StatusNotFound,
	CodeOrderNotFound:          http.StatusNotFound,
	CodePayoutNotFound:         http.StatusNotFound,
	CodePayoutNotAwaiting:      http.StatusConflict,
	CodeRefundAddressLocked:    http.StatusConflict,
	CodePayoutUnavailable:      http.StatusServiceUnavailable,
	CodeRequestTimeout:         http.StatusRequestTimeout,
	CodeQuoteAlreadyExecuted:   http.StatusConflict,
	CodeIdempotencyInProgress:  http.StatusConflict,
	CodeAccountNotActive:       http.StatusConflict,
	CodeSandboxReset:           http.StatusConflict,
	CodeQuoteExpired:           http.StatusGone,
	CodeReturnLinkExpired:      http.StatusGone,
	CodeCursorExpired:          http.StatusGone,
	CodeIdempotencyKeyReused:   http.StatusUnprocessableEntity,
	CodeRateLimited:            http.StatusTooManyRequests,
	CodeInternal:               http.StatusInternalServerError,
}

// Status is the HTTP status the code is answered with; an undeclared code
// is a programming error and answers 500.
func (c Code) Status() int {
	if s, ok := statuses[c]; ok {
		return s
	}
	return http.StatusInternalServerError
}

// Codes lists every wire code with its status, sorted by status then code:
// what the OpenAPI document must agree with.
func Codes() []Code {
	out := make([]Code, 0, len(statuses))
	for c := range statuses {
		out = append(out, c)
	}
	sort.Slice(out, func(i, j int) bool {
		if si, sj := out[i].Status(), out[j].Status(); si != sj {
			return si < sj
		}
		return out[i] < out[j]
	})
	return out
}

// Error is an API error: what the partner sees. Fields, when set, holds field
// names and constraint labels only, never submitted values; only refusals
// that come from the bank provider carry them.
type Error struct {
	Status  int
	Code    Code
	Message string
	Fields  map[string]string
}

func (e *Error) Error() string { return string(e.Code) + ": " + e.Message }

// New returns an API error with code's status and message.
func New(code Code, message string) *Error {
	return &Error{Status: code.Status(), Code: code, Message: message}
}

// InvalidRequest is the 400 for a malformed or invalid request.
func InvalidRequest(message string) *Error { return New(CodeInvalidRequest, message) }

// TooLarge is the one answer whose status is not its code's: DESIGN §2
// answers a body over 1 MiB with 413 and code invalid_request.
func TooLarge() *Error {
	e := New(CodeInvalidRequest, "Request body is larger than 1 MiB.")
	e.Status = http.StatusRequestEntityTooLarge
	return e
}

// NotFound is the 404 for a path or method that is not an endpoint.
func NotFound() *Error { return New(CodeNotFound, "No such endpoint.") }

// Unauthorized is the single 401 for every key problem; the cause is never told.
func Unauthorized() *Error { return New(CodeUnauthorized, "Missing, malformed or unknown API key.") }

// Internal is what the wire says about any unexpected failure.
func Internal() *Error { return New(CodeInternal, "Internal error; it has been logged.") }

// From maps err to its wire form. known is false when err carries no *Error:
// the caller must log err in full, since the wire will only say "internal".
func From(err error) (e *Error, known bool) {
	if errors.As(err, &e) {
		return e, true
	}
	return Internal(), false
}

type wireError struct {
	Code    Code              `json:"code"`
	Message string            `json:"message"`
	Fields  map[string]string `json:"fields,omitempty"`
}

type wireEnvelope struct {
	Environment string    `json:"environment,omitempty"`
	Error       wireError `json:"error"`
}

// JSON encodes v as every answer is written: compact, with `&`, `<` and
// `>` as themselves (encoding/json escapes them for HTML by default, which
// turned "Antigua & Barbuda" into "Antigua \u0026 Barbuda"; answers are
// application/json, never HTML).
func JSON(v any) ([]byte, error) {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(b.Bytes(), []byte("\n")), nil
}

// Marshal encodes e as the envelope. An empty environment leaves the field out:
// that is how services answer the gateway, which stamps it first itself.
func Marshal(environment string, e *Error) []byte {
	b, err := JSON(wireEnvelope{
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
func CodeOf(err error) Code {
	if err == nil {
		return ""
	}
	e, _ := From(err)
	return e.Code
}
