package edge

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"sync"
	"syscall"
	"time"
)

// Transport carries the gateway's requests to its services over HTTP/1.1
// keep-alive connections. Unlike net/http's Transport, which gives every
// connection a reading and a writing goroutine and hands each request
// between three, the caller's own goroutine writes the request (one write:
// headers and the buffered body) and reads the answer. Under load that is
// about a quarter less of the gateway's CPU per config GET (a seventh per
// quote POST) and two goroutines fewer per connection (make loadtest).
//
// A request up to 4 KiB (all of ours but a large POST body) is written
// into a buffer before a connection is taken, then sent and its answer
// awaited in one wait on the socket (sendAwait): the look at a pooled
// connection, the write, and a read only once the answer is there —
// three system calls where a peek, a write, a read that finds nothing and
// the read of the answer would be four. A larger request goes out as it
// is written, on a connection looked at first.
//
// A connection is reused only when its answer was read to the end, asked
// for no close, and left nothing unread. One that waited in the pool is
// looked at (a non-blocking peek) before anything is written on it: a
// service that closed it (its idle timeout, a restart) is noticed, and the
// request goes out on another. If a reused connection still fails before
// any byte of an answer, the request is sent once more on a new one when
// that is safe, as net/http does: it has no body or a buffered one, and
// its method is idempotent or it carries an Idempotency-Key.
//
// Every wait ends when the request's context does: at its deadline (each
// route's timeout; HeaderTimeout when it has none) or when it is cancelled
// (the client went away). The connection gets a passed deadline then; no
// deadline is set or cleared on the way of a request that ends well.
type Transport struct {
	Dial           func(ctx context.Context, network, addr string) (net.Conn, error)
	MaxIdlePerHost int               // idle connections kept per service
	IdleTimeout    time.Duration     // an idle connection older than this is closed
	HeaderTimeout  time.Duration     // the deadline of a request whose context has none
	Dialed         func(host string) // called for each new connection (metrics); may be nil

	mu    sync.Mutex
	idle  map[string][]*upConn // by host:port, the most recently used last
	sweep *time.Timer          // closes expired idle connections while any are idle
}

// NewTransport is the upstream transport: pools sized for a busy gateway and
// tight dial and header deadlines, so a stuck service shows as an error
// quickly.
func NewTransport() *Transport {
	return &Transport{
		Dial:           (&net.Dialer{Timeout: 2 * time.Second, KeepAlive: 30 * time.Second}).DialContext,
		MaxIdlePerHost: 256,
		IdleTimeout:    90 * time.Second, // below the services' 120 s, so the gateway closes first
		HeaderTimeout:  LongestTimeout + 5*time.Second,
	}
}

// maxHeaderBytes bounds a service's answer header.
const maxHeaderBytes = 1 << 20

type upConn struct {
	conn     net.Conn
	limit    limitedReader // what br reads: the answer's first bytes, then the connection, with a cap while a header is read
	br       *bufio.Reader // only while an answer is read
	host     string
	reused   bool
	idleFrom time.Time

	unhook func() bool // ends the hook of the request's context; false if the context ended first

	// The wait for an answer's first bytes, on a socket (see awaitAnswer
	// and sendAwait; set by watchReadable).
	raw       syscall.RawConn
	readFirst func(fd uintptr) bool // reads the answer's first bytes, or says to wait
	sendFirst func(fd uintptr) bool // sends unsent, then does readFirst's part
	firstN    int
	firstErr  error
	out       *requestOut // sendFirst's request, until it is written whole (then released)
	unsent    []byte      // … and the part of it not written yet
	stale     bool        // sendFirst found the pooled connection closed (or not quiet), and wrote nothing
	sendErr   error       // why sendFirst stopped writing; EAGAIN: the rest goes by conn.Write
}

// firstReads hold the first bytes of an answer, taken when they have
// arrived: a request waiting for its service holds no read buffer.
var firstReads = sync.Pool{New: func() any { return new([4 << 10]byte) }}

type limitedReader struct {
	r         io.Reader
	first     *[4 << 10]byte // the answer's first bytes, read by awaitAnswer …
	pending   []byte         // … and the part of them not yet read
	remaining int64
}

