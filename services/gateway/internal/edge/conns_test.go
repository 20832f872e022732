package edge

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// rawUpstream accepts connections and runs serve on each, in order: a
// service that misbehaves exactly as a test needs.
type rawUpstream struct {
	addr  string
	dials atomic.Int64
	seen  atomic.Int64 // requests read
}

func startRaw(t *testing.T, serve func(n int, c net.Conn, br *bufio.Reader, u *rawUpstream)) *rawUpstream {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	u := &rawUpstream{addr: ln.Addr().String()}
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			n := int(u.dials.Add(1))
			go func() {
				defer c.Close()
				serve(n, c, bufio.NewReader(c), u)
			}()
		}
	}()
	return u
}

// readRequest reads one request and its body.
func (u *rawUpstream) readRequest(br *bufio.Reader) (*http.Request, bool) {
	r, err := http.ReadRequest(br)
	if err != nil {
		return nil, false
	}
	io.Copy(io.Discard, r.Body)
	u.seen.Add(1)
	return r, true
}

const okAnswer = "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok"

// keepServing answers every request on the connection with okAnswer.
func keepServing(_ int, c net.Conn, br *bufio.Reader, u *rawUpstream) {
	for {
		if _, ok := u.readRequest(br); !ok {
			return
		}
		io.WriteString(c, okAnswer)
	}
}

// send sends a request (a POST with a small JSON body) and returns the
// answer as "status body".
func send(t *testing.T, tr http.RoundTripper, method, url string, header ...string) (string, error) {
	t.Helper()
	body := ""
	if method == "POST" {
		body = `{"a":1}`
	}
	return sendBody(t, tr, method, url, body, header...)
}

// sendBody is send with the body given ("": none).
func sendBody(t *testing.T, tr http.RoundTripper, method, url, body string, header ...string) (string, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	var r io.Reader
	if body != "" {
		r = strings.NewReader(body)
	}
	req, _ := http.NewRequestWithContext(ctx, method, url, r)
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	resp, err := tr.RoundTrip(req)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return fmt.Sprintf("%d %s", resp.StatusCode, b), err
}

// dialWrapped makes tr's connections ones that are not sockets (no
// SyscallConn), as a dialer that wraps them would.
func dialWrapped(tr *Transport) {
	dial := tr.Dial
	tr.Dial = func(ctx context.Context, network, addr string) (net.Conn, error) {
		c, err := dial(ctx, network, addr)
		return struct{ net.Conn }{c}, err
	}
}

func TestTransportReusesOneConnection(t *testing.T) {
	u := startRaw(t, keepServing)
	tr := NewTransport()
	for i := range 5 {
		if got, err := send(t, tr, "GET", "http://"+u.addr+"/v1/config"); err != nil || got != "200 ok" {
			t.Fatalf("request %d: %q %v", i, got, err)
		}
	}
	if u.dials.Load() != 1 {
		t.Errorf("%d connections for 5 requests in a row, want 1", u.dials.Load())
	}
}

// A service that closed an idle connection (its idle timeout, a restart)
// costs nothing: the pool notices before writing, even a POST without an
// Idempotency-Key goes out once, on a new connection.
func TestTransportNoticesAConnectionClosedWhileIdle(t *testing.T) {
	u := startRaw(t, func(n int, c net.Conn, br *bufio.Reader, u *rawUpstream) {
		if _, ok := u.readRequest(br); ok {
			io.WriteString(c, okAnswer) // then close: the deferred Close
		}
	})
	tr := NewTransport()
	if got, err := send(t, tr, "POST", "http://"+u.addr+"/v1/bank/payout/quote"); err != nil || got != "200 ok" {
		t.Fatalf("%q %v", got, err)
	}
	time.Sleep(50 * time.Millisecond) // the close reaches the gateway's side
	if got, err := send(t, tr, "POST", "http://"+u.addr+"/v1/bank/payout/quote"); err != nil || got != "200 ok" {
		t.Fatalf("after the idle close: %q %v", got, err)
	}
	if u.dials.Load() != 2 || u.seen.Load() != 2 {
		t.Errorf("%d connections, %d requests seen; want 2 and 2", u.dials.Load(), u.seen.Load())
	}
}

