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

type bufferedBody struct{ buf *bytes.Buffer }

func (b bufferedBody) release() {
	if b.buf.Cap() <= 64<<10 { // keep small buffers; let a rare 1 MiB one go
		b.buf.Reset()
		bodyPool.Put(b.buf)
	}
}

// readBody replaces r's body with a buffered copy (Content-Length set,
// GetBody for retries), or returns the refusal.
func readBody(r *http.Request) (bufferedBody, *envelope.Error) {
	buf := bodyPool.Get().(*bytes.Buffer)
	_, err := buf.ReadFrom(io.LimitReader(r.Body, jsonbody.MaxBytes+1))
	b := bufferedBody{buf: buf}
	var ne net.Error
	switch {
	case err != nil && (errors.Is(err, os.ErrDeadlineExceeded) || errors.As(err, &ne) && ne.Timeout()):
		b.release()
		return bufferedBody{}, errSlowBody
	case err != nil:
		b.release()
		return bufferedBody{}, envelope.InvalidRequest("Request body could not be read.")
	case buf.Len() > jsonbody.MaxBytes:
		b.release()
		return bufferedBody{}, envelope.TooLarge()
	}
	data := buf.Bytes()
	r.Body = io.NopCloser(bytes.NewReader(data))
	r.GetBody = func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(data)), nil }
	r.ContentLength = int64(len(data))
	r.TransferEncoding = nil
	r.Header.Del("Transfer-Encoding")
	return b, nil
}
