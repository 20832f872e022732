package edge

import (
	"bufio"
	"bytes"
	"io"
	"math/rand/v2"
	"net/http"
	"strconv"
	"strings"
	"testing"
)

// goFraming reads stream the way net/http's server does: one entry per
// request Go reads whole.
func goFraming(stream []byte) []bool {
	var out []bool
	br := bufio.NewReader(bytes.NewReader(stream))
	for {
		req, err := http.ReadRequest(br)
		if err != nil {
			return out
		}
		out = append(out, false)
		if _, err := io.Copy(io.Discard, req.Body); err != nil {
			return out
		}
	}
}

func observe(stream []byte, chunk int) (flags []bool, requests int, lost bool) {
	var f framer
	flagged := map[int]bool{}
	for len(stream) > 0 {
		n := min(chunk, len(stream))
		f.feed(stream[:n], func(i int) { flagged[i] = true })
		stream = stream[n:]
	}
	for i := 0; i < f.index; i++ {
		flags = append(flags, flagged[i])
	}
	return flags, f.index, f.lost
}

func request(cl, te bool, body string, chunks int) string {
	var b strings.Builder
	b.WriteString("POST /v1/bank/payout HTTP/1.1\r\nHost: gw\r\nContent-Type: application/json\r\n")
	if cl {
		b.WriteString("Content-Length: " + strconv.Itoa(len(body)) + "\r\n")
	}
	if te {
		b.WriteString("Transfer-Encoding: chunked\r\n\r\n")
		per := max(1, len(body)/max(1, chunks))
		for rest := body; rest != ""; {
			n := min(per, len(rest))
			b.WriteString(strconv.FormatInt(int64(n), 16) + ";ext=1\r\n" + rest[:n] + "\r\n")
			rest = rest[n:]
		}
		b.WriteString("0\r\nX-Trailer: 1\r\n\r\n")
		return b.String()
	}
	b.WriteString("\r\n" + body)
	return b.String()
}

func TestFramingFollowsGo(t *testing.T) {
	body := `{"quoteId":"bpq_84532_00000000000000000000000000000000","beneficiary":{"name":"A","iban":"DE89370400440532013000"}}`
	stream := request(true, false, body, 0) + request(false, true, body, 3) + request(true, true, body, 5) +
		"GET /v1/config HTTP/1.1\r\nHost: gw\r\n\r\n" + request(true, true, "", 1) + request(true, false, "", 0)
	want := []bool{false, false, true, false, true, false}
	if got := goFraming([]byte(stream)); len(got) != len(want) {
		t.Fatalf("Go reads %d requests, the test expects %d", len(got), len(want))
	}
	for _, chunk := range []int{1, 2, 7, 64, 4096, len(stream)} {
		flags, n, lost := observe([]byte(stream), chunk)
		if lost || n != len(want) {
			t.Fatalf("read %d bytes at a time: %d requests (lost %v), want %d", chunk, n, lost, len(want))
		}
		for i := range want {
			if flags[i] != want[i] {
				t.Errorf("read %d at a time: request %d flagged %v, want %v", chunk, i, flags[i], want[i])
			}
		}
	}
}

func TestFramingGivesUpOnHugeHeads(t *testing.T) {
	_, _, lost := observe([]byte("GET / HTTP/1.1\r\nX-Big: "+strings.Repeat("a", maxHead)+"\r\n\r\n"), 4096)
	if !lost {
		t.Error("a head over the limit must mark the connection lost")
	}
}

// FuzzFraming builds random request streams (framing headers present or
// not, bodies split into random chunks, read in random pieces) and checks
// the observer counts the requests Go reads and flags exactly the ones
// whose head had both Content-Length and Transfer-Encoding.
func FuzzFraming(f *testing.F) {
	f.Add(uint64(1), "{}", uint8(3))
	f.Add(uint64(42), `{"a":"\r\n\r\n0\r\n\r\n"}`, uint8(1))
	f.Add(uint64(7), "", uint8(9))
	f.Fuzz(func(t *testing.T, seed uint64, body string, pieces uint8) {
		r := rand.New(rand.NewPCG(seed, seed>>1))
		var stream strings.Builder
		var want []bool
		for range 1 + r.IntN(4) {
			cl, te := r.IntN(2) == 0, r.IntN(2) == 0
			stream.WriteString(request(cl, te, body, 1+r.IntN(5)))
			want = append(want, cl && te)
		}
		if n := len(goFraming([]byte(stream.String()))); n < len(want) {
			t.Skipf("Go reads %d of %d requests (a body it refuses)", n, len(want))
		}
		// A body sent without Content-Length or Transfer-Encoding is read as
		// the next request: the observer counts it, Go refuses it (400,
		// connection closed; no handler runs) or reads it too. Either way
		// the requests Go hands to handlers are the first len(want).
		flags, n, lost := observe([]byte(stream.String()), 1+int(pieces))
		if lost || n < len(want) {
			t.Fatalf("observed %d requests (lost %v), Go reads %d", n, lost, len(want))
		}
		for i := range want {
			if flags[i] != want[i] {
				t.Fatalf("request %d flagged %v, want %v", i, flags[i], want[i])
			}
		}
	})
}
