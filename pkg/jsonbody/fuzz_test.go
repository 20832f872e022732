package jsonbody

import (
	"testing"
	"unicode/utf8"

	"github.com/partnerpay/api/pkg/envelope"
)

type fuzzBody struct {
	Name   string  `json:"name"`
	Chain  int64   `json:"chain"`
	Amount *string `json:"amount"`
	Inner  struct {
		IBAN string `json:"iban"`
	} `json:"inner"`
}

// FuzzBytes: whatever a client sends, decoding answers nil or one
// invalid_request (400, or 413) whose message is short and valid UTF-8:
// never a panic, never an echo of the body.
func FuzzBytes(f *testing.F) {
	for _, seed := range []string{`{"name":"a","chain":84532,"amount":"1","inner":{"iban":"x"}}`, `{"CHAIN":1}`, `{"chain":1,"chain":2}`,
		"{\"na\xffme\":1}", `{"amount":null}`, `null`, `[]`, `{}{}`, `{"chain":1e3}`, `{"inner":{"bic":1}}`, ``, `{"chain":"1"}`} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		var dst fuzzBody
		err := Bytes(body, &dst)
		if err == nil {
			return
		}
		e, known := envelope.From(err)
		if !known || e.Code != envelope.CodeInvalidRequest || (e.Status != 400 && e.Status != 413) {
			t.Fatalf("%q: %v", body, err)
		}
		if len(e.Message) > 200 || !utf8.ValidString(e.Message) {
			t.Fatalf("%q: message of %d bytes: %q", body, len(e.Message), e.Message)
		}
	})
}
