package edge

import (
	"bufio"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httptrace"
	"net/textproto"
	"os"
	"strings"
	"sync"
	"testing"
	"time"
)

// misbehaving is a service that answers each request as its mode says,
// over raw TCP. A normal answer names the request it answers (the
// X-Request-Id the gateway sent), so a client can tell its own answer from
// another's.
type misbehaving struct {
	ln   net.Listener
	mode func(n int, req *http.Request, c net.Conn)
	mu   sync.Mutex
	n    int
}

func startMisbehaving(t *testing.T, mode func(n int, req *http.Request, c net.Conn)) *misbehaving {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	m := &misbehaving{ln: ln, mode: mode}
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go m.serve(c)
		}
	}()
	t.Cleanup(func() { ln.Close() })
	return m
}

func (m *misbehaving) serve(c net.Conn) {
	defer c.Close()
	br := bufio.NewReader(c)
	for {
		req, err := http.ReadRequest(br)
		if err != nil {
			return
		}
		io.Copy(io.Discard, req.Body)
		if req.URL.Path == "/health" {
			// The gateway's circuit probe: answered, and not counted, so
			// that it never shifts which request of a pair misbehaves.
			io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 11\r\n\r\n{\"ok\":true}")
			continue
		}
		m.mu.Lock()
		m.n++
		n := m.n
		m.mu.Unlock()
		m.mode(n, req, c)
	}
}

// own is a well-formed answer to req.
func own(req *http.Request) string {
	body := `{"for":"` + req.Header.Get("X-Request-Id") + `"}`
	return "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nX-Environment: sandbox\r\nX-Internal-Call-Id: " + req.Header.Get("X-Internal-Call-Id") + "\r\nContent-Length: " +
		fmt.Sprint(len(body)) + "\r\n\r\n" + body
}

// Whatever a service does wrong on a connection, the next client gets its
// own answer (or a 500 in the envelope), never the bytes of another
// request's: the first request of each pair misbehaves, the second is
// served normally, on the gateway's pooled connection if it kept it.
func TestTheNextClientGetsItsOwnAnswer(t *testing.T) {
	t.Parallel()
	const bad = 1 // the first request of each round misbehaves
	for _, tc := range []struct {
		name string
		mode func(req *http.Request, c net.Conn)
		// The stray bytes come after a whole answer, so the connection
		// may go back to the pool before they arrive: the next call on it
		// then reads them, and the gateway, seeing another call's answer,
		// refuses it with a 500 in the envelope, never passes it on.
		mayCostTheNext bool
	}{
		{"a late answer, after the route's timeout", func(req *http.Request, c net.Conn) {
			// Answer once the gateway has given up on the call and
			// closed the connection (or 4 s on, if it kept it: then the
			// late bytes are there for the next request to get).
			c.SetReadDeadline(time.Now().Add(4 * time.Second))
			io.Copy(io.Discard, c)
			io.WriteString(c, own(req))
		}, false},
		{"extra bytes after the body: another answer", func(req *http.Request, c net.Conn) {
			io.WriteString(c, own(req)+"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nX-Environment: sandbox\r\nContent-Length: 16\r\n\r\n{\"for\":\"forged\"}")
		}, true},
		{"a body shorter than its Content-Length, then a close", func(req *http.Request, c net.Conn) {
			io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nX-Environment: sandbox\r\nContent-Length: 100\r\n\r\n{\"for\":")
			c.Close()
		}, false},
		{"a close in the middle of a chunked body", func(req *http.Request, c net.Conn) {
			io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nX-Environment: sandbox\r\nTransfer-Encoding: chunked\r\n\r\n7\r\n{\"for\":")
			c.Close()
		}, false},
		{"an informational 103 first", func(req *http.Request, c net.Conn) {
			io.WriteString(c, "HTTP/1.1 103 Early Hints\r\nLink: </x>; rel=preload\r\n\r\n"+own(req))
		}, false},
		{"a 204 with a body", func(req *http.Request, c net.Conn) {
			io.WriteString(c, "HTTP/1.1 204 No Content\r\nX-Environment: sandbox\r\n\r\n"+own(req))
		}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			u := startMisbehaving(t, func(n int, req *http.Request, c net.Conn) {
				if n%2 == bad {
					tc.mode(req, c)
					return
				}
				io.WriteString(c, own(req))
			})
			g := newGatewayTo(t, "http://"+u.ln.Addr().String(), quiet())
			// A route timeout short enough for the late answer's case to be
			// quick, long enough that a busy machine (make test runs every
			// package at once) serves the well-behaved calls within it: no
			// verdict hangs on a deadline under 2 s.
			for _, byMethod := range g.routes {
				for _, rt := range byMethod {
					rt.Timeout = 2 * time.Second
				}
			}
			addr := wireServer(t, g)
			client := &http.Client{Timeout: 5 * time.Second}
			for round := range 5 {
				for i := range 2 {
					id := fmt.Sprintf("client-%d-%d", round, i)
					req, _ := http.NewRequest("POST", "http://"+addr+"/v1/bank/payout/quote", strings.NewReader("{}")) // one service: no reference read fail-over
					req.Header.Set("Content-Type", "application/json")
					req.Header.Set("Authorization", "Bearer "+testKey)
					req.Header.Set("X-Request-Id", id)
					resp, err := client.Do(req)
					if err != nil {
						if i == 0 {
							continue // the misbehaving answer may cut the client's connection
						}
						t.Fatalf("round %d, the well-served request: %v", round, err)
					}
					b, rerr := io.ReadAll(resp.Body)
					resp.Body.Close()
					body := string(b)
					switch {
					case rerr != nil && i == 0:
						// A cut answer cuts the client's connection: it never
						// looks whole.
					case rerr != nil:
						t.Fatalf("round %d, the well-served request: %v", round, rerr)
					case strings.Contains(body, `"for":`) && body != `{"environment":"sandbox","for":"`+id+`"}`:
						t.Fatalf("round %d, request %d got another's answer: %d %s", round, i, resp.StatusCode, body)
					case i == 1 && tc.mayCostTheNext && body == internalBody:
					case i == 1 && (resp.StatusCode != 200 || resp.Header.Get("X-Request-Id") != id):
						t.Fatalf("round %d, the well-served request: %d %s (X-Request-Id %q)", round, resp.StatusCode, body, resp.Header.Get("X-Request-Id"))
					case i == 0 && resp.StatusCode != 200 && body != internalBody:
						t.Fatalf("round %d, the misbehaving answer: %d %s", round, resp.StatusCode, body)
					}
				}
			}
		})
	}
}