// A reused connection that fails before any byte of an answer: sent again
// only when that cannot do twice what was asked once.
func TestTransportSendsAgainOnlyWhatIsSafeToSendAgain(t *testing.T) {
	for _, tc := range []struct {
		method     string
		header     []string
		again      bool
		noDeadline bool
	}{
		{"GET", nil, true, false},
		{"GET", nil, true, true},
		{"POST", nil, false, false},
		{"POST", []string{"Idempotency-Key", "k-1"}, true, false},
	} {
		t.Run(fmt.Sprint(tc.method, tc.header, tc.noDeadline), func(t *testing.T) {
			// The first connection answers one request, then reads the
			// next and closes without answering (a crash, or the idle
			// close racing the request). Later connections behave.
			u := startRaw(t, func(n int, c net.Conn, br *bufio.Reader, u *rawUpstream) {
				if n > 1 {
					keepServing(n, c, br, u)
					return
				}
				if _, ok := u.readRequest(br); ok {
					io.WriteString(c, okAnswer)
				}
				u.readRequest(br)
			})
			tr := NewTransport()
			if _, err := send(t, tr, "GET", "http://"+u.addr+"/warm"); err != nil {
				t.Fatal(err)
			}
			var got string
			var err error
			if !tc.noDeadline {
				got, err = send(t, tr, tc.method, "http://"+u.addr+"/v1/bank/payout", tc.header...)
			}
			if tc.noDeadline { // the transport's own timeout is not spent on the first try
				req, _ := http.NewRequest(tc.method, "http://"+u.addr+"/v1/config", nil)
				resp, rerr := tr.RoundTrip(req)
				if err = rerr; err == nil {
					b, _ := io.ReadAll(resp.Body)
					resp.Body.Close()
					got = fmt.Sprintf("%d %s", resp.StatusCode, b)
				}
			}
			if tc.again && (err != nil || got != "200 ok" || u.seen.Load() != 3) {
				t.Errorf("want it sent again and answered: %q %v, %d requests seen", got, err, u.seen.Load())
			}
			if !tc.again && (err == nil || u.seen.Load() != 2) {
				t.Errorf("want an error and no second try: %q %v, %d requests seen", got, err, u.seen.Load())
			}
		})
	}
}

func TestTransportEndsTheWaitWithTheContext(t *testing.T) {
	u := startRaw(t, func(n int, c net.Conn, br *bufio.Reader, u *rawUpstream) {
		u.readRequest(br)
		time.Sleep(3 * time.Second) // no answer
	})
	tr := NewTransport()
	tr.HeaderTimeout = 200 * time.Millisecond
	for _, tc := range []struct {
		name string
		ctx  func() (context.Context, context.CancelFunc)
		want error
	}{
		{"no deadline: the transport's own", func() (context.Context, context.CancelFunc) {
			return context.Background(), func() {}
		}, context.DeadlineExceeded},
		{"deadline", func() (context.Context, context.CancelFunc) {
			return context.WithTimeout(context.Background(), 100*time.Millisecond)
		}, context.DeadlineExceeded},
		{"cancel", func() (context.Context, context.CancelFunc) {
			ctx, cancel := context.WithCancel(context.Background())
			time.AfterFunc(50*time.Millisecond, cancel)
			return ctx, cancel
		}, context.Canceled},
	} {
		ctx, cancel := tc.ctx()
		req, _ := http.NewRequestWithContext(ctx, "GET", "http://"+u.addr+"/slow", nil)
		start := time.Now()
		_, err := tr.RoundTrip(req)
		cancel()
		if !errors.Is(err, tc.want) || time.Since(start) > 2*time.Second {
			t.Errorf("%s: after %v: %v", tc.name, time.Since(start), err)
		}
	}
}

