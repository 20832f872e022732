package edge

import (
	"bufio"
	"bytes"
	"io"
	"net/http"
	"net/url"
	"slices"
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
		// Written out (how the relay sends it) rather than read: the same
		// bytes, from a body that can write itself and from one that cannot.
		for _, rest := range []io.Reader{bytes.NewReader(body), struct{ io.Reader }{bytes.NewReader(body)}} {
			resp := &http.Response{Header: http.Header{"Content-Type": {"application/json"}},
				Body: io.NopCloser(rest), ContentLength: int64(len(body))}
			if err := s.stamp(resp); err != nil {
				t.Fatalf("stamped once, refused once: %v", err)
			}
			var w bytes.Buffer
			if n, err := resp.Body.(io.WriterTo).WriteTo(&w); err != nil || w.String() != want || n != int64(len(want)) {
				t.Fatalf("%q written out as %q (%d, %v), want %q", body, w.String(), n, err, want)
			}
		}
	})
}

// FuzzOutboundHeader: whatever headers a client sends, a service gets the
// gateway's identity headers alone (never the client's X-Partner-*,
// X-Internal-* or Authorization), no hop-by-hop header, none the
// Connection header names, and no Forwarded or X-Forwarded-*.
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
		out := g.outboundHeader(in, &call{requestID: "r-1"})
		listed := http.Header{}
		for _, v := range in["Connection"] {
			for _, token := range strings.Split(v, ",") {
				listed[http.CanonicalHeaderKey(strings.TrimSpace(token))] = nil
			}
		}
		for name := range out {
			_, named := listed[name]
			switch {
			case name == "X-Internal-Token" || name == "X-Request-Id" || name == "User-Agent":
			case hopByHop(name), clientMustNotSet(name), named:
				t.Fatalf("%q reached the service (in %v)", name, in)
			}
		}
		if strings.Join(out["X-Internal-Token"], ",") != "internal-token-0123456789" || strings.Join(out["X-Request-Id"], ",") != "r-1" {
			t.Fatalf("identity headers %v", out)
		}
	})
}

// FuzzCleanQuery: a query reaches a service with no ';' and no broken
// escape, and a clean one as it was.
func FuzzCleanQuery(f *testing.F) {
	for _, seed := range []string{"a=1&b=2", "a=1;b=2", "a=%zz", "a=%4", "%", "c=%C3%A9"} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, q string) {
		got := cleanQuery(q)
		for i := 0; i < len(got); i++ {
			if got[i] == ';' || got[i] == '%' && (i+2 >= len(got) || !isHex(got[i+1]) || !isHex(got[i+2])) {
				t.Fatalf("%q → %q", q, got)
			}
		}
		if !strings.ContainsAny(q, ";%") && got != q {
			t.Fatalf("the clean query %q became %q", q, got)
		}
	})
}

// FuzzWriteRequest: the transport's request writer sends what
// Request.Write sends (header lines in any order), or fails where it
// fails; a request it does not handle goes to Request.Write itself.
func FuzzWriteRequest(f *testing.F) {
	f.Add(uint8(0), "/v1/config", "", "X-Custom", "v", uint8(0), "")
	f.Add(uint8(1), "/v1/bank/payout/quote", "a=1&b=2", "Idempotency-Key", "k-1", uint8(1), `{"a":1}`)
	f.Add(uint8(2), "/v1/x y", "q=%zz", "X-Two", " line\r\nsplit ", uint8(2), "")
	f.Add(uint8(3), "/p%2Fq/é", "", "User-Agent", "sdk\n/1", uint8(3), "body")
	f.Add(uint8(4), "/bad\x7fpath", "", "Content-Length", "9", uint8(4), "x")
	f.Add(uint8(1), "/", "", "Transfer-Encoding", "chunked", uint8(5), "xyz")
	f.Add(uint8(1), "/v1/bank/payout", "", "X-A", "b", uint8(4), `{"a":1}`)       // a body longer than its Content-Length
	f.Add(uint8(1), "/v1/bank/payout/quote", "", "X-A", "b", uint8(6), `{"a":1}`) // the body in memory, as readBody leaves it
	f.Add(uint8(1), "/v1/bank/payout", "", "X-A", "b", uint8(10), `{"a":1}`)      // … and longer than its Content-Length
	methods := []string{"GET", "POST", "DELETE", "PUT", "HEAD", "PATCH", "OPTIONS"}
	f.Fuzz(func(t *testing.T, m uint8, path, query, name, value string, mode uint8, body string) {
		// inMemory: the body as readBody leaves it (writeRequest's
		// fast path), on writeRequest's side every other mode.
		inMemory := mode%12 >= 6
		build := func(mem bool) *http.Request {
			req := &http.Request{
				Method: methods[int(m)%len(methods)],
				URL:    &url.URL{Scheme: "http", Host: "payout:8081", Path: path, RawQuery: query},
				Header: http.Header{"X-Request-Id": {"r-1"}}, Host: "payout:8081",
				Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1,
			}
			req.Header[name] = []string{value, value + "2"}
			switch mode % 6 {
			case 1:
				req.Header["User-Agent"] = []string{""}
			case 2:
				req.Header["User-Agent"] = []string{"  "}
			case 3:
				req.Header["User-Agent"] = nil
			case 4:
				req.ContentLength = 1 // a length its body does not have
			case 5:
				req.ContentLength = -1 // unknown: chunked, Request.Write's
			}
			if body != "" {
				req.Body = io.NopCloser(strings.NewReader(body))
				if mem {
					req.Body = newMemBody([]byte(body))
				}
				if req.ContentLength == 0 {
					req.ContentLength = int64(len(body))
				}
			}
			return req
		}
		var want, got bytes.Buffer
		werr := build(false).Write(&want)
		bw := bufio.NewWriter(&got)
		req := build(inMemory)
		gerr := writeRequest(bw, req)
		if gerr == nil {
			gerr = bw.Flush()
		}
		if (werr == nil) != (gerr == nil) {
			t.Fatalf("Request.Write: %v; writeRequest: %v\n%q", werr, gerr, got.String())
		}
		if werr != nil {
			// Refused, yet never more body on the wire than its
			// Content-Length: the rest would be read as another request.
			_ = bw.Flush()
			if _, sent, ok := strings.Cut(got.String(), "\r\n\r\n"); ok && req.ContentLength >= 0 && int64(len(sent)) > req.ContentLength {
				t.Fatalf("%d body bytes written for a Content-Length of %d: %q", len(sent), req.ContentLength, got.String())
			}
			return
		}
		if w, g := sortedHead(want.String()), sortedHead(got.String()); w != g {
			t.Fatalf("Request.Write sent\n%q\nwriteRequest sent\n%q", w, g)
		}
	})
}

// sortedHead is a request with its header lines (not the request line)
// sorted.
func sortedHead(s string) string {
	head, body, _ := strings.Cut(s, "\r\n\r\n")
	lines := strings.Split(head, "\r\n")
	slices.Sort(lines[1:])
	return strings.Join(lines, "\r\n") + "\r\n\r\n" + body
}
