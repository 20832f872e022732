package edge

import (
	"bytes"
	"context"
	"net"
	"net/http"
	"strconv"
	"sync"
)

// Framing watches the raw bytes of each HTTP/1.1 connection the gateway
// accepts, without changing them, to see what net/http hides: Go drops a
// Content-Length sent along with Transfer-Encoding: chunked (RFC 9112
// allows it) and keeps the connection open. A front proxy that frames by
// Content-Length would read that request differently from us — request
// smuggling — so DESIGN §2 refuses it and closes the connection.
//
// The observer follows the message stream the way Go frames it: a head up
// to its empty line, then a chunked body or Content-Length bytes. It records,
// per request on the connection, whether the head was ambiguous; the
// handler of the n-th request reads the n-th answer. It only ever refuses
// more; when its parse gives up (a head over the size Go allows, a chunk it
// cannot read) the connection is marked lost and every later request on it
// is refused too, since Go would have closed it anyway.
type Framing struct{}

// Listener wraps ln so that every connection is observed.
func (Framing) Listener(ln net.Listener) net.Listener { return framingListener{ln} }

// ConnContext puts the connection's observer in its requests' context.
func (Framing) ConnContext(ctx context.Context, c net.Conn) context.Context {
	if fc, ok := c.(*framedConn); ok {
		return context.WithValue(ctx, framingKey{}, fc)
	}
	return ctx
}

type framingKey struct{}

type framingListener struct{ net.Listener }

func (l framingListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	return &framedConn{Conn: c}, nil
}

// framedConn is a connection and what its observer saw.
type framedConn struct {
	net.Conn
	mu      sync.Mutex
	parser  framer
	served  int // requests handed to handlers so far
	flagged map[int]bool
}

func (c *framedConn) Read(p []byte) (int, error) {
	n, err := c.Conn.Read(p)
	if n > 0 {
		c.mu.Lock()
		c.parser.feed(p[:n], func(index int) {
			if c.flagged == nil {
				c.flagged = map[int]bool{}
			}
			c.flagged[index] = true
		})
		c.mu.Unlock()
	}
	return n, err
}

// next is called once per request, in order, by its handler: whether that
// request's framing was ambiguous (or could not be followed).
func (c *framedConn) next() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	i := c.served
	c.served++
	bad := c.flagged[i] || c.parser.lost
	delete(c.flagged, i)
	return bad
}

// ambiguousFraming reports whether r's head carried both Content-Length and
// Transfer-Encoding (or its connection's framing was lost). Requests that
// did not come through Framing's listener (tests, HTTP/2) report false.
func ambiguousFraming(r *http.Request) bool {
	fc, ok := r.Context().Value(framingKey{}).(*framedConn)
	return ok && fc.next()
}

// maxHead is the most head bytes the observer reads: above net/http's 64
// KiB MaxHeaderBytes (plus its 4 KiB slack), after which Go answers 431.
const maxHead = 72 << 10

type framerState int

const (
	inHead framerState = iota
	inBody
	inChunkSize
	inChunkData
	inChunkCRLF
	inTrailer
)

// framer is the observer's state machine over the byte stream.
type framer struct {
	state   framerState
	line    []byte // the line being read (head, chunk size, trailer)
	head    int    // bytes of the current head so far
	index   int    // the request being read
	started bool   // a head's request line was seen

	http10                    bool // HTTP/1.0: Go ignores Transfer-Encoding
	hasLength, hasTE, chunked bool
	length                    int64
	remaining                 int64
	lost                      bool
}

func (f *framer) feed(p []byte, flag func(index int)) {
	for len(p) > 0 && !f.lost {
		switch f.state {
		case inBody, inChunkData:
			n := min(int64(len(p)), f.remaining)
			f.remaining -= n
			p = p[n:]
			if f.remaining == 0 {
				if f.state == inBody {
					f.endMessage()
				} else {
					f.state = inChunkCRLF
				}
			}
			continue
		}
		i := bytes.IndexByte(p, '\n')
		if i < 0 {
			f.line = append(f.line, p...)
			if len(f.line) > maxHead {
				f.lost = true
			}
			return
		}
		f.line = append(f.line, p[:i]...)
		p = p[i+1:]
		if f.state == inHead || f.state == inTrailer {
			if f.head += len(f.line) + 1; f.head > maxHead {
				f.lost = true
				return
			}
		}
		f.onLine(bytes.TrimSuffix(f.line, []byte("\r")), flag)
		f.line = f.line[:0]
	}
}

func (f *framer) onLine(line []byte, flag func(index int)) {
	switch f.state {
	case inHead:
		if len(line) == 0 {
			if !f.started {
				return // blank lines before a request line are skipped, as Go does
			}
			f.endHead(flag)
			return
		}
		if !f.started {
			f.started = true // the request line
			f.http10 = bytes.HasSuffix(line, []byte(" HTTP/1.0"))
			return
		}
		name, value, ok := bytes.Cut(line, []byte(":"))
		if !ok {
			return // Go refuses such a head and closes the connection
		}
		switch {
		case bytes.EqualFold(bytes.TrimSpace(name), []byte("Content-Length")):
			f.hasLength = true
			if n, err := strconv.ParseInt(string(bytes.TrimSpace(value)), 10, 64); err == nil && n >= 0 {
				f.length = n
			}
		case bytes.EqualFold(bytes.TrimSpace(name), []byte("Transfer-Encoding")):
			f.hasTE = true
			f.chunked = bytes.EqualFold(bytes.TrimSpace(value), []byte("chunked"))
		}
	case inChunkSize:
		size, _, _ := bytes.Cut(line, []byte(";"))
		n, err := strconv.ParseInt(string(bytes.TrimSpace(size)), 16, 64)
		switch {
		case err != nil || n < 0:
			f.lost = true
		case n == 0:
			f.state = inTrailer
		default:
			f.state, f.remaining = inChunkData, n
		}
	case inChunkCRLF:
		f.state = inChunkSize
	case inTrailer:
		if len(line) == 0 {
			f.endMessage()
		}
	}
}

func (f *framer) endHead(flag func(index int)) {
	if f.hasLength && f.hasTE {
		flag(f.index)
	}
	switch {
	case f.hasTE && !f.http10 && f.chunked:
		f.state = inChunkSize
	case f.hasTE && !f.http10:
		f.lost = true // Go answers 501 and closes
	case f.length > 0:
		f.state, f.remaining = inBody, f.length
	default:
		f.endMessage()
	}
}

func (f *framer) endMessage() {
	f.state, f.head, f.started, f.http10 = inHead, 0, false, false
	f.hasLength, f.hasTE, f.chunked, f.length = false, false, false, 0
	f.index++
}