// A connection is pooled only when its answer was read to the end and
// nothing else came.
func TestTransportPoolsOnlyCleanConnections(t *testing.T) {
	for _, tc := range []struct {
		name, answer string
		readAll      bool
	}{
		{"body not read to the end", okAnswer, false},
		{"Connection: close", "HTTP/1.1 200 OK\r\nConnection: close\r\nContent-Length: 2\r\n\r\nok", true},
		{"bytes after the answer", okAnswer + "HTTP/1.1 200 OK\r\n", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			u := startRaw(t, func(n int, c net.Conn, br *bufio.Reader, u *rawUpstream) {
				for {
					if _, ok := u.readRequest(br); !ok {
						return
					}
					io.WriteString(c, tc.answer)
				}
			})
			tr := NewTransport()
			for range 2 {
				req, _ := http.NewRequest("GET", "http://"+u.addr+"/", nil)
				resp, err := tr.RoundTrip(req)
				if err != nil {
					t.Fatal(err)
				}
				if tc.readAll {
					io.ReadAll(resp.Body)
				}
				resp.Body.Close()
			}
			if u.dials.Load() != 2 {
				t.Errorf("%d connections for 2 requests, want 2 (none reused)", u.dials.Load())
			}
		})
	}
}

func TestTransportReadsPastInformationalAnswers(t *testing.T) {
	u := startRaw(t, func(n int, c net.Conn, br *bufio.Reader, u *rawUpstream) {
		u.readRequest(br)
		io.WriteString(c, "HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 103 Early Hints\r\nLink: </a>\r\n\r\n"+okAnswer)
	})
	if got, err := send(t, NewTransport(), "POST", "http://"+u.addr+"/"); err != nil || got != "200 ok" {
		t.Errorf("%q %v", got, err)
	}
}

func TestTransportRefusesAnEndlessHeader(t *testing.T) {
	u := startRaw(t, func(n int, c net.Conn, br *bufio.Reader, u *rawUpstream) {
		u.readRequest(br)
		io.WriteString(c, "HTTP/1.1 200 OK\r\n")
		line := "X-Filler: " + strings.Repeat("a", 1000) + "\r\n"
		for range 1100 {
			if _, err := io.WriteString(c, line); err != nil {
				return
			}
		}
	})
	if _, err := send(t, NewTransport(), "GET", "http://"+u.addr+"/"); !errors.Is(err, errHeaderTooLarge) {
		t.Errorf("want %v, got %v", errHeaderTooLarge, err)
	}
}

func TestTransportClosesConnectionsIdleTooLong(t *testing.T) {
	u := startRaw(t, keepServing)
	tr := NewTransport()
	tr.IdleTimeout = 50 * time.Millisecond
	if _, err := send(t, tr, "GET", "http://"+u.addr+"/"); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(2 * time.Second)
	for tr.idleCount() > 0 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if n := tr.idleCount(); n != 0 {
		t.Fatalf("%d idle connections left after the idle timeout", n)
	}
	if _, err := send(t, tr, "GET", "http://"+u.addr+"/"); err != nil || u.dials.Load() != 2 {
		t.Errorf("%v; %d connections, want a new one", err, u.dials.Load())
	}
}

func (t *Transport) idleCount() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	n := 0
	for _, l := range t.idle {
		n += len(l)
	}
	return n
}

