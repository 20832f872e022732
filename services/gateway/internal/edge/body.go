package edge

import (
	"bytes"
	"errors"
	"io"
	"net"
	"net/http"
	"os"
	"sync"

	"github.com/partnerpay/api/pkg/envelope"
	"github.com/partnerpay/api/pkg/jsonbody"
)

// A POST body is read whole (at most 1 MiB, within the server's read
// timeout) before it is forwarded: a client that sends it too slowly gets
// 408 in the envelope instead of holding the upstream, the upstream gets
// it in one write with a Content-Length, and a retry after a refused
// connection can send it again. The gateway reads it; it never parses it.

var errSlowBody = envelope.New(envelope.CodeRequestTimeout, "The request body did not arrive in time; send it again.")

var bodyPool = sync.Pool{New: func() any { return new(bytes.Buffer) }}

// readBody replaces r's body with a copy in memory (Content-Length set,
// GetBody for retries), or returns the refusal. A body with a
// Content-Length (at most jsonbody.MaxBytes: admit checked) is read
// straight into a slice of its size; a chunked one through a pooled
// buffer, then copied. The copy is the body's own slice, never a pooled
// buffer: the transport may still read it after the handler has returned.
func readBody(r *http.Request) *envelope.Error {
	data, err := readAll(r)
	var ne net.Error
	switch {
	case err != nil && (errors.Is(err, os.ErrDeadlineExceeded) || errors.As(err, &ne) && ne.Timeout()):
		return errSlowBody
	case err != nil:
		return envelope.InvalidRequest("Request body could not be read.")
	case len(data) > jsonbody.MaxBytes:
		return envelope.TooLarge()
	}
	r.Body = memBody(data)
	r.GetBody = func() (io.ReadCloser, error) { return memBody(data), nil }
	r.ContentLength = int64(len(data))
	r.TransferEncoding = nil
	r.Header.Del("Transfer-Encoding")
	return nil
}

// readAll reads r's body: one byte more than jsonbody.MaxBytes at most.
// net/http's body ends at its Content-Length, so a slice of that size
// takes all of it.
func readAll(r *http.Request) ([]byte, error) {
	if n := r.ContentLength; n >= 0 && n <= jsonbody.MaxBytes {
		data := make([]byte, n)
		_, err := io.ReadFull(r.Body, data)
		return data, err
	}
	buf := bodyPool.Get().(*bytes.Buffer)
	defer func() {
		if buf.Cap() <= 64<<10 { // keep small buffers; let a rare 1 MiB one go
			buf.Reset()
			bodyPool.Put(buf)
		}
	}()
	_, err := buf.ReadFrom(io.LimitReader(r.Body, jsonbody.MaxBytes+1))
	return bytes.Clone(buf.Bytes()), err
}

// memBody is a request body read into memory, as a type net/http knows to
// be in memory (io.NopCloser of a *bytes.Reader): the transport then
// writes the request's header and body in one write, where for any other
// body it flushes the header first (Issue 22088), a second write per
// request to the service.
func memBody(data []byte) io.ReadCloser { return io.NopCloser(bytes.NewReader(data)) }
