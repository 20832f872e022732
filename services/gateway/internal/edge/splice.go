package edge

import (
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"

	"github.com/partnerpay/api/pkg/environment"
	"github.com/partnerpay/api/pkg/jsonbody"
)

// errUpstreamAnswer marks an upstream answer the gateway will not pass on.
var errUpstreamAnswer = errors.New("upstream answer refused")

// splicer stamps "environment" as the first field of a service's JSON object
// by splicing bytes: the body streams through; it is never decoded.
type splicer struct {
	envField   string // `{"environment":"sandbox",` with the byte after the brace
	emptyField string // `{"environment":"sandbox"}` for an empty object
}

func newSplicer(env environment.Name) splicer {
	prefix := `{"environment":"` + string(env) + `"`
	return splicer{envField: prefix + `,"`, emptyField: prefix + `}`}
}

// checkEnvironment refuses an answer from another environment than the
// gateway's (a mis-wired deployment), and removes the service's stamp.
func checkEnvironment(resp *http.Response, env environment.Name) error {
	if got := resp.Header.Get(environment.Header); got != string(env) {
		return fmt.Errorf("%w: environment %q, gateway is %q", errUpstreamAnswer, got, env)
	}
	resp.Header.Del(environment.Header)
	return nil
}

// stamp checks that resp carries a JSON object, then rewrites its body to
// start with the environment field.
func (s splicer) stamp(resp *http.Response) error {
	if !jsonbody.IsJSON(resp.Header.Get("Content-Type")) {
		return fmt.Errorf("%w: Content-Type %q", errUpstreamAnswer, resp.Header.Get("Content-Type"))
	}
	body := &stampedBody{rest: resp.Body}
	if _, err := io.ReadFull(resp.Body, body.first[:]); err != nil {
		return fmt.Errorf("%w: body: %v", errUpstreamAnswer, err)
	}
	if body.first[0] != '{' {
		return fmt.Errorf("%w: body is not a JSON object", errUpstreamAnswer)
	}
	switch body.first[1] {
	case '"':
		body.head = s.envField
	case '}':
		body.head = s.emptyField
	default:
		return fmt.Errorf("%w: body is not compact JSON", errUpstreamAnswer)
	}
	resp.Body = body
	if resp.ContentLength >= 0 {
		resp.ContentLength += int64(len(body.head) - len(body.first))
		resp.Header.Set("Content-Length", strconv.FormatInt(resp.ContentLength, 10))
	}
	return nil
}

// stampedBody yields head, then the rest of the upstream body.
type stampedBody struct {
	first [2]byte
	head  string
	rest  io.ReadCloser
}

func (b *stampedBody) Read(p []byte) (int, error) {
	if len(b.head) > 0 {
		n := copy(p, b.head)
		b.head = b.head[n:]
		return n, nil
	}
	return b.rest.Read(p)
}

func (b *stampedBody) Close() error { return b.rest.Close() }
