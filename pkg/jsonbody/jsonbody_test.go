package jsonbody

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/partnerpay/api/pkg/envelope"
)

type sample struct {
	Name  string `json:"name"`
	Chain int64  `json:"chain"`
	Inner struct {
		IBAN string `json:"iban"`
	} `json:"inner"`
}

func TestDecode(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, contentType, body string
		status                  int
		message                 string
	}{
		{"valid object", "application/json", `{"name":"a","chain":84532}`, 0, ""},
		{"charset parameter is fine", "application/json; charset=utf-8", `{"name":"a"}`, 0, ""},
		{"wrong content type", "text/plain", `{}`, 400, "Content-Type must be application/json."},
		{"missing content type", "", `{}`, 400, "Content-Type must be application/json."},
		{"empty body", "application/json", ``, 400, "Request body is empty; send a JSON object."},
		{"not json", "application/json", `name=a`, 400, "Request body is not valid JSON."},
		{"truncated json", "application/json", `{"name":`, 400, "Request body is not valid JSON."},
		{"unknown field is named", "application/json", `{"name":"a","nmae":"b"}`, 400, `Unknown field "nmae".`},
		{"unknown nested field is named with its path", "application/json", `{"inner":{"bic":"x"}}`, 400, `Unknown field "inner.bic".`},
		{"names match exactly: CHAIN is not chain", "application/json", `{"CHAIN":84532}`, 400, `Unknown field "CHAIN".`},
		{"names match exactly: nAme is not name", "application/json", `{"nAme":"a"}`, 400, `Unknown field "nAme".`},
		{"a name given twice", "application/json", `{"chain":1,"chain":2}`, 400, `Field "chain" is given twice.`},
		{"a nested name given twice", "application/json", `{"inner":{"iban":"a","iban":"b"}}`, 400, `Field "inner.iban" is given twice.`},
		{"invalid UTF-8 in a name", "application/json", "{\"na\xffme\":\"a\"}", 400, "Request body is not valid UTF-8."},
		{"invalid UTF-8 in a value", "application/json", "{\"name\":\"\xc3\x28\"}", 400, "Request body is not valid UTF-8."},
		{"null for a field", "application/json", `{"name":null}`, 400, `Field "name" must not be null; leave it out instead.`},
		{"null nested", "application/json", `{"inner":{"iban":null}}`, 400, `Field "inner.iban" must not be null; leave it out instead.`},
		{"null body", "application/json", `null`, 400, "Request body must be a JSON object."},
		{"a huge unknown name is quoted short", "application/json", `{"` + strings.Repeat("x", 900<<10) + `":1}`, 400, `Unknown field "` + strings.Repeat("x", 63) + `"….`},
		{"leading white space is fine", "application/json", " \n{\"name\":\"a\"}", 0, ""},
		{"string for integer", "application/json", `{"chain":"84532"}`, 400, `Field "chain" must be an integer.`},
		{"fraction for integer", "application/json", `{"chain":1.5}`, 400, `Field "chain" must be an integer.`},
		{"exponent for integer", "application/json", `{"chain":1e3}`, 400, `Field "chain" must be an integer.`},
		{"integer overflow", "application/json", `{"chain":99999999999999999999}`, 400, `Field "chain" must be an integer.`},
		{"number for string", "application/json", `{"name":5}`, 400, `Field "name" must be a string.`},
		{"nested type is named with its path", "application/json", `{"inner":{"iban":1}}`, 400, `Field "inner.iban" must be a string.`},
		{"array is not an object", "application/json", `[1]`, 400, "Request body must be a JSON object."},
		{"two objects", "application/json", `{}{}`, 400, "Request body must hold a single JSON object."},
		{"over 1 MiB", "application/json", `{"name":"` + strings.Repeat("a", MaxBytes) + `"}`, 413, "Request body is larger than 1 MiB."},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := httptest.NewRequest(http.MethodPost, "/", strings.NewReader(tt.body))
			if tt.contentType != "" {
				r.Header.Set("Content-Type", tt.contentType)
			}
			var dst sample
			err := Decode(r, &dst)
			if tt.status == 0 {
				if err != nil {
					t.Fatalf("Decode: %v", err)
				}
				return
			}
			e, known := envelope.From(err)
			if !known || e.Status != tt.status || e.Code != envelope.CodeInvalidRequest || e.Message != tt.message {
				t.Fatalf("Decode error = %+v (known %v); want %d invalid_request %q", e, known, tt.status, tt.message)
			}
		})
	}
}

// A member's name is quoted in a message, cut to 64 characters, invalid
// UTF-8 replaced: a 900 KiB name is not echoed.
func TestQuoteIsShort(t *testing.T) {
	t.Parallel()
	if got := quote("memo"); got != `"memo"` {
		t.Errorf("quote(memo) = %s", got)
	}
	long := quote(strings.Repeat("x", 900<<10))
	if n := len([]rune(long)); n != maxQuoted+2 || !strings.HasSuffix(long, `"…`) {
		t.Errorf("a 900 KiB value quoted as %d characters: %.20s…", n, long)
	}
	if got := quote("a\xffb"); got != "\"a\uFFFDb\"" {
		t.Errorf("invalid UTF-8 quoted as %s, want the replacement character", got)
	}
}

// IsJSON takes JSON under every spelling a media type allows, the common
// ones without a parse, and nothing else.
func TestIsJSON(t *testing.T) {
	t.Parallel()
	for ct, want := range map[string]bool{
		"application/json":                 true,
		"application/json; charset=utf-8":  true,
		"application/json;charset=utf-8":   true,
		"application/json; charset=UTF-8":  true,
		"Application/JSON; Charset=UTF-8":  true,
		"application/json ; charset=utf-8": true,
		"application/jsonx":                false,
		"application/json; charset":        false,
		"text/plain":                       false,
		"":                                 false,
	} {
		if got := IsJSON(ct); got != want {
			t.Errorf("IsJSON(%q) = %v, want %v", ct, got, want)
		}
	}
}

type reportsNulls struct {
	A *string        `json:"a"`
	B map[string]any `json:"b"`
}

func (reportsNulls) NullsReportedUnder() string { return "/b/" }

// A request that reports nulls under a member takes them there (the
// service lists each as a problem), and nowhere else.
func TestNullsUnderAReportingMember(t *testing.T) {
	t.Parallel()
	for body, ok := range map[string]bool{
		`{"b":{"x":null,"y":{"z":null}}}`: true,
		`{"a":null,"b":{}}`:               false,
		`{"b":null}`:                      false,
	} {
		var dst reportsNulls
		if err := Bytes([]byte(body), &dst); (err == nil) != ok {
			t.Errorf("%s: %v, want taken %v", body, err, ok)
		}
	}
}
