package serve

import (
	"bytes"
	"strings"
	"sync"
	"testing"
	"time"
)

// blockedWriter is a log pipe nobody reads until released.
type blockedWriter struct {
	release chan struct{}
	mu      sync.Mutex
	buf     bytes.Buffer
	writes  int
}

func (b *blockedWriter) Write(p []byte) (int, error) {
	<-b.release
	b.mu.Lock()
	defer b.mu.Unlock()
	b.writes++
	return b.buf.Write(p)
}

// TestALogLineNeverWaits: with the pipe stuck, writes return at once; what
// does not fit is dropped and counted; the rest arrives, whole, in order,
// in fewer writes than lines, and Close flushes it.
func TestALogLineNeverWaits(t *testing.T) {
	out := &blockedWriter{release: make(chan struct{})}
	l := NewLogWriter(out, 1000)
	line := []byte(strings.Repeat("x", 99) + "\n") // 100 bytes
	start := time.Now()
	for range 30 {
		if n, err := l.Write(line); n != 100 || err != nil {
			t.Fatalf("Write = %d, %v", n, err)
		}
	}
	if d := time.Since(start); d > time.Second {
		t.Fatalf("30 writes to a stuck pipe took %v", d)
	}
	// The buffer holds 10 lines; a few more may be in flight (taken before
	// the pipe blocked); the rest are dropped.
	if d := l.Dropped(); d < 10 || d > 20 {
		t.Errorf("dropped %d lines, want 10 to 20", d)
	}
	close(out.release)
	l.Close()
	kept := 30 - int(l.Dropped())
	if out.buf.Len() != kept*100 || strings.Count(out.buf.String(), "\n") != kept {
		t.Errorf("wrote %d bytes, want %d whole lines", out.buf.Len(), kept)
	}
	if out.writes >= kept {
		t.Errorf("%d lines took %d writes; they should gather", kept, out.writes)
	}
	if _, err := l.Write(line); err != nil || out.buf.Len() != (kept+1)*100 {
		t.Error("a line after Close is not written straight through")
	}
}
