package edge

import (
	"bytes"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/partnerpay/api/pkg/jsonbody"
	"github.com/partnerpay/api/pkg/serve"
)

const internalBody = `{"environment":"sandbox","error":{"code":"internal","message":"Internal error; it has been logged."}}`

func TestRefusesWhatAFrontProxyCouldReadDifferently(t *testing.T) {
	g := newGateway(t, keySet("bank"), answer(200, "sandbox", `{}`), quiet())
	for _, tt := range []struct {
		name   string
		header []string
		msg    string
	}{
		{"two Content-Type headers", []string{"Content-Type", "application/json", "Content-Type", "text/plain"}, "Send one Content-Type header, not several."},
		{"a gzip body", []string{"Content-Type", "application/json", "Content-Encoding", "gzip"}, "Request bodies must not be encoded: send them without Content-Encoding."},
	} {
		t.Run(tt.name, func(t *testing.T) {
			r := httptest.NewRequest("POST", "/v1/bank/payout/quote", strings.NewReader(`{}`))
			r.Header.Set("Authorization", "Bearer "+testKey)
			for i := 0; i < len(tt.header); i += 2 {
				r.Header.Add(tt.header[i], tt.header[i+1])
			}
			w := httptest.NewRecorder()
			g.ServeHTTP(w, r)
			want := `{"environment":"sandbox","error":{"code":"invalid_request","message":"` + tt.msg + `"}}`
			if w.Code != 400 || w.Body.String() != want || w.Header().Get("Connection") != "close" {
				t.Fatalf("%d %s (Connection %q)", w.Code, w.Body, w.Header().Get("Connection"))
			}
		})
	}
}

// A real server with Framing, spoken to over a raw connection: both
// Content-Length and Transfer-Encoding are refused and the connection is
// closed; chunked alone goes through.
func TestContentLengthWithTransferEncodingOverTheWire(t *testing.T) {
	var got atomic.Int32
	g := newGateway(t, keySet("bank"), upstreamFunc(func(r *http.Request) *http.Response {
		got.Add(1)
		return answer(200, "sandbox", `{"ok":1}`)(r)
	}), quiet())
	srv := httptest.NewUnstartedServer(g)
	srv.Listener = Framing{}.Listener(srv.Listener)
	srv.Config.ConnContext = Framing{}.ConnContext
	srv.Start()
	defer srv.Close()

	send := func(raw string) string {
		c, err := net.Dial("tcp", srv.Listener.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		c.SetDeadline(time.Now().Add(2 * time.Second))
		io.WriteString(c, raw)
		b, _ := io.ReadAll(c) // to the end: the server must close
		return string(b)
	}
	head := "POST /v1/bank/payout/quote HTTP/1.1\r\nHost: gw\r\nAuthorization: Bearer " + testKey + "\r\nContent-Type: application/json\r\n"
	both := send(head + "Content-Length: 4\r\nTransfer-Encoding: chunked\r\n\r\n2\r\n{}\r\n0\r\n\r\n")
	if !strings.HasPrefix(both, "HTTP/1.1 400 ") || !strings.Contains(both, "Connection: close") ||
		!strings.HasSuffix(both, `{"environment":"sandbox","error":{"code":"invalid_request","message":"Send Content-Length or Transfer-Encoding, not both."}}`) {
		t.Errorf("Content-Length with Transfer-Encoding:\n%s", both)
	}
	if got.Load() != 0 {
		t.Error("the ambiguous request reached the upstream")
	}
	chunked := send(head + "Transfer-Encoding: chunked\r\nConnection: close\r\n\r\n2\r\n{}\r\n0\r\n\r\n")
	if !strings.HasPrefix(chunked, "HTTP/1.1 200 ") || !strings.HasSuffix(chunked, `{"environment":"sandbox","ok":1}`) {
		t.Errorf("chunked alone:\n%s", chunked)
	}
}

// slowReader gives a few bytes, then a timeout, as a connection whose read
// deadline passed does.
type slowReader struct{ n int }

func (s *slowReader) Read(p []byte) (int, error) {
	if s.n == 0 {
		s.n++
		return copy(p, `{"cry`), nil
	}
	return 0, &net.OpError{Op: "read", Err: timeoutErr{}}
}

type timeoutErr struct{}

func (timeoutErr) Error() string   { return "i/o timeout" }
func (timeoutErr) Timeout() bool   { return true }
func (timeoutErr) Temporary() bool { return true }

// TestASlowBodyIs408InTheEnvelope: a body that stops arriving is 408 and
// the connection is closed, read by its Content-Length or chunked; a body
// cut short is 400 and a chunked one over 1 MiB 413, both closing too.
func TestASlowBodyIs408InTheEnvelope(t *testing.T) {
	g := newGateway(t, keySet("bank"), answer(200, "sandbox", `{}`), quiet())
	slow := `{"environment":"sandbox","error":{"code":"request_timeout","message":"The request body did not arrive in time; send it again."}}`
	for _, tc := range []struct {
		name   string
		body   io.Reader
		length int64 // -1: chunked
		status int
		want   string
	}{
		{"with a length", &slowReader{}, 20, 408, slow},
		{"chunked", &slowReader{}, -1, 408, slow},
		{"cut short", strings.NewReader(`{"cry`), 20, 400,
			`{"environment":"sandbox","error":{"code":"invalid_request","message":"Request body could not be read."}}`},
		{"chunked, over 1 MiB", strings.NewReader(strings.Repeat(" ", jsonbody.MaxBytes+1)), -1, 413,
			`{"environment":"sandbox","error":{"code":"invalid_request","message":"Request body is larger than 1 MiB."}}`},
	} {
		r := httptest.NewRequest("POST", "/v1/bank/payout/quote", nil)
		r.Body, r.ContentLength = io.NopCloser(tc.body), tc.length
		r.Header.Set("Authorization", "Bearer "+testKey)
		r.Header.Set("Content-Type", "application/json")
		w := httptest.NewRecorder()
		g.ServeHTTP(w, r)
		if w.Code != tc.status || w.Body.String() != tc.want || w.Header().Get("Connection") != "close" {
			t.Errorf("%s: %d %s (Connection %q)", tc.name, w.Code, w.Body, w.Header().Get("Connection"))
		}
	}
}

func TestAHungUpstreamFailsWithinTheRouteTimeoutThenFast(t *testing.T) {
	hung := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { <-r.Context().Done() }))
	defer hung.Close()
	var logs bytes.Buffer
	g := newGatewayTo(t, hung.URL, slog.New(slog.NewJSONHandler(&logs, nil)))
	const timeout = 300 * time.Millisecond // the routes' own (seconds) would make this test slow
	for _, byMethod := range g.routes {
		for _, rt := range byMethod {
			rt.Timeout = timeout
		}
	}
	for i := range breakerTrips {
		start := time.Now()
		w := serveOne(g, "GET", "/v1/limits", "")
		if d := time.Since(start); w.Code != 500 || w.Body.String() != internalBody || d < timeout || d > timeout+time.Second {
			t.Fatalf("call %d: %d %s after %s; want 500 after the %s route timeout", i, w.Code, w.Body, d, timeout)
		}
	}
	start := time.Now()
	w := serveOne(g, "GET", "/v1/limits", "")
	if d := time.Since(start); w.Code != 500 || w.Body.String() != internalBody || d > 100*time.Millisecond {
		t.Fatalf("with the circuit open: %d %s after %s; want 500 at once", w.Code, w.Body, d)
	}
	if !strings.Contains(logs.String(), `"msg":"upstream circuit open","upstream":"payout"`) {
		t.Errorf("the opening is not logged:\n%s", logs.String())
	}
}