func (l *limitedReader) Read(p []byte) (int, error) {
	if l.remaining <= 0 {
		return 0, errHeaderTooLarge
	}
	if int64(len(p)) > l.remaining {
		p = p[:l.remaining]
	}
	if len(l.pending) > 0 {
		n := copy(p, l.pending)
		l.pending = l.pending[n:]
		if len(l.pending) == 0 {
			firstReads.Put(l.first)
			l.first = nil
		}
		l.remaining -= int64(n)
		return n, nil
	}
	n, err := l.r.Read(p)
	l.remaining -= int64(n)
	return n, err
}

// awaitAnswer waits until the answer's first bytes have arrived and reads
// them. On a socket it waits for the connection to be readable and only
// then takes a buffer (readFirst, set by watchReadable); elsewhere it
// reads into one as it waits.
func (pc *upConn) awaitAnswer() error {
	if pc.readFirst != nil {
		if err := pc.raw.Read(pc.readFirst); err != nil {
			return err
		}
	} else {
		b := firstReads.Get().(*[4 << 10]byte)
		pc.firstN, pc.firstErr = pc.conn.Read(b[:])
		pc.limit.first = b
	}
	return pc.answerRead()
}

// answerRead makes the first read's bytes the answer's beginning, or says
// why there are none.
func (pc *upConn) answerRead() error {
	err := pc.firstErr
	if err == nil && pc.firstN == 0 {
		err = io.EOF
	}
	if err != nil {
		if pc.limit.first != nil {
			firstReads.Put(pc.limit.first)
			pc.limit.first = nil
		}
		return err
	}
	pc.limit.pending = pc.limit.first[:pc.firstN]
	return nil
}

var errHeaderTooLarge = errors.New("upstream answer header over 1 MiB")

// sendAwait sends the request o holds on pc and waits for the answer's
// first bytes; o goes back to its pool as soon as its bytes are written,
// so a request waiting for its service holds no write buffer. stale: pc
// came from the pool and was found closed (or talking) before anything
// was written; o still holds the request for another connection. sent:
// all of it was written.
//
// On a socket it is one RawConn.Read: sendFirst looks at a pooled
// connection, writes, and asks to wait; readFirst reads once the socket
// is readable. No wakeup is lost: the poller's readiness is reset before
// sendFirst runs, so an answer that arrives after the write, even before
// the wait, ends it.
func (pc *upConn) sendAwait(o *requestOut) (stale, sent bool, err error) {
	if pc.sendFirst == nil {
		_, err := pc.conn.Write(o.held)
		o.release()
		if err != nil {
			return false, false, err
		}
		return false, true, pc.awaitAnswer()
	}
	pc.out, pc.unsent, pc.stale, pc.sendErr = o, o.held, false, nil
	err = pc.raw.Read(pc.sendFirst)
	switch {
	case pc.stale:
		pc.out, pc.unsent = nil, nil
		return true, false, nil
	case pc.out == nil: // written whole, and o released
		if err == nil {
			err = pc.answerRead()
		}
		return false, true, err
	}
	// Not written whole: the wait ended (the context did) before sendFirst
	// ran, the write failed, or the socket took part of it.
	rest, sendErr := pc.unsent, pc.sendErr
	pc.out, pc.unsent = nil, nil
	switch {
	case sendErr == syscall.EAGAIN || sendErr == syscall.EWOULDBLOCK:
		_, err = pc.conn.Write(rest)
	case sendErr != nil:
		err = sendErr
	}
	o.release()
	if err != nil {
		return false, false, err
	}
	return false, true, pc.awaitAnswer()
}

// writers are the buffers requests are written through, and readers the
// ones answers are read through: one per request being written or read,
// not one per connection. An idle connection, or one waiting for its
// answer, holds neither (4 KiB each, times every connection to every
// service).
var (
	writers = sync.Pool{New: func() any { o := new(requestOut); o.bw = bufio.NewWriterSize(o, 4<<10); return o }}
	readers = sync.Pool{New: func() any { return bufio.NewReaderSize(nil, 4<<10) }}
)

