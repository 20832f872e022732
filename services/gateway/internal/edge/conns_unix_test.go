//go:build unix

package edge

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"syscall"
	"testing"
	"time"
)

// echoing answers each request with its body.
func echoing(_ int, c net.Conn, br *bufio.Reader, u *rawUpstream) {
	for {
		r, err := http.ReadRequest(br)
		if err != nil {
			return
		}
		b, _ := io.ReadAll(r.Body)
		u.seen.Add(1)
		fmt.Fprintf(c, "HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n%s", len(b), b)
	}
}

// cutWrites makes sendFirst's writes fail as write says, for the test.
func cutWrites(t *testing.T, write func(call int, fd int, p []byte) (int, error)) {
	t.Helper()
	calls := 0
	writeSocket = func(fd int, p []byte) (int, error) {
		calls++
		return write(calls, fd, p)
	}
	t.Cleanup(func() { writeSocket = syscall.Write })
}

// A socket that takes part of a request (its buffer full): the rest is
// written as the socket drains, and the service reads the request whole.
func TestTransportFinishesARequestTheSocketTookInPart(t *testing.T) {
	u := startRaw(t, echoing)
	tr := NewTransport()
	cutWrites(t, func(call, fd int, p []byte) (int, error) {
		if call%2 == 0 {
			return 0, syscall.EAGAIN
		}
		return syscall.Write(fd, p[:min(len(p), 7)])
	})
	for i := range 3 { // a new connection, then a pooled one
		body := fmt.Sprintf(`{"request":%d,"amount":"125.00"}`, i)
		if got, err := sendBody(t, tr, "POST", "http://"+u.addr+"/v1/bank/payout/quote", body); err != nil || got != "200 "+body {
			t.Fatalf("request %d: %q %v; want %q", i, got, err, body)
		}
	}
	if u.dials.Load() != 1 || u.seen.Load() != 3 {
		t.Errorf("%d connections, %d requests seen; want 1 and 3", u.dials.Load(), u.seen.Load())
	}
}

// A write that fails is the request not sent: an error, the connection
// closed, and a POST without an Idempotency-Key not sent again.
func TestTransportReportsAFailedWrite(t *testing.T) {
	u := startRaw(t, echoing)
	tr := NewTransport()
	if got, err := sendBody(t, tr, "POST", "http://"+u.addr+"/warm", "a"); err != nil || got != "200 a" {
		t.Fatalf("%q %v", got, err)
	}
	cutWrites(t, func(call, fd int, p []byte) (int, error) { return 0, syscall.EPIPE })
	if _, err := sendBody(t, tr, "POST", "http://"+u.addr+"/v1/bank/payout", `{"quote_id":"q"}`); err == nil || !strings.Contains(err.Error(), "upstream write") {
		t.Errorf("want the write's error, got %v", err)
	}
	if u.seen.Load() != 1 || tr.idleCount() != 0 {
		t.Errorf("%d requests seen, %d connections pooled; want 1 and 0", u.seen.Load(), tr.idleCount())
	}
}

// A pooled connection that is not quiet — its service closed it while it
// was idle, or sent bytes no request asked for — is never written on: the
// request, small (sent in the wait) or large (sent as it is written), goes
// once, on a new connection.
func TestTransportWritesNothingOnAConnectionThatIsNotQuiet(t *testing.T) {
	for _, tc := range []struct {
		name  string
		after string // what the service does once it has answered the first request
		body  int    // bytes of the second request's body
	}{
		{"closed, small request", "close", 20},
		{"closed, large request", "close", 64 << 10},
		{"spoke, small request", "speak", 20},
		{"spoke, large request", "speak", 64 << 10},
	} {
		t.Run(tc.name, func(t *testing.T) {
			u := startRaw(t, func(n int, c net.Conn, br *bufio.Reader, u *rawUpstream) {
				if n > 1 {
					echoing(n, c, br, u)
					return
				}
				if _, ok := u.readRequest(br); !ok {
					return
				}
				io.WriteString(c, okAnswer)
				if tc.after == "close" {
					return
				}
				time.Sleep(20 * time.Millisecond) // pooled by now
				io.WriteString(c, "HTTP/1.1 200 OK\r\n")
				u.readRequest(br) // counted if anything is written on it
			})
			tr := NewTransport()
			if got, err := send(t, tr, "GET", "http://"+u.addr+"/warm"); err != nil || got != "200 ok" {
				t.Fatalf("%q %v", got, err)
			}
			time.Sleep(50 * time.Millisecond) // the close or the bytes reach the gateway's side
			body := strings.Repeat("b", tc.body)
			if got, err := sendBody(t, tr, "POST", "http://"+u.addr+"/v1/bank/payout", body); err != nil || got != "200 "+body {
				t.Fatalf("%d bytes back, %v; want 200 and the %d sent", len(got), err, len(body))
			}
			if u.dials.Load() != 2 || u.seen.Load() != 2 {
				t.Errorf("%d connections, %d requests seen; want 2 and 2", u.dials.Load(), u.seen.Load())
			}
		})
	}
}
