package edge

import (
	"bufio"
	"bytes"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"testing/iotest"
	"time"
)

// TestRelayForwardsNoConnectionHeaders: what is about the client's
// connection (hop-by-hop headers, those its Connection header names) and
// what only the gateway may say (Forwarded, X-Forwarded-*) never reaches a
// service; the rest, User-Agent included, does, over the wire; a request
// without User-Agent gets none added.
func TestRelayForwardsNoConnectionHeaders(t *testing.T) {
	seen := make(chan *http.Request, 1)
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		seen <- r
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("X-Environment", "sandbox")
		io.WriteString(w, `{}`)
	}))
	defer up.Close()
	g := newGatewayTo(t, up.URL, quiet())

	w := serveOne(g, "GET", "/v1/config", "",
		"Connection", "X-Secret-Hop, keep-alive", "X-Secret-Hop", "1", "Keep-Alive", "timeout=5", "Te", "trailers",
		"Upgrade", "websocket", "Proxy-Authorization", "Basic eDp5", "Proxy-Connection", "keep-alive",
		"Forwarded", "for=203.0.113.9", "X-Forwarded-For", "203.0.113.9", "X-Forwarded-Host", "evil.example",
		"X-Forwarded-Proto", "https", "User-Agent", "partner-sdk/1.0", "Accept-Language", "de")
	if w.Code != 200 {
		t.Fatalf("%d %s", w.Code, w.Body)
	}
	r := <-seen
	for _, name := range []string{"X-Secret-Hop", "Keep-Alive", "Te", "Upgrade", "Proxy-Authorization", "Proxy-Connection",
		"Forwarded", "X-Forwarded-For", "X-Forwarded-Host", "X-Forwarded-Proto", "Authorization"} {
		if v, ok := r.Header[name]; ok {
			t.Errorf("the service got %s: %q", name, v)
		}
	}
	if r.UserAgent() != "partner-sdk/1.0" || r.Header.Get("Accept-Language") != "de" || r.Host != strings.TrimPrefix(up.URL, "http://") {
		t.Errorf("the service got User-Agent %q, Accept-Language %q, Host %q", r.UserAgent(), r.Header.Get("Accept-Language"), r.Host)
	}

	serveOne(g, "GET", "/v1/config", "")
	if r := <-seen; len(r.Header["User-Agent"]) != 0 {
		t.Errorf("a request without User-Agent reached the service with %q", r.Header["User-Agent"])
	}
}

// TestRelayPassesQueriesOneWay: a plain query reaches the service as the
// client wrote it; one a parser could split two ways (a ';', a broken
// escape) is re-encoded without the ambiguous pairs.
func TestRelayPassesQueriesOneWay(t *testing.T) {
	var got string
	up := upstreamFunc(func(r *http.Request) *http.Response {
		got = r.URL.RawQuery
		return answer(200, "sandbox", `{}`)(r)
	})
	g := newGateway(t, keySet("bank"), up, quiet())
	for query, want := range map[string]string{
		"":                         "",
		"b=2&a=1&c=%C3%A9":         "b=2&a=1&c=%C3%A9",
		"a=1;b=2":                  "",
		"a=1&b=2;c=3":              "a=1",
		"a=%zz&b=1":                "b=1",
		"country=DE&currency=EUR%": "country=DE",
	} {
		serveOne(g, "GET", "/v1/rates?"+query, "")
		if got != want {
			t.Errorf("query %q reached the service as %q, want %q", query, got, want)
		}
	}
}

// TestRelayAnswersWithoutConnectionHeaders: the service's hop-by-hop
// headers stop at the gateway; every value of the others passes.
func TestRelayAnswersWithoutConnectionHeaders(t *testing.T) {
	up := upstreamFunc(func(r *http.Request) *http.Response {
		resp := answer(200, "sandbox", `{}`, "Connection", "X-Hop", "X-Hop", "1", "Keep-Alive", "timeout=1",
			"Cache-Control", "no-store")(r)
		resp.Header["Set-Cookie"] = []string{"a=1", "b=2"}
		return resp
	})
	g := newGateway(t, keySet("bank"), up, quiet())
	w := serveOne(g, "GET", "/v1/config", "")
	h := w.Header()
	if h.Get("X-Hop") != "" || h.Get("Keep-Alive") != "" || h.Get("Connection") != "" {
		t.Errorf("hop-by-hop headers reached the client: %v", h)
	}
	if h.Get("Cache-Control") != "no-store" || strings.Join(h["Set-Cookie"], " ") != "a=1 b=2" {
		t.Errorf("Cache-Control %q, Set-Cookie %q", h.Get("Cache-Control"), h["Set-Cookie"])
	}
	if w.Body.String() != `{"environment":"sandbox"}` {
		t.Errorf("body %s", w.Body)
	}
}

