// Package jsonbody decodes request bodies strictly: JSON only, at most 1 MiB,
// one object, no unknown fields, no wrong types. Every refusal is a 400 (413
// for size) invalid_request that names what is wrong, never an echo of it.
package jsonbody

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"reflect"
	"strings"

	"github.com/partnerpay/api/pkg/envelope"
)

// MaxBytes is the largest request body the API accepts.
const MaxBytes = 1 << 20

// IsJSON reports whether a Content-Type header names JSON (parameters such as
// charset allowed).
func IsJSON(contentType string) bool {
	if contentType == "application/json" {
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
	return decode(http.MaxBytesReader(nil, r.Body, MaxBytes), dst)
}

func decode(body io.Reader, dst any) error {
	dec := json.NewDecoder(body)
	dec.DisallowUnknownFields()
	if err := dec.Decode(dst); err != nil {
		return explain(err)
	}
	if _, err := dec.Token(); err != io.EOF {
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) {
			return envelope.TooLarge()
		}
		return envelope.InvalidRequest("Request body must hold a single JSON object.")
	}
	return nil
}

func explain(err error) error {
	var (
		syntax *json.SyntaxError
		typ    *json.UnmarshalTypeError
		mbe    *http.MaxBytesError
	)
	switch {
	case errors.As(err, &mbe):
		return envelope.TooLarge()
	case errors.Is(err, io.EOF):
		return envelope.InvalidRequest("Request body is empty; send a JSON object.")
	case errors.As(err, &syntax), errors.Is(err, io.ErrUnexpectedEOF):
		return envelope.InvalidRequest("Request body is not valid JSON.")
	case errors.As(err, &typ):
		if typ.Field == "" {
			return envelope.InvalidRequest("Request body must be a JSON object.")
		}
		return envelope.InvalidRequest(fmt.Sprintf("Field %q must be %s.", typ.Field, kind(typ.Type)))
	case strings.HasPrefix(err.Error(), "json: unknown field "):
		// encoding/json has no typed error for this; the field name is quoted in the text.
		return envelope.InvalidRequest("Unknown field " + strings.TrimPrefix(err.Error(), "json: unknown field ") + ".")
	}
	var apiErr *envelope.Error
	if errors.As(err, &apiErr) {
		return apiErr
	}
	return envelope.InvalidRequest("Request body is not valid JSON.")
}

func kind(t reflect.Type) string {
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
