package devstack

import (
	"strings"
	"testing"
)

type countingWriter struct {
	strings.Builder
	writes int
}

func (c *countingWriter) Write(b []byte) (int, error) { c.writes++; return c.Builder.Write(b) }

// TestTheLogRelayStreams: lines come out whole and prefixed, however the
// pipe cuts them, in one write per chunk, and nothing is kept once written.
func TestTheLogRelayStreams(t *testing.T) {
	out := &countingWriter{}
	p := &prefixWriter{prefix: "gateway | ", w: out}
	p.Write([]byte("{\"a\":1}\n{\"b\""))
	p.Write([]byte(":2}\n{\"c\":3}\n{\"d\":4}\n"))
	p.Write([]byte("{\"e\""))
	want := "gateway | {\"a\":1}\ngateway | {\"b\":2}\ngateway | {\"c\":3}\ngateway | {\"d\":4}\n"
	if out.String() != want || out.writes != 2 {
		t.Fatalf("relayed %q in %d writes, want %q in 2", out.String(), out.writes, want)
	}
	if string(p.partial) != "{\"e\"" {
		t.Errorf("held back %q, want only the unfinished line", p.partial)
	}
	for range 10000 {
		p.Write([]byte(":5}\n" + strings.Repeat("x", 200) + "\n{\"e\""))
	}
	if cap(p.partial) > 64 || cap(p.out) > 4096 {
		t.Errorf("after 20000 lines the relay holds %d+%d bytes", cap(p.partial), cap(p.out))
	}
	p.Write([]byte(strings.Repeat("y", maxPartial+1)))
	if len(p.partial) != 0 || !strings.HasSuffix(out.String(), "y\n") {
		t.Errorf("a line with no end is not flushed past %d bytes", maxPartial)
	}
}