// TestRelayAnswersWithTheGatewaysDate: over real connections, a usual
// answer carries the gateway's clock, not a service's (whose clock may be
// off), and exactly these header fields. Besides Date, which net/http
// writes outside the handler's header map, they are 8: a small map's
// slots. A ninth (a service's Date, as before) made that map and
// net/http's copy of it at WriteHeader grow to tables: 1.1 KB and 5
// allocations more per request (BenchmarkProductionPath).
func TestRelayAnswersWithTheGatewaysDate(t *testing.T) {
	stale := "Mon, 01 Jan 2001 00:00:00 GMT"
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Cache-Control", "no-store")
		w.Header().Set("X-Environment", "sandbox")
		w.Header().Set("Date", stale)
		io.WriteString(w, `{"a":1}`)
	}))
	defer up.Close()
	front := httptest.NewServer(newGatewayTo(t, up.URL, quiet()))
	defer front.Close()

	r, _ := http.NewRequest("GET", front.URL+"/v1/config", nil)
	r.Header.Set("Authorization", "Bearer "+testKey)
	before := time.Now().Add(-time.Second)
	resp, err := http.DefaultClient.Do(r)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || string(body) != `{"environment":"sandbox","a":1}` {
		t.Fatalf("%d %s", resp.StatusCode, body)
	}
	dates := resp.Header.Values("Date")
	if len(dates) != 1 {
		t.Fatalf("Date %q, want one", dates)
	}
	if at, err := http.ParseTime(dates[0]); err != nil || at.Before(before.Truncate(time.Second)) || at.After(time.Now()) {
		t.Errorf("Date %q is not the gateway's clock", dates[0])
	}
	var names []string
	for name := range resp.Header {
		names = append(names, name)
	}
	slices.Sort(names)
	want := "Access-Control-Allow-Origin Access-Control-Expose-Headers Cache-Control Content-Length Content-Type Date Ratelimit Ratelimit-Policy X-Request-Id"
	if got := strings.Join(names, " "); got != want {
		t.Errorf("answer header fields\n %s\nwant\n %s", got, want)
	}
}

// TestRelayRefusesAProtocolSwitch: the gateway proxies no upgrade; a
// service that answers 101 is a failure (500 internal), not a tunnel.
func TestRelayRefusesAProtocolSwitch(t *testing.T) {
	g := newGateway(t, keySet("bank"), answer(101, "sandbox", ``, "Upgrade", "websocket"), quiet())
	w := serveOne(g, "GET", "/v1/config", "", "Upgrade", "websocket", "Connection", "Upgrade")
	if w.Code != 500 || w.Body.String() != internalAnswer {
		t.Errorf("%d %s", w.Code, w.Body)
	}
}

// TestACutAnswerCutsTheClient: a service's answer that breaks off after
// its header reaches the client as a broken connection, never as a whole
// (shorter) answer; the request line says answer_cut. Chunked, or short
// of its Content-Length (relayed from the connection's buffer).
func TestACutAnswerCutsTheClient(t *testing.T) {
	for name, answer := range map[string]string{
		"chunked":        "Transfer-Encoding: chunked\r\n\r\n9\r\n{\"quoteId\r\n",
		"content length": "Content-Length: 100\r\n\r\n{\"quoteId",
	} {
		t.Run(name, func(t *testing.T) {
			u := startRaw(t, func(_ int, c net.Conn, br *bufio.Reader, u *rawUpstream) {
				if _, ok := u.readRequest(br); !ok {
					return
				}
				io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nX-Environment: sandbox\r\n"+answer)
			})
			var logs bytes.Buffer
			srv := httptest.NewServer(newGatewayTo(t, "http://"+u.addr, slog.New(slog.NewJSONHandler(&logs, nil))))
			defer srv.Close()
			req, _ := http.NewRequest("GET", srv.URL+"/v1/config", nil)
			req.Header.Set("Authorization", "Bearer "+testKey)
			// The client sees no answer or a broken one, as where the cut falls.
			if resp, err := srv.Client().Do(req); err == nil {
				body, err := io.ReadAll(resp.Body)
				resp.Body.Close()
				if err == nil {
					t.Errorf("the client read a whole answer: %d %s", resp.StatusCode, body)
				}
			}
			srv.Close() // the log line is written before the connection is cut
			if !strings.Contains(logs.String(), `"code":"answer_cut"`) || !strings.Contains(logs.String(), `"msg":"upstream answer broke off","upstream":"payout"`) {
				t.Errorf("log: %s", logs.String())
			}
		})
	}
}