// Many callers at once, each answer on the right caller: the service
// echoes each request's id, and connections are shared through the pool.
func TestTransportUnderConcurrency(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		w.Header().Set("X-Echo", r.Header.Get("X-Request-Id"))
		fmt.Fprintf(w, "%s:%s", r.Header.Get("X-Request-Id"), b)
	}))
	defer srv.Close()
	tr := NewTransport()
	tr.MaxIdlePerHost = 8
	var wg sync.WaitGroup
	for g := range 32 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 40 {
				id := fmt.Sprintf("g%d-%d", g, i)
				req, _ := http.NewRequest("POST", srv.URL+"/", strings.NewReader(id))
				req.Header.Set("X-Request-Id", id)
				resp, err := tr.RoundTrip(req)
				if err != nil {
					t.Error(err)
					return
				}
				b, _ := io.ReadAll(resp.Body)
				resp.Body.Close()
				if string(b) != id+":"+id || resp.Header.Get("X-Echo") != id {
					t.Errorf("request %s got %q", id, b)
					return
				}
			}
		}()
	}
	wg.Wait()
	if n := tr.idleCount(); n > 8 {
		t.Errorf("%d idle connections kept, at most 8", n)
	}
}

// Bodies bigger than every buffer on the way, both directions: a 1 MiB
// request (the gateway's cap) and a 3 MiB chunked answer; the connection
// is reused after each.
func TestTransportCarriesLargeBodies(t *testing.T) {
	var conns atomic.Int64
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n, _ := io.Copy(io.Discard, r.Body)
		if r.Method == "GET" {
			chunk := strings.Repeat("x", 1000)
			for range 3 << 10 {
				io.WriteString(w, chunk) // no Content-Length: chunked
			}
			return
		}
		fmt.Fprintf(w, "%d", n)
	}))
	srv.Config.ConnState = func(_ net.Conn, s http.ConnState) {
		if s == http.StateNew {
			conns.Add(1)
		}
	}
	srv.Start()
	defer srv.Close()
	tr := NewTransport()
	for range 2 {
		body := strings.Repeat("b", 1<<20)
		req, _ := http.NewRequest("POST", srv.URL+"/", strings.NewReader(body))
		resp, err := tr.RoundTrip(req)
		if err != nil {
			t.Fatal(err)
		}
		got, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if string(got) != "1048576" {
			t.Errorf("the service read %s bytes of 1048576", got)
		}
		req, _ = http.NewRequest("GET", srv.URL+"/", nil)
		if resp, err = tr.RoundTrip(req); err != nil {
			t.Fatal(err)
		}
		n, err := io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if err != nil || n != 3000<<10 || len(resp.TransferEncoding) == 0 {
			t.Errorf("read %d of %d bytes (%v), transfer encoding %v", n, 3000<<10, err, resp.TransferEncoding)
		}
	}
	if conns.Load() != 1 {
		t.Errorf("%d connections for 4 requests, want 1", conns.Load())
	}
}

