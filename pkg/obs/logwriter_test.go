package obs

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
	t.Parallel()
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

// lineCounter tells of each write it takes.
type lineCounter struct {
	mu    sync.Mutex
	buf   bytes.Buffer
	wrote chan struct{}
}

func (c *lineCounter) Write(p []byte) (int, error) {
	c.mu.Lock()
	c.buf.Write(p)
	c.mu.Unlock()
	select {
	case c.wrote <- struct{}{}:
	default:
	}
	return len(p), nil
}

func (c *lineCounter) lines() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return strings.Split(strings.TrimSuffix(c.buf.String(), "\n"), "\n")
}

// waitLines waits for the writer to have taken n lines, and fails the test
// if it has not within a generous bound (a flush is due every FlushEvery).
func (c *lineCounter) waitLines(t *testing.T, n int) []string {
	t.Helper()
	bound := time.After(10 * time.Second)
	for {
		if got := c.lines(); len(got) >= n && got[0] != "" {
			return got
		}
		select {
		case <-c.wrote:
		case <-bound:
			t.Fatalf("the writer took %d lines, want %d without a Close", len(c.lines()), n)
		}
	}
}

// Lines from many goroutines all arrive, whole, without a Close; and a line
// written once everything has been flushed is flushed too (only the first
// line after a flush wakes the writer's goroutine).
func TestEveryLineArrivesWithoutAClose(t *testing.T) {
	t.Parallel()
	out := &lineCounter{wrote: make(chan struct{}, 1)}
	l := NewLogWriter(out, LogBuffer)
	defer l.Close()
	const writers, each = 8, 200
	var wg sync.WaitGroup
	for w := range writers {
		wg.Go(func() {
			for i := range each {
				l.Write([]byte(strings.Repeat(string(rune('a'+w)), 20+i%7) + "\n"))
			}
		})
	}
	wg.Wait()
	got := out.waitLines(t, writers*each)
	for _, line := range got {
		if strings.Trim(line, line[:1]) != "" || len(line) < 20 {
			t.Fatalf("a line arrived cut or mixed with another: %q", line)
		}
	}
	if len(got) != writers*each || l.Dropped() != 0 {
		t.Fatalf("%d lines arrived, %d dropped; want %d, none dropped", len(got), l.Dropped(), writers*each)
	}
	for i := range 3 { // after the buffer drained, each lone line still goes out
		l.Write([]byte("late\n"))
		if got := out.waitLines(t, writers*each+i+1); got[len(got)-1] != "late" {
			t.Fatalf("the last line is %q, want late", got[len(got)-1])
		}
	}
}