// TestRelayWritesWholeAnswers: answers of every size and framing reach the
// client whole, "environment" first, the connection to the service reused:
// a Content-Length answer straight from the connection's buffer (one that
// fits it, one several times its size), a chunked one through a copy
// buffer, an empty object.
func TestRelayWritesWholeAnswers(t *testing.T) {
	big := `{"items":"` + strings.Repeat("x", 10<<10) + `"}`
	var conns atomic.Int64
	up := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("X-Environment", "sandbox")
		switch r.URL.Query().Get("size") {
		case "small":
			w.Header().Set("Content-Length", "15")
			io.WriteString(w, `{"quoteId":"q"}`)
		case "big":
			w.Header().Set("Content-Length", strconv.Itoa(len(big)))
			io.WriteString(w, big)
		case "chunked":
			io.WriteString(w, big) // over 2 KiB without a length: chunked
		case "empty":
			io.WriteString(w, `{}`)
		}
	}))
	up.Config.ConnState = func(_ net.Conn, s http.ConnState) {
		if s == http.StateNew {
			conns.Add(1)
		}
	}
	up.Start()
	defer up.Close()
	g := newGatewayTo(t, up.URL, quiet())
	for _, tc := range []struct{ size, want string }{
		{"small", `{"environment":"sandbox","quoteId":"q"}`},
		{"big", `{"environment":"sandbox","items":"` + strings.Repeat("x", 10<<10) + `"}`},
		{"chunked", `{"environment":"sandbox","items":"` + strings.Repeat("x", 10<<10) + `"}`},
		{"empty", `{"environment":"sandbox"}`},
		{"big", `{"environment":"sandbox","items":"` + strings.Repeat("x", 10<<10) + `"}`},
	} {
		w := serveOne(g, "GET", "/v1/rates?size="+tc.size, "")
		if w.Code != 200 || w.Body.String() != tc.want {
			t.Errorf("%s: %d %.80s… (%d bytes), want %d bytes", tc.size, w.Code, w.Body, w.Body.Len(), len(tc.want))
		}
		if cl := w.Header().Get("Content-Length"); tc.size != "chunked" && cl != strconv.Itoa(len(tc.want)) {
			t.Errorf("%s: Content-Length %q, body %d bytes", tc.size, cl, len(tc.want))
		}
	}
	if conns.Load() != 1 {
		t.Errorf("%d connections to the service for 5 answers, want 1", conns.Load())
	}
}

// TestRelayKeepsTheUpstreamPath: an upstream URL with a path (a service
// behind a path-routing proxy) gets it before the request's.
func TestRelayKeepsTheUpstreamPath(t *testing.T) {
	seen := make(chan string, 1)
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		seen <- r.URL.RequestURI()
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("X-Environment", "sandbox")
		io.WriteString(w, `{}`)
	}))
	defer up.Close()
	g := newGatewayTo(t, up.URL+"/payout/", quiet())
	if w := serveOne(g, "GET", "/v1/rates?from=EUR", ""); w.Code != 200 {
		t.Fatalf("%d %s", w.Code, w.Body)
	}
	if got := <-seen; got != "/payout/v1/rates?from=EUR" {
		t.Errorf("the service got %s", got)
	}
}

// TestCopyAnswerSaysWhoBrokeOff: a client that stops taking the answer is
// client_gone, a service answer that breaks off is answer_cut, whether
// the body writes itself (the stamped upstream body) or is copied.
func TestCopyAnswerSaysWhoBrokeOff(t *testing.T) {
	stamped := func(r io.Reader) io.Reader {
		resp := &http.Response{Header: http.Header{"Content-Type": {"application/json"}}, Body: io.NopCloser(r), ContentLength: -1}
		if err := newSplicer("sandbox").stamp(resp); err != nil {
			t.Fatal(err)
		}
		return resp.Body
	}
	cut := func() io.Reader {
		return io.MultiReader(strings.NewReader(`{"a":`), iotest.ErrReader(io.ErrUnexpectedEOF))
	}
	for _, tc := range []struct {
		name   string
		body   io.Reader
		client io.Writer
		want   string
	}{
		{"whole, copied", struct{ io.Reader }{strings.NewReader(`{"a":1}`)}, io.Discard, ""},
		{"whole, written out", stamped(strings.NewReader(`{"a":1}`)), io.Discard, ""},
		{"client gone, copied", struct{ io.Reader }{strings.NewReader(`{"a":1}`)}, failingWriter{}, codeClientGone},
		{"client gone, written out", stamped(strings.NewReader(`{"a":1}`)), failingWriter{}, codeClientGone},
		{"service cut, copied", cut(), io.Discard, codeAnswerCut},
		{"service cut, written out", stamped(cut()), io.Discard, codeAnswerCut},
	} {
		if got := copyAnswer(&clientWriter{w: tc.client}, tc.body); got != tc.want {
			t.Errorf("%s: %q, want %q", tc.name, got, tc.want)
		}
	}
}

type failingWriter struct{}

func (failingWriter) Write([]byte) (int, error) { return 0, errors.New("broken pipe") }
