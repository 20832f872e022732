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
// GetBody for retries), or returns the refusal. The copy is the body's own
// exact-size slice, never a pooled buffer: the transport may still read it
// after the handler has returned.
func readBody(r *http.Request) *envelope.Error {
	buf := bodyPool.Get().(*bytes.Buffer)
	defer func() {
		if buf.Cap() <= 64<<10 { // keep small buffers; let a rare 1 MiB one go
			buf.Reset()
			bodyPool.Put(buf)
		}
	}()
	_, err := buf.ReadFrom(io.LimitReader(r.Body, jsonbody.MaxBytes+1))
	var ne net.Error
	switch {
	case err != nil && (errors.Is(err, os.ErrDeadlineExceeded) || errors.As(err, &ne) && ne.Timeout()):
		return errSlowBody
	case err != nil:
		return envelope.InvalidRequest("Request body could not be read.")
	case buf.Len() > jsonbody.MaxBytes:
		return envelope.TooLarge()
	}
	data := bytes.Clone(buf.Bytes())
	r.Body = io.NopCloser(bytes.NewReader(data))
	r.GetBody = func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(data)), nil }
	r.ContentLength = int64(len(data))
	r.TransferEncoding = nil
	r.Header.Del("Transfer-Encoding")
	return nil
}
