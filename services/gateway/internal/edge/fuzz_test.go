package edge

import (
	"bytes"
	"io"
	"net/http"
	"strconv"
	"strings"
	"testing"
)

// FuzzRequestID: an accepted X-Request-Id is 1–128 characters of
// [A-Za-z0-9._:-] and goes into logs and headers as it is.
func FuzzRequestID(f *testing.F) {
	for _, seed := range []string{"trace-abc.123", "", "bad id", strings.Repeat("a", 129), "a\r\nb"} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, s string) {
		if validRequestID(s) && (len(s) > 128 || strings.Trim(s, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._:-") != "") {
			t.Fatalf("%q accepted", s)
		}
	})
}

// FuzzSplice: whatever a service answers, the gateway either refuses it or
// passes it on as exactly {"environment":…, then the service's fields,
// with a Content-Length that matches.
func FuzzSplice(f *testing.F) {
	for _, seed := range []string{`{"a":1}`, `{}`, `[1]`, `{ "a":1}`, ``, `{`, "{\"a\":\"\xff\"}"} {
		f.Add([]byte(seed))
	}
	s := newSplicer("sandbox")
	f.Fuzz(func(t *testing.T, body []byte) {
		resp := &http.Response{Header: http.Header{"Content-Type": {"application/json"}, "X-Environment": {"sandbox"}},
			Body: io.NopCloser(bytes.NewReader(body)), ContentLength: int64(len(body))}
		if checkEnvironment(resp, "sandbox") != nil {
			t.Fatal("the environment check refused its own environment")
		}
		if err := s.stamp(resp); err != nil {
			return
		}
		out, _ := io.ReadAll(resp.Body)
		var want string
		switch {
		case bytes.HasPrefix(body, []byte(`{"`)):
			want = `{"environment":"sandbox","` + string(body[2:])
		case bytes.HasPrefix(body, []byte(`{}`)):
			want = `{"environment":"sandbox"}` + string(body[2:])
		default:
			t.Fatalf("%q was passed on", body)
		}
		if string(out) != want || resp.Header.Get("Content-Length") != strconv.Itoa(len(want)) {
			t.Fatalf("%q → %q (Content-Length %s), want %q", body, out, resp.Header.Get("Content-Length"), want)
		}
	})
}

// FuzzOutboundHeader: whatever headers a client sends, a service gets the
// gateway's identity headers alone (never the client's X-Partner-*,
// X-Internal-* or Authorization); ReverseProxy has already taken off
// hop-by-hop and forwarding headers (its own tests cover those).
func FuzzOutboundHeader(f *testing.F) {
	f.Add("X-Partner-Key-Id", "mallory", "Connection", "X-Partner-Key-Id")
	f.Add("Keep-Alive", "1", "Connection", "close, X-Custom")
	f.Add("X-Custom", "v", "X-Forwarded-For", "1.2.3.4")
	f.Add("Authorization", "Bearer x", "Te", "trailers")
	g := &Gateway{token: []string{"internal-token-0123456789"}}
	f.Fuzz(func(t *testing.T, n1, v1, n2, v2 string) {
		in := http.Header{}
		in.Add(n1, v1)
		in.Add(n2, v2)
		out := in.Clone()
		g.outboundHeader(out, &call{requestID: [1]string{"r-1"}, id: [1]string{"1"}})
		for name := range out {
			switch {
			case name == "X-Internal-Token" || name == "X-Request-Id" || name == "X-Internal-Call-Id":
			case clientMustNotSet(name):
				t.Fatalf("%q reached the service (in %v)", name, in)
			}
		}
		if strings.Join(out["X-Internal-Token"], ",") != "internal-token-0123456789" || strings.Join(out["X-Request-Id"], ",") != "r-1" {
			t.Fatalf("identity headers %v", out)
		}
	})
}