// requestOut is what a request is written through. Its buffer (bw) holds
// a request up to 4 KiB whole: the flush hands those bytes to held, for
// sendAwait. A larger request's bytes come here as the buffer fills, and
// go out on a connection taken (and looked at) at the first of them.
type requestOut struct {
	bw      *bufio.Writer // writes here
	t       *Transport
	ctx     context.Context
	host    string
	holding bool   // the flush: hold the bytes
	held    []byte // bw's own bytes, valid until bw is written again
	pc      *upConn
	err     error // taking a connection failed
}

// release gives o, and the buffer its held bytes are in, back to the pool.
func (o *requestOut) release() {
	o.bw.Reset(o)
	*o = requestOut{bw: o.bw}
	writers.Put(o)
	if released != nil {
		released()
	}
}

// released, when set (by a test), is called as each request's write
// buffer goes back to the pool.
var released func()

func (o *requestOut) Write(p []byte) (int, error) {
	if o.holding {
		o.held = p
		return len(p), nil
	}
	if o.pc == nil {
		if o.pc, o.err = o.t.conn(o.ctx, o.host, true); o.err != nil {
			return 0, o.err
		}
		o.pc.hook(o.ctx)
	}
	return o.pc.conn.Write(p)
}

// aLongTimeAgo is a deadline that has passed: setting it ends any wait.
var aLongTimeAgo = time.Unix(1, 0)

// RoundTrip sends req and returns the answer, its body read from the
// connection as the caller reads it.
func (t *Transport) RoundTrip(req *http.Request) (*http.Response, error) {
	if req.URL.Scheme != "http" {
		closeBody(req)
		return nil, fmt.Errorf("upstream scheme %q: only http", req.URL.Scheme)
	}
	ctx := req.Context()
	host := hostPort(req.URL)
	cancel := context.CancelFunc(func() {})
	if _, ok := ctx.Deadline(); !ok {
		ctx, cancel = context.WithTimeout(ctx, t.HeaderTimeout)
	}
	resp, err := t.roundTrip(ctx, host, req, cancel)
	if err != nil {
		cancel()
	}
	return resp, err
}

func (t *Transport) roundTrip(ctx context.Context, host string, req *http.Request, cancel context.CancelFunc) (*http.Response, error) {
	for retried := false; ; retried = true {
		resp, reused, answered, err := t.exchange(ctx, host, req, cancel)
		if err == nil {
			return resp, nil
		}
		if cerr := ctx.Err(); cerr != nil {
			return nil, fmt.Errorf("%w (%v)", cerr, err)
		}
		if retried || !reused || answered || !replayable(req) {
			return nil, err
		}
		req = req.WithContext(ctx) // a copy: the caller's request is not changed
		if req.GetBody != nil {
			if req.Body, err = req.GetBody(); err != nil {
				return nil, err
			}
		}
	}
}