// A Content-Length answer is read from the connection's own buffer, a
// byte at a time or written out whole; one cut short is an unexpected end,
// never a short answer, and its connection is not reused. An idle
// connection holds no read buffer.
func TestTransportReadsContentLengthAnswers(t *testing.T) {
	body := strings.Repeat("0123456789", 1000) // over two read buffers
	u := startRaw(t, func(n int, c net.Conn, br *bufio.Reader, u *rawUpstream) {
		for {
			r, ok := u.readRequest(br)
			if !ok {
				return
			}
			if r.URL.Path == "/cut" {
				io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Length: 20\r\n\r\n0123456789")
				return
			}
			fmt.Fprintf(c, "HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n%s", len(body), body)
		}
	})
	tr := NewTransport()
	get := func(path string) *http.Response {
		t.Helper()
		req, _ := http.NewRequest("GET", "http://"+u.addr+path, nil)
		resp, err := tr.RoundTrip(req)
		if err != nil {
			t.Fatal(err)
		}
		return resp
	}

	resp := get("/")
	var got []byte
	one := make([]byte, 1)
	for {
		n, err := resp.Body.Read(one)
		got = append(got, one[:n]...)
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	if string(got) != body {
		t.Errorf("read byte by byte: %d bytes, want %d", len(got), len(body))
	}

	resp = get("/")
	var out strings.Builder
	n, err := resp.Body.(io.WriterTo).WriteTo(&out)
	if err != nil || n != int64(len(body)) || out.String() != body {
		t.Errorf("written out: %d bytes (%v), want %d", n, err, len(body))
	}
	tr.mu.Lock()
	for _, pc := range tr.idle[u.addr] {
		if pc.br != nil {
			t.Errorf("an idle connection holds a %d-byte read buffer", pc.br.Size())
		}
	}
	tr.mu.Unlock()
	if u.dials.Load() != 1 {
		t.Errorf("%d connections for 2 answers read to the end, want 1", u.dials.Load())
	}

	resp = get("/cut")
	if b, err := io.ReadAll(resp.Body); err != io.ErrUnexpectedEOF {
		t.Errorf("a cut answer read as %q, %v; want io.ErrUnexpectedEOF", b, err)
	}
	resp = get("/cut")
	if _, err := resp.Body.(io.WriterTo).WriteTo(io.Discard); err != io.ErrUnexpectedEOF {
		t.Errorf("a cut answer written out: %v; want io.ErrUnexpectedEOF", err)
	}
	if n := tr.idleCount(); n != 0 {
		t.Errorf("%d connections pooled after cut answers", n)
	}
}

// A connection that is not a socket (a dialer that wraps it) is waited on
// with a read: the same answers, reuse and failures.
func TestTransportOverAWrappedConnection(t *testing.T) {
	u := startRaw(t, func(n int, c net.Conn, br *bufio.Reader, u *rawUpstream) {
		for {
			r, ok := u.readRequest(br)
			if !ok {
				return
			}
			if r.URL.Path == "/close" {
				return
			}
			io.WriteString(c, okAnswer)
		}
	})
	tr := NewTransport()
	dialWrapped(tr)
	for i := range 3 {
		if got, err := send(t, tr, "GET", "http://"+u.addr+"/"); err != nil || got != "200 ok" {
			t.Fatalf("request %d: %q %v", i, got, err)
		}
	}
	if u.dials.Load() != 1 {
		t.Errorf("%d connections for 3 requests, want 1", u.dials.Load())
	}
	if _, err := send(t, tr, "POST", "http://"+u.addr+"/close"); err == nil || !strings.Contains(err.Error(), "no answer from upstream") {
		t.Errorf("a connection closed without an answer: %v", err)
	}
}

// A request's write buffer goes back to the pool once its bytes are
// written, before its answer comes: a request waiting for its service
// holds none. The service answers only once the buffer is back.
func TestTransportHoldsNoWriteBufferWhileWaiting(t *testing.T) {
	back := make(chan struct{}, 1)
	released = func() {
		select {
		case back <- struct{}{}:
		default:
		}
	}
	t.Cleanup(func() { released = nil })
	u := startRaw(t, func(n int, c net.Conn, br *bufio.Reader, u *rawUpstream) {
		for {
			if _, ok := u.readRequest(br); !ok {
				return
			}
			select {
			case <-back:
				io.WriteString(c, okAnswer)
			case <-time.After(time.Second):
				io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Length: 4\r\n\r\nheld")
			}
		}
	})
	for _, tc := range []struct {
		name    string
		body    int
		wrapped bool
	}{
		{"a request sent in the wait", 20, false},
		{"a large request, sent as it is written", 64 << 10, false},
		{"a connection that is not a socket", 20, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tr := NewTransport()
			if tc.wrapped {
				dialWrapped(tr)
			}
			for i := range 2 { // a new connection, then a pooled one
				select { // nothing from the last request
				case <-back:
				default:
				}
				got, err := sendBody(t, tr, "POST", "http://"+u.addr+"/v1/bank/payout/quote", strings.Repeat("b", tc.body))
				if err != nil {
					t.Fatal(err)
				}
				if got != "200 ok" {
					t.Errorf("request %d: the service answered %q: the write buffer was still held", i, got)
				}
			}
		})
	}
}