// Under concurrency too: 16 clients at once against a service that adds a
// forged answer after every other one (or sends a 204 with a body). No
// client ever gets an answer that is not its own.
func TestUnderConcurrencyNoAnswerGoesToAnotherRequest(t *testing.T) {
	t.Parallel()
	for _, forged := range []string{
		"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nX-Environment: sandbox\r\nContent-Length: 16\r\n\r\n{\"for\":\"forged\"}",
		"HTTP/1.1 204 No Content\r\nX-Environment: sandbox\r\n\r\n",
	} {
		u := startMisbehaving(t, func(n int, req *http.Request, c net.Conn) {
			if n%2 == 1 {
				io.WriteString(c, own(req)+forged)
				return
			}
			if strings.HasPrefix(forged, "HTTP/1.1 204") {
				io.WriteString(c, forged+own(req)) // the body after a 204 is the next one's, forged
				return
			}
			io.WriteString(c, own(req))
		})
		g := newGatewayTo(t, "http://"+u.ln.Addr().String(), quiet())
		addr := wireServer(t, g)
		var wg sync.WaitGroup
		for w := range 16 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				client := &http.Client{Timeout: 5 * time.Second}
				for i := range 100 {
					id := fmt.Sprintf("client-%d-%d", w, i)
					req, _ := http.NewRequest("POST", "http://"+addr+"/v1/bank/payout/quote", strings.NewReader("{}")) // one service: no reference read fail-over
					req.Header.Set("Content-Type", "application/json")
					req.Header.Set("Authorization", "Bearer "+testKey)
					req.Header.Set("X-Request-Id", id)
					resp, err := client.Do(req)
					if err != nil {
						continue
					}
					b, _ := io.ReadAll(resp.Body)
					resp.Body.Close()
					if strings.Contains(string(b), `"for":`) && string(b) != `{"environment":"sandbox","for":"`+id+`"}` {
						t.Errorf("%s got %s", id, b)
						return
					}
				}
			}()
		}
		wg.Wait()
	}
}

// A service's informational 103 reaches the client, and the final answer
// still carries every header the gateway sets (net/http's ReverseProxy
// clears the answer's header map after a 1xx).
func TestAnInformationalAnswerPassesAndTheFinalKeepsItsHeaders(t *testing.T) {
	t.Parallel()
	u := startMisbehaving(t, func(n int, req *http.Request, c net.Conn) {
		io.WriteString(c, "HTTP/1.1 103 Early Hints\r\nLink: </x>; rel=preload\r\n\r\n"+own(req))
	})
	g := newGatewayTo(t, "http://"+u.ln.Addr().String(), quiet())
	addr := wireServer(t, g)
	var hints []string
	req, _ := http.NewRequest("POST", "http://"+addr+"/v1/bank/payout/quote", strings.NewReader("{}")) // one service: no reference read fail-over
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+testKey)
	req.Header.Set("X-Request-Id", "early-1")
	req = req.WithContext(httptrace.WithClientTrace(req.Context(), &httptrace.ClientTrace{
		Got1xxResponse: func(code int, h textproto.MIMEHeader) error {
			hints = append(hints, fmt.Sprint(code, " ", h.Get("Link")))
			return nil
		},
	}))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if len(hints) != 1 || hints[0] != "103 </x>; rel=preload" {
		t.Errorf("informational answers %v", hints)
	}
	if resp.StatusCode != 200 || string(b) != `{"environment":"sandbox","for":"early-1"}` || resp.Header.Get("X-Request-Id") != "early-1" ||
		resp.Header.Get("Access-Control-Allow-Origin") != "*" || resp.Header.Get("RateLimit-Policy") == "" {
		t.Errorf("final answer %d %s %v", resp.StatusCode, b, resp.Header)
	}
}

// TestMain keeps the expected noise out of the test log: net/http's own
// complaints, through the standard logger, about the upstreams these tests
// make misbehave ("Unsolicited response received on idle HTTP channel", a
// TLS handshake cut short). The gateway logs through slog; what the
// gateway answered, the tests' subject, is what they judge.
//
// Started with feedBenchChild set, the binary is BenchmarkFeedPage's
// services, in a process of their own, and tests nothing.
//
// (TestMain is the package's setup, not a test: t.Parallel does not apply.)
func TestMain(m *testing.M) {
	// Not a test: the package's setup, to which t.Parallel does not apply.
	log.SetOutput(io.Discard)
	if os.Getenv(feedBenchChild) == "1" {
		serveFeedBenchUpstreams()
		return
	}
	os.Exit(m.Run())
}