// exchange writes req on a connection to host and reads the answer's
// header. reused is whether the connection had carried a request before;
// answered whether any byte of an answer arrived: after that, sending the
// request again could do it twice.
//
// The connection is hooked to ctx until the answer has been read: its
// unhook returns false when ctx ended first, and the connection cannot be
// trusted then. Once the answer is read, cancel ends the transport's own
// timeout, if it made one.
func (t *Transport) exchange(ctx context.Context, host string, req *http.Request, cancel context.CancelFunc) (resp *http.Response, reused, answered bool, err error) {
	o := writers.Get().(*requestOut)
	o.t, o.ctx, o.host = t, ctx, host
	err = writeRequest(o.bw, req) // the request line, Host, headers and body; closes the body
	if err == nil {
		o.holding = true
		err = o.bw.Flush()
	}
	pc := o.pc
	fail := func(err error, answered bool) (*http.Response, bool, bool, error) {
		pc.unhook()
		pc.conn.Close()
		return nil, pc.reused, answered, err
	}
	switch {
	case o.err != nil: // no connection to be had
		err = o.err
		o.release()
		return nil, false, false, err
	case err != nil:
		o.release()
		if pc == nil { // refused before a byte went out
			return nil, false, false, fmt.Errorf("upstream write: %w", err)
		}
		return fail(fmt.Errorf("upstream write: %w", err), false)
	case pc != nil: // a large request, all but its last bytes written
		_, err = pc.conn.Write(o.held)
		o.release()
		if err != nil {
			return fail(fmt.Errorf("upstream write: %w", err), false)
		}
		err = pc.awaitAnswer()
	default:
		for {
			if pc, err = t.conn(ctx, host, false); err != nil {
				o.release()
				return nil, false, false, err
			}
			pc.hook(ctx)
			var stale, sent bool
			if stale, sent, err = pc.sendAwait(o); !stale {
				if !sent {
					return fail(fmt.Errorf("upstream write: %w", err), false)
				}
				break
			}
			pc.unhook()
			pc.conn.Close()
		}
	}
	if err != nil {
		return fail(fmt.Errorf("no answer from upstream: %w", err), false)
	}
	pc.br = readers.Get().(*bufio.Reader)
	pc.br.Reset(&pc.limit)
	for {
		resp, err = http.ReadResponse(pc.br, req)
		if err != nil {
			return fail(fmt.Errorf("upstream answer: %w", err), true)
		}
		if resp.StatusCode >= 200 || resp.StatusCode < 100 {
			break
		}
		if resp.StatusCode == http.StatusSwitchingProtocols {
			return fail(errors.New("upstream switched protocols: not proxied"), true)
		}
		// 1xx (100 Continue, 103 Early Hints): the answer follows.
	}
	pc.limit.remaining = 1<<63 - 1
	reuse := !resp.Close && !req.Close
	if resp.Body == http.NoBody {
		t.release(pc, cancel, reuse)
		return resp, pc.reused, true, nil
	}
	body := &upstreamBody{pc: pc, t: t, cancel: cancel, reuse: reuse}
	if resp.ContentLength > 0 && len(resp.TransferEncoding) == 0 {
		body.left = resp.ContentLength // read from the connection's buffer, no copy
	} else {
		body.body = resp.Body // chunked, or until the service closes
	}
	resp.Body = body
	return resp, pc.reused, true, nil
}

// hook ends pc's waits when ctx ends, until pc.unhook.
func (pc *upConn) hook(ctx context.Context) {
	pc.limit.remaining = maxHeaderBytes
	pc.unhook = context.AfterFunc(ctx, func() { _ = pc.conn.SetDeadline(aLongTimeAgo) })
}

// release returns pc to the pool when it can carry another request.
func (t *Transport) release(pc *upConn, cancel context.CancelFunc, reuse bool) {
	hooked := pc.unhook()
	cancel()
	// Not hooked: the context ended meanwhile and its passed deadline may
	// be on the connection. A buffered byte: the service sent more than its
	// answer.
	if !hooked || !reuse || pc.br.Buffered() > 0 || len(pc.limit.pending) > 0 {
		pc.conn.Close()
		return
	}
	pc.br.Reset(nil)
	readers.Put(pc.br)
	pc.br = nil
	pc.reused, pc.idleFrom = true, time.Now()
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.idle == nil {
		t.idle = map[string][]*upConn{}
	}
	l := t.idle[pc.host]
	for len(l) > 0 && pc.idleFrom.Sub(l[0].idleFrom) > t.IdleTimeout { // the oldest first
		l[0].conn.Close()
		l = l[1:]
	}
	if len(l) >= t.MaxIdlePerHost {
		pc.conn.Close()
		t.idle[pc.host] = l
		return
	}
	t.idle[pc.host] = append(l, pc)
	if t.sweep == nil {
		t.sweep = time.AfterFunc(t.IdleTimeout, t.expire)
	}
}

// expire closes the connections idle longer than IdleTimeout, and looks
// again later while any are left.
func (t *Transport) expire() {
	t.mu.Lock()
	defer t.mu.Unlock()
	now, left := time.Now(), false
	for host, l := range t.idle {
		for len(l) > 0 && now.Sub(l[0].idleFrom) > t.IdleTimeout {
			l[0].conn.Close()
			l = l[1:]
		}
		if len(l) == 0 {
			delete(t.idle, host)
			continue
		}
		t.idle[host], left = l, true
	}
	t.sweep = nil
	if left {
		t.sweep = time.AfterFunc(t.IdleTimeout/2, t.expire)
	}
}

