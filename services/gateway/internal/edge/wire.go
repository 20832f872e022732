package edge

import (
	"bufio"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
)

// writeRequest writes req to w as HTTP/1.1, what req.Write would send, and
// closes its body. It skips what Request.Write spends on every call — a
// request line and a Host line through fmt, the header sorted, a transfer
// writer — for the request the relay makes: a Host, a known length, no
// trailers. Any other request is req.Write's.
//
// The rules it keeps: Go's User-Agent unless the header has one (an empty
// one sends none); Host, User-Agent, Content-Length, Transfer-Encoding and
// Trailer only as the request's fields say, never from the header map; a
// Content-Length for a body, and a zero one for a bodiless POST, PUT or
// PATCH; a CR or LF in a header value sent as a space, the value trimmed;
// a header whose name is not a token dropped; a control byte in the
// request URI refused; a body that is not its Content-Length refused, with
// nothing past that length written.
func writeRequest(w *bufio.Writer, req *http.Request) error {
	hasBody := req.Body != nil && req.Body != http.NoBody
	if req.ContentLength < 0 || hasBody && req.ContentLength == 0 || !hasBody && req.ContentLength != 0 ||
		len(req.TransferEncoding) > 0 || req.Trailer != nil || req.Close || !plainHost(req.Host) ||
		req.URL.Opaque != "" || req.Method == "" || req.Method == http.MethodConnect {
		return req.Write(w)
	}
	err := writeHead(w, req)
	if err == nil && hasBody {
		if mb, ok := req.Body.(*memBody); ok && int64(mb.Len()) == req.ContentLength {
			_, err = mb.WriteTo(w) // exactly Content-Length bytes: a body readBody made
		} else {
			err = writeBody(w, req.Body, req.ContentLength)
		}
	}
	if hasBody {
		if cerr := req.Body.Close(); err == nil {
			err = cerr
		}
	}
	return err
}

// writeBody writes body, which must be length bytes long. No more than
// length bytes go out: what followed would be read by the service as
// another request.
func writeBody(w *bufio.Writer, body io.Reader, length int64) error {
	n, err := io.CopyN(w, body, length)
	switch {
	case err == io.EOF:
		return fmt.Errorf("http: ContentLength=%d with Body length %d", length, n)
	case err == nil && bodyGoesOn(body):
		return fmt.Errorf("http: ContentLength=%d with a longer Body", length)
	}
	return err
}

// bodyGoesOn: body has a byte after what was read.
func bodyGoesOn(body io.Reader) bool {
	var b [1]byte
	n, _ := io.ReadFull(body, b[:])
	return n > 0
}

func writeHead(w *bufio.Writer, req *http.Request) error {
	uri := req.URL.RequestURI()
	for i := 0; i < len(uri); i++ {
		if uri[i] < ' ' || uri[i] == 0x7f {
			return fmt.Errorf("net/http: can't write control character in Request.URL")
		}
	}
	w.WriteString(req.Method)
	w.WriteByte(' ')
	w.WriteString(uri)
	w.WriteString(" HTTP/1.1\r\nHost: ")
	w.WriteString(req.Host)
	w.WriteString("\r\n")
	if ua, ok := req.Header["User-Agent"]; !ok {
		w.WriteString("User-Agent: Go-http-client/1.1\r\n")
	} else if len(ua) > 0 && ua[0] != "" {
		writeField(w, "User-Agent", ua[0])
	}
	if req.ContentLength > 0 || req.Method == http.MethodPost || req.Method == http.MethodPut || req.Method == http.MethodPatch {
		w.WriteString("Content-Length: ")
		w.Write(strconv.AppendInt(w.AvailableBuffer(), req.ContentLength, 10))
		w.WriteString("\r\n")
	}
	for name, values := range req.Header {
		switch name {
		case "Host", "User-Agent", "Content-Length", "Transfer-Encoding", "Trailer":
			continue
		}
		if !validFieldName(name) {
			continue // as net/http drops it
		}
		for _, v := range values {
			writeField(w, name, v)
		}
	}
	_, err := w.WriteString("\r\n")
	return err
}

// writeField writes one header line, its value as net/http sends it: CR
// and LF as spaces, trimmed.
func writeField(w *bufio.Writer, name, value string) {
	if strings.ContainsAny(value, "\r\n") {
		value = newlineToSpace.Replace(value)
	}
	value = strings.Trim(value, " \t\r\n")
	w.WriteString(name)
	w.WriteString(": ")
	w.WriteString(value)
	w.WriteString("\r\n")
}

// validFieldName: a non-empty token (RFC 9110 §5.1).
func validFieldName(name string) bool {
	if name == "" {
		return false
	}
	for i := 0; i < len(name); i++ {
		if c := name[i]; c >= 0x80 || !tokenByte[c] {
			return false
		}
	}
	return true
}

var tokenByte = func() (t [0x80]bool) {
	for c := range t {
		t[c] = 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || strings.IndexByte("!#$%&'*+-.^_`|~", byte(c)) >= 0
	}
	return t
}()

var newlineToSpace = strings.NewReplacer("\r", " ", "\n", " ")

// plainHost: a host[:port] with nothing a request line or header could
// be split on (a configured upstream's always is).
func plainHost(h string) bool {
	if h == "" {
		return false
	}
	for i := 0; i < len(h); i++ {
		c := h[i]
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || strings.IndexByte(".-:[]_", c) >= 0) {
			return false
		}
	}
	return true
}
