// Package jsonbody decodes request bodies strictly, as a JSON Schema
// validator in front of us would read them: JSON only, at most 1 MiB, one
// object, field names matched exactly (CHAIN is not chain), no unknown
// fields, no field given twice, no null, no wrong types, valid UTF-8. It
// uses encoding/json/v2 semantics (github.com/go-json-experiment/json), which
// gets exact names, duplicates and UTF-8 right by construction. Every
// refusal is a 400 (413 for size) invalid_request that names the field,
// quoting at most 64 characters of anything the client sent.
package jsonbody

import (
	"bytes"
	"errors"
	"io"
	"mime"
	"net/http"
	"reflect"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"

	"github.com/partnerpay/api/pkg/envelope"
)

// MaxBytes is the largest request body the API accepts.
const MaxBytes = 1 << 20

// IsJSON reports whether a Content-Type header names JSON (parameters such as
// charset allowed).
func IsJSON(contentType string) bool {
	// What our services and most clients send, without parsing: the
	// parse allocates a map per call, twice per proxied request.
	switch contentType {
	case "application/json", "application/json; charset=utf-8", "application/json;charset=utf-8", "application/json; charset=UTF-8":
		return true
	}
	mt, _, err := mime.ParseMediaType(contentType)
	return err == nil && mt == "application/json"
}

// ErrContentType is the answer to a body that is not declared as JSON.
var ErrContentType = envelope.InvalidRequest("Content-Type must be application/json.")

// Decode reads r's body into dst, a pointer to a struct.
func Decode(r *http.Request, dst any) error {
	if !IsJSON(r.Header.Get("Content-Type")) {
		return ErrContentType
	}
	body, err := io.ReadAll(http.MaxBytesReader(nil, r.Body, MaxBytes))
	if err != nil {
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) {
			return envelope.TooLarge()
		}
		return envelope.InvalidRequest("Request body could not be read.")
	}
	return Bytes(body, dst)
}

// Bytes decodes body into dst with the same rules as Decode.
func Bytes(body []byte, dst any) error {
	trimmed := bytes.TrimLeft(body, " \t\r\n")
	switch {
	case len(trimmed) == 0:
		return envelope.InvalidRequest("Request body is empty; send a JSON object.")
	case trimmed[0] != '{':
		if err := json.Unmarshal(body, new(jsontext.Value)); err != nil {
			return explain(err)
		}
		return envelope.InvalidRequest("Request body must be a JSON object.")
	}
	if err := json.Unmarshal(body, dst, json.RejectUnknownMembers(true)); err != nil {
		return explain(err)
	}
	under := ""
	if n, ok := dst.(NullsReported); ok {
		under = n.NullsReportedUnder()
	}
	return noNulls(body, under)
}

// NullsReported is a request whose members under a JSON pointer prefix
// (such as /beneficiary/) take nulls, because the service reports each as
// a problem of its own (POST /v1/bank/payout/validate lists every problem
// of a beneficiary, a null one included) rather than refuse the body.
type NullsReported interface {
	NullsReportedUnder() string
}

func explain(err error) error {
	var (
		syn *jsontext.SyntacticError
		sem *json.SemanticError
	)
	switch {
	case errors.As(err, &syn):
		switch {
		case errors.Is(syn.Err, jsontext.ErrDuplicateName):
			return envelope.InvalidRequest("Field " + field(syn.JSONPointer) + " is given twice.")
		case strings.Contains(syn.Err.Error(), "invalid UTF-8"):
			return envelope.InvalidRequest("Request body is not valid UTF-8.")
		case strings.Contains(syn.Err.Error(), "after top-level value"):
			return envelope.InvalidRequest("Request body must hold a single JSON object.")
		}
		return envelope.InvalidRequest("Request body is not valid JSON.")
	case errors.As(err, &sem):
		if errors.Is(sem.Err, json.ErrUnknownName) {
			return envelope.InvalidRequest("Unknown field " + field(sem.JSONPointer) + ".")
		}
		if sem.JSONPointer == "" {
			return envelope.InvalidRequest("Request body must be a JSON object.")
		}
		return envelope.InvalidRequest("Field " + field(sem.JSONPointer) + " must be " + kind(sem.GoType) + ".")
	}
	var apiErr *envelope.Error
	if errors.As(err, &apiErr) {
		return apiErr
	}
	return envelope.InvalidRequest("Request body is not valid JSON.")
}

// noNulls refuses a null anywhere in the body (but under the pointer
// prefix under, when it is not ""): a schema validator reads
// {"fiatAmount": null} as a string field holding a non-string, and so do we.
func noNulls(body []byte, under string) error {
	dec := jsontext.NewDecoder(bytes.NewReader(body))
	for {
		tok, err := dec.ReadToken()
		if err != nil {
			return nil // the body already decoded; EOF is the end
		}
		if tok.Kind() != 'n' {
			continue
		}
		if under != "" && strings.HasPrefix(string(dec.StackPointer()), under) {
			continue
		}
		return envelope.InvalidRequest("Field " + field(dec.StackPointer()) + " must not be null; leave it out instead.")
	}
}

// field names a member by its path ("beneficiary.iban"), quoted and cut to
// 64 characters: a 900 KiB field name is not echoed.
func field(p jsontext.Pointer) string {
	var parts []string
	for tok := range p.Tokens() {
		parts = append(parts, tok)
	}
	return quote(strings.Join(parts, "."))
}

// maxQuoted is how many characters of anything a client sent a message may
// quote back.
const maxQuoted = 64

// quote returns s quoted for a message, cut to maxQuoted characters: enough
// for a partner to recognise what they sent, never a way to make us echo
// a payload. (Here, not in pkg/format: the gateway links this package, and
// pkg/format's country and currency tables are 2.5 MB of its executable.)
func quote(s string) string {
	if !utf8.ValidString(s) {
		s = strings.ToValidUTF8(s, "\uFFFD")
	}
	if utf8.RuneCountInString(s) > maxQuoted {
		r := []rune(s)
		return strconv.Quote(string(r[:maxQuoted-1])) + "…"
	}
	return strconv.Quote(s)
}

func kind(t reflect.Type) string {
	if t == nil {
		return "of another type"
	}
	switch t.Kind() {
	case reflect.String:
		return "a string"
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return "an integer"
	case reflect.Bool:
		return "a boolean"
	case reflect.Struct, reflect.Map:
		return "an object"
	case reflect.Slice, reflect.Array:
		return "an array"
	case reflect.Pointer:
		return kind(t.Elem())
	}
	return "of another type"
}