// conn is an idle connection to host, or a new one. look: only one that is
// still open (stillOpen); without it the caller looks (sendAwait).
func (t *Transport) conn(ctx context.Context, host string, look bool) (*upConn, error) {
	for {
		t.mu.Lock()
		l := t.idle[host]
		if len(l) == 0 {
			t.mu.Unlock()
			break
		}
		pc := l[len(l)-1]
		t.idle[host] = l[:len(l)-1]
		t.mu.Unlock()
		if time.Since(pc.idleFrom) <= t.IdleTimeout && (!look || stillOpen(pc.conn)) {
			return pc, nil
		}
		pc.conn.Close()
	}
	conn, err := t.Dial(ctx, "tcp", host)
	if err != nil {
		return nil, err
	}
	if t.Dialed != nil {
		t.Dialed(host)
	}
	pc := &upConn{conn: conn, host: host}
	pc.limit.r = conn
	watchReadable(pc)
	return pc, nil
}

// hostPort is where the transport connects for u: its host and port, 80
// when it names none.
func hostPort(u *url.URL) string {
	if u.Port() != "" {
		return u.Host
	}
	return net.JoinHostPort(u.Hostname(), "80")
}

// replayable: sending req again cannot do twice what the caller asked once
// (net/http's rule).
func replayable(req *http.Request) bool {
	if req.Body != nil && req.Body != http.NoBody && req.GetBody == nil {
		return false
	}
	switch req.Method {
	case http.MethodGet, http.MethodHead, http.MethodOptions, http.MethodTrace:
		return true
	}
	return len(req.Header["Idempotency-Key"]) > 0 || len(req.Header["X-Idempotency-Key"]) > 0
}

func closeBody(req *http.Request) {
	if req.Body != nil {
		req.Body.Close()
	}
}

// upstreamBody is an answer's body; read to its end, it gives its
// connection back to the pool. An answer with a Content-Length (every
// answer of ours up to 2 KiB, where net/http stops buffering) is read
// straight from the connection's buffer, and WriteTo writes it from there:
// no copy buffer, no copy.
type upstreamBody struct {
	body   io.ReadCloser // net/http's reader of a chunked answer; nil for a Content-Length one
	left   int64         // … or the bytes of it still to read
	pc     *upConn
	t      *Transport
	cancel context.CancelFunc
	reuse  bool
	done   bool
}

func (b *upstreamBody) Read(p []byte) (int, error) {
	if b.done {
		return 0, io.EOF
	}
	if b.body != nil {
		n, err := b.body.Read(p)
		if err != nil {
			b.end(err)
		}
		return n, err
	}
	if int64(len(p)) > b.left {
		p = p[:b.left]
	}
	n, err := b.pc.br.Read(p)
	b.left -= int64(n)
	switch {
	case b.left == 0:
		err = io.EOF
	case err == io.EOF:
		err = io.ErrUnexpectedEOF
	}
	if err != nil {
		b.end(err)
	}
	return n, err
}

// WriteTo writes the rest of the answer to w. A write error is w's (the
// client's); a read error is the service's answer breaking off.
func (b *upstreamBody) WriteTo(w io.Writer) (int64, error) {
	if b.body != nil {
		return copyBuffered(w, readerOnly{b})
	}
	var written int64
	for !b.done {
		if b.left == 0 {
			b.end(io.EOF)
			break
		}
		br := b.pc.br
		if br.Buffered() == 0 {
			if _, err := br.Peek(1); err != nil {
				if err == io.EOF {
					err = io.ErrUnexpectedEOF
				}
				b.end(err)
				return written, err
			}
		}
		chunk, _ := br.Peek(int(min(int64(br.Buffered()), b.left)))
		n, err := w.Write(chunk)
		_, _ = br.Discard(n)
		b.left -= int64(n)
		written += int64(n)
		if err != nil {
			b.Close()
			return written, err
		}
	}
	return written, nil
}

// end finishes the body at err: io.EOF gives the connection back; anything
// else closes it.
func (b *upstreamBody) end(err error) {
	if err != io.EOF {
		b.Close()
		return
	}
	b.done = true
	b.t.release(b.pc, b.cancel, b.reuse)
}

// Close before the end closes the connection: what is left unread would
// be the next answer's beginning.
func (b *upstreamBody) Close() error {
	if !b.done {
		b.done = true
		b.pc.unhook()
		b.cancel()
		b.pc.conn.Close()
	}
	return nil
}

// readerOnly hides a reader's WriteTo from io.CopyBuffer.
type readerOnly struct{ io.Reader }
