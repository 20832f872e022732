package obs

import (
	"io"
	"sync"
	"sync/atomic"
	"time"
)

// LogWriter keeps a slow log pipe out of the request path: Write copies a
// line into a bounded buffer and returns at once; one goroutine writes what
// has gathered, many lines in one write, at most once per FlushEvery (so
// a busy binary makes ~100 writes a second for its log, not one or more per
// request: the writing, and waking the goroutine, cost the gateway about a
// tenth of its CPU per request). When the buffer is full (whatever
// reads the pipe is stuck or far too slow) the line is dropped and counted,
// never waited for. Each Write must be whole lines (slog writes one record
// per call).
type LogWriter struct {
	w     io.Writer
	limit int

	mu      sync.Mutex
	pending []byte
	spare   []byte
	closed  bool

	wake    chan struct{}
	done    chan struct{}
	dropped atomic.Uint64
}

// NewLogWriter writes to w from its own goroutine, holding at most limit
// bytes not yet written.
func NewLogWriter(w io.Writer, limit int) *LogWriter {
	l := &LogWriter{w: w, limit: limit, wake: make(chan struct{}, 1), done: make(chan struct{})}
	go l.loop()
	return l
}

// Write queues p; it never blocks on the underlying writer.
func (l *LogWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	if l.closed {
		l.mu.Unlock()
		return l.w.Write(p) // after Close: the last lines of a stopping binary
	}
	if len(l.pending)+len(p) > l.limit {
		l.mu.Unlock()
		l.dropped.Add(1)
		return len(p), nil
	}
	l.pending = append(l.pending, p...)
	l.mu.Unlock()
	select {
	case l.wake <- struct{}{}:
	default: // already woken
	}
	return len(p), nil
}

// Dropped is how many lines were dropped because the buffer was full.
func (l *LogWriter) Dropped() uint64 { return l.dropped.Load() }

// FlushEvery is the longest a line waits in the buffer.
const FlushEvery = 10 * time.Millisecond

func (l *LogWriter) loop() {
	defer close(l.done)
	for range l.wake {
		time.Sleep(FlushEvery) // let lines gather
		if l.flush() {
			return
		}
	}
}

// flush writes what is pending; true once closed and drained.
func (l *LogWriter) flush() bool {
	l.mu.Lock()
	out, closed := l.pending, l.closed
	l.pending = l.spare[:0]
	l.mu.Unlock()
	if len(out) > 0 {
		_, _ = l.w.Write(out)
	}
	l.mu.Lock()
	if cap(out) <= 256<<10 { // keep a modest buffer; let a burst's go
		l.spare = out[:0]
	} else {
		l.spare = nil
	}
	l.mu.Unlock()
	return closed
}

// Close writes everything queued and stops the goroutine; later writes go
// straight to the underlying writer.
func (l *LogWriter) Close() error {
	l.mu.Lock()
	if l.closed {
		l.mu.Unlock()
		return nil
	}
	l.closed = true
	l.mu.Unlock()
	select {
	case l.wake <- struct{}{}:
	default:
	}
	<-l.done
	l.flush()
	return nil
}