func TestARefusedConnectionIsRetried(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close() // nothing listens: connections are refused
	var bodies []string
	go func() {
		time.Sleep(20 * time.Millisecond) // the service comes up between the first try and the retry
		ln2, err := net.Listen("tcp", addr)
		if err != nil {
			return
		}
		http.Serve(ln2, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			b, _ := io.ReadAll(r.Body)
			bodies = append(bodies, string(b))
			w.Header().Set("Content-Type", "application/json")
			w.Header().Set("X-Environment", "sandbox")
			io.WriteString(w, `{"quoted":true}`)
		}))
	}()
	g := newGatewayTo(t, "http://"+addr, quiet())
	w := serveOne(g, "POST", "/v1/bank/payout/quote", `{"chain":84532}`)
	if w.Code != 200 || w.Body.String() != `{"environment":"sandbox","quoted":true}` {
		t.Fatalf("%d %s", w.Code, w.Body)
	}
	if len(bodies) != 1 || bodies[0] != `{"chain":84532}` {
		t.Errorf("the upstream got %q: the retry must send the body once, whole", bodies)
	}
}

func newGatewayTo(t *testing.T, upstream string, log *slog.Logger) *Gateway {
	t.Helper()
	u := upstreams()
	for k := range u {
		u[k], _ = u[k].Parse(upstream)
	}
	g, err := New(Config{Env: "sandbox", Keys: keySet("bank"), Limiter: localLimiter(), Upstreams: u,
		Transport: NewTransport(), InternalToken: "internal-token-0123456789", Log: log})
	if err != nil {
		t.Fatal(err)
	}
	return g
}

// The grace a stopping gateway gives requests in flight is longer than its
// longest route timeout, so none is cut.
func TestShutdownGraceExceedsTheLongestRouteTimeout(t *testing.T) {
	b, _ := serve.Lookup("gateway")
	if b.Grace <= LongestTimeout {
		t.Fatalf("grace %s is not above the longest route timeout %s", b.Grace, LongestTimeout)
	}
}
