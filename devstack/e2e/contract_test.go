package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/getkin/kin-openapi/openapi3filter"
	"github.com/getkin/kin-openapi/routers"
	"github.com/getkin/kin-openapi/routers/legacy"
	"github.com/santhosh-tekuri/jsonschema/v6"
)

// The OpenAPI document is the contract: every request these tests send and
// every answer they get is checked against it, so an undocumented field,
// status, header or code fails the build.
var contract struct {
	once   sync.Once
	router routers.Router
	err    error
}

func loadContract() (routers.Router, error) {
	contract.once.Do(func() {
		path := filepath.Join("..", "..", "services", "gateway", "internal", "apidocs", "openapi.yaml")
		src, err := os.ReadFile(path)
		if err != nil {
			contract.err = err
			return
		}
		doc, err := openapi3.NewLoader().LoadFromData(src)
		if err != nil {
			contract.err = err
			return
		}
		if err := doc.Validate(context.Background()); err != nil {
			contract.err = err
			return
		}
		doc.Servers = nil // the stack runs on a free port, not the documented one
		contract.router, contract.err = legacy.NewRouter(doc)
	})
	return contract.router, contract.err
}

// checkContract returns what is wrong with one exchange, or nil.
func checkContract(req *http.Request, reqBody []byte, resp *http.Response, respBody []byte) error {
	router, err := loadContract()
	if err != nil {
		return fmt.Errorf("load the OpenAPI document: %w", err)
	}
	ctx := context.Background()
	route, params, err := router.FindRoute(req)
	if err != nil {
		// Not an endpoint: the answer must be the documented 404.
		if resp.StatusCode != http.StatusNotFound {
			return fmt.Errorf("%s %s is not in the document, yet answered %d", req.Method, req.URL.Path, resp.StatusCode)
		}
		if !json.Valid(respBody) {
			return errors.New("404 body is not JSON")
		}
		return schemas.check("#/components/schemas/Error404", respBody)
	}

	req.Body = io.NopCloser(bytes.NewReader(reqBody))
	in := &openapi3filter.RequestValidationInput{
		Request: req, PathParams: params, Route: route,
		Options: &openapi3filter.Options{AuthenticationFunc: openapi3filter.NoopAuthenticationFunc, ExcludeRequestBody: true},
	}
	reqErr := openapi3filter.ValidateRequest(ctx, in)
	if reqErr == nil {
		reqErr = checkRequestBody(route, req, reqBody)
	}
	if reqErr != nil && resp.StatusCode < 300 {
		return fmt.Errorf("the document refuses this request, yet it got %d: %v", resp.StatusCode, reqErr)
	}

	if err := checkResponse(route, resp, respBody); err != nil {
		return fmt.Errorf("answer %d breaks the document: %v", resp.StatusCode, err)
	}
	return nil
}

// An answer's status, headers and body, and a request's body, are checked
// against the document here (JSON Schema 2020-12, as OpenAPI 3.1 says),
// each schema compiled once; kin-openapi finds the route and checks the
// request's parameters. kin-openapi compiles a 3.1 schema again for every
// value it checks: 17 ms of the test binary's CPU per exchange under
// -race, five times the exchange itself, which made the contract the
// dearest part of most end-to-end tests. What is checked is what
// kin-openapi's ValidateRequestBody and ValidateResponse check, and the
// formats are asserted as it asserts them (its validators for the formats
// it knows; any other is not).
var schemas = &compiledSchemas{compiled: map[string]*jsonschema.Schema{}}

// compiledSchemas are the document's schemas, each compiled on first use.
type compiledSchemas struct {
	mu       sync.Mutex
	compiler *jsonschema.Compiler
	err      error
	compiled map[string]*jsonschema.Schema // by location in the document
}

// docURL names the document in the compiler: a location is docURL and a
// JSON pointer fragment.
const docURL = "openapi.json"

// schema is the compiled schema at fragment (a JSON pointer into the
// document, "#/components/schemas/Payout").
func (c *compiledSchemas) schema(fragment string) (*jsonschema.Schema, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.compiler == nil && c.err == nil {
		c.compiler, c.err = newSchemaCompiler()
	}
	if c.err != nil {
		return nil, c.err
	}
	if s, ok := c.compiled[fragment]; ok {
		return s, nil
	}
	s, err := c.compiler.Compile(docURL + fragment)
	if err != nil {
		return nil, fmt.Errorf("compile %s: %w", fragment, err)
	}
	c.compiled[fragment] = s
	return s, nil
}

// check returns what is wrong with body, JSON, against the schema at
// fragment, or nil.
func (c *compiledSchemas) check(fragment string, body []byte) error {
	s, err := c.schema(fragment)
	if err != nil {
		return err
	}
	v, err := jsonschema.UnmarshalJSON(bytes.NewReader(body))
	if err != nil {
		return fmt.Errorf("the body is not JSON: %w", err)
	}
	return s.Validate(v)
}

// newSchemaCompiler loads the document partners download (openapi.json, made
// from openapi.yaml by make generate) into a compiler.
func newSchemaCompiler() (*jsonschema.Compiler, error) {
	f, err := os.Open(filepath.Join("..", "..", "services", "gateway", "internal", "apidocs", "openapi.json"))
	if err != nil {
		return nil, err
	}
	defer f.Close()
	doc, err := jsonschema.UnmarshalJSON(f)
	if err != nil {
		return nil, err
	}
	c := jsonschema.NewCompiler()
	c.DefaultDraft(jsonschema.Draft2020)
	formats := map[string]bool{}
	collectFormats(doc, formats)
	for name := range formats {
		c.RegisterFormat(&jsonschema.Format{Name: name, Validate: kinFormat(name)})
	}
	c.AssertFormat()
	if err := c.AddResource(docURL, doc); err != nil {
		return nil, err
	}
	return c, nil
}

// collectFormats adds every "format" named under node to formats.
func collectFormats(node any, formats map[string]bool) {
	switch node := node.(type) {
	case map[string]any:
		if f, ok := node["format"].(string); ok {
			formats[f] = true
		}
		for _, v := range node {
			collectFormats(v, formats)
		}
	case []any:
		for _, v := range node {
			collectFormats(v, formats)
		}
	}
}

// kinFormat checks a value of format name as kin-openapi does: with its
// validator of the format, if it has one.
func kinFormat(name string) func(any) error {
	return func(v any) error {
		switch v := v.(type) {
		case string:
			if f, ok := openapi3.SchemaStringFormats[name]; ok {
				return f.Validate(v)
			}
		case json.Number:
			n, err := v.Float64()
			if err != nil {
				return nil
			}
			if n == math.Trunc(n) && !math.IsInf(n, 0) {
				if f, ok := openapi3.SchemaIntegerFormats[name]; ok {
					return f.Validate(int64(n))
				}
			}
			if f, ok := openapi3.SchemaNumberFormats[name]; ok {
				return f.Validate(n)
			}
		}
		return nil
	}
}

// checkBody checks body, sent as ct, against content, the media types of
// the request body or response object at base in the document: ct must be
// one of them, and a JSON body must match its schema (other bodies, YAML
// and HTML documents, are not read). No content described: nothing to
// check.
func checkBody(base string, content openapi3.Content, ct string, body []byte) error {
	if len(content) == 0 {
		return nil
	}
	mt := content.Get(ct)
	if mt == nil {
		return fmt.Errorf("Content-Type %q is not one the document describes here", ct)
	}
	if mt.Schema == nil || !strings.HasPrefix(ct, "application/json") {
		return nil
	}
	loc := mt.Schema.Ref
	for key, v := range content {
		if loc == "" && v == mt {
			loc = base + "/content/" + pointerToken(key) + "/schema"
		}
	}
	if loc == "" {
		return fmt.Errorf("the media type of %q is not in the document", ct)
	}
	return schemas.check(loc, body)
}

// operationLocation is the JSON pointer of route's operation.
func operationLocation(route *routers.Route) string {
	return "#/paths/" + pointerToken(route.Path) + "/" + strings.ToLower(route.Method)
}

// pointerToken escapes s as one JSON pointer token (RFC 6901).
func pointerToken(s string) string {
	return strings.ReplaceAll(strings.ReplaceAll(s, "~", "~0"), "/", "~1")
}

// checkRequestBody checks a request's body as kin-openapi's
// ValidateRequestBody does: a required body must be there, and a JSON one
// must match its schema.
func checkRequestBody(route *routers.Route, req *http.Request, body []byte) error {
	rb := route.Operation.RequestBody
	if rb == nil || rb.Value == nil {
		return nil
	}
	if len(body) == 0 {
		if rb.Value.Required {
			return errors.New("request body: a value is required but missing")
		}
		return nil
	}
	base := operationLocation(route) + "/requestBody"
	if rb.Ref != "" {
		base = rb.Ref
	}
	if err := checkBody(base, rb.Value.Content, req.Header.Get("Content-Type"), body); err != nil {
		return fmt.Errorf("request body: %w", err)
	}
	return nil
}

// checkResponse checks an answer as kin-openapi's ValidateResponse does,
// every status checked: the status is documented for the route, each
// documented header is there if required and matches its schema, and a
// JSON body matches the schema of its Content-Type (YAML and HTML
// documents are not read).
func checkResponse(route *routers.Route, resp *http.Response, body []byte) error {
	if route.Method == http.MethodHead {
		return nil
	}
	switch resp.StatusCode {
	case http.StatusNotModified, http.StatusPermanentRedirect, http.StatusTemporaryRedirect, http.StatusMovedPermanently:
		return nil // kin-openapi does not check these
	}
	responses := route.Operation.Responses
	if responses.Len() == 0 {
		return nil
	}
	ref := responses.Status(resp.StatusCode)
	if ref == nil {
		ref = responses.Default()
	}
	if ref == nil {
		return errors.New("status is not supported")
	}
	if ref.Value == nil {
		return errors.New("response has not been resolved")
	}
	base := ref.Ref
	if base == "" {
		for key, v := range responses.Map() {
			if v == ref {
				base = operationLocation(route) + "/responses/" + pointerToken(key)
			}
		}
	}
	names := make([]string, 0, len(ref.Value.Headers))
	for name := range ref.Value.Headers {
		if name != "Content-Type" {
			names = append(names, name)
		}
	}
	slices.Sort(names)
	for _, name := range names {
		if err := checkHeader(base, name, ref.Value.Headers[name], resp.Header); err != nil {
			return err
		}
	}
	return checkBody(base, ref.Value.Content, resp.Header.Get("Content-Type"), body)
}

// checkHeader checks header name of an answer whose response object is at
// base: there if required, and its first value a string its schema
// allows (every header the document describes is a string; another kind
// fails here, to be taught to this check).
func checkHeader(base, name string, ref *openapi3.HeaderRef, h http.Header) error {
	if ref.Value == nil || ref.Value.Schema == nil || ref.Value.Schema.Value == nil {
		return fmt.Errorf("response header %q has no schema in the document", name)
	}
	values := h.Values(name)
	if len(values) == 0 {
		if ref.Value.Required {
			return fmt.Errorf("response header %q missing", name)
		}
		return nil
	}
	if t := ref.Value.Schema.Value.Type; t == nil || !t.Is(openapi3.TypeString) {
		return fmt.Errorf("response header %q: the contract check reads string headers only, not %v", name, t)
	}
	loc := ref.Value.Schema.Ref
	if loc == "" {
		hbase := ref.Ref
		if hbase == "" {
			hbase = base + "/headers/" + pointerToken(name)
		}
		loc = hbase + "/schema"
	}
	s, err := schemas.schema(loc)
	if err != nil {
		return err
	}
	if err := s.Validate(values[0]); err != nil {
		return fmt.Errorf("response header %q: %w", name, err)
	}
	return nil
}

// The contract check refuses what the document does not describe: each
// exchange below differs from a documented one (a 404 of the payout
// status) in one thing, and only the documented one passes. No stack: the
// exchanges are made here.
func TestTheContractCheckRefusesWhatTheDocumentDoesNot(t *testing.T) {
	t.Parallel()
	const notFound = `{"environment":"sandbox","error":{"code":"payout_not_found","message":"No payout with this payoutId exists for this key."}}`
	header := func(kv ...string) http.Header {
		h := http.Header{"Content-Type": {"application/json"}, "X-Request-Id": {"req-1"},
			"Ratelimit-Policy": {`"default";q=10;w=1`}, "Ratelimit": {`"default";r=9;t=1`}}
		for i := 0; i+1 < len(kv); i += 2 {
			if kv[i+1] == "" {
				h.Del(kv[i])
			} else {
				h.Set(kv[i], kv[i+1])
			}
		}
		return h
	}
	for _, tc := range []struct {
		name, path, reqBody string
		status              int
		header              http.Header
		body                string
		want                string // in the error; "" for none
	}{
		{"documented", "/v1/bank/payout/status", `{"payoutId":"bpo_1"}`, 404, header(), notFound, ""},
		{"a field the envelope lacks", "/v1/bank/payout/status", `{"payoutId":"bpo_1"}`, 404, header(),
			`{"environment":"sandbox","error":{"code":"payout_not_found","message":"No payout.","hint":"x"}}`, "hint"},
		{"a code of another status", "/v1/bank/payout/status", `{"payoutId":"bpo_1"}`, 404, header(),
			`{"environment":"sandbox","error":{"code":"invalid_request","message":"No payout."}}`, "code"},
		{"a RateLimit of another shape", "/v1/bank/payout/status", `{"payoutId":"bpo_1"}`, 404, header("Ratelimit", `"default";r=x;t=1`), notFound, `"RateLimit"`},
		{"no X-Request-Id", "/v1/bank/payout/status", `{"payoutId":"bpo_1"}`, 404, header("X-Request-Id", ""), notFound, `"X-Request-Id" missing`},
		{"an undocumented status", "/v1/bank/payout/status", `{"payoutId":"bpo_1"}`, 418, header(), notFound, "status is not supported"},
		{"an undocumented Content-Type", "/v1/bank/payout/status", `{"payoutId":"bpo_1"}`, 404, header("Content-Type", "text/plain"), notFound, `"text/plain"`},
		{"a refused request answered 200", "/v1/bank/payout/status", `{"payoutID":"bpo_1"}`, 200, header(), `{}`, "the document refuses this request"},
		{"not an endpoint, its 404 without environment", "/v1/nowhere", `{}`, 404, header(),
			`{"error":{"code":"not_found","message":"No such endpoint."}}`, "environment"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			req := httptest.NewRequest(http.MethodPost, "http://127.0.0.1"+tc.path, strings.NewReader(tc.reqBody))
			req.Header.Set("Content-Type", "application/json")
			req.Header.Set("Authorization", "Bearer x")
			resp := &http.Response{StatusCode: tc.status, Header: tc.header}
			err := checkContract(req, []byte(tc.reqBody), resp, []byte(tc.body))
			switch {
			case tc.want == "" && err != nil:
				t.Fatalf("refused: %v", err)
			case tc.want != "" && err == nil:
				t.Fatalf("passed; want an error naming %s", tc.want)
			case tc.want != "" && !strings.Contains(err.Error(), tc.want):
				t.Fatalf("error %q does not name %s", err, tc.want)
			}
		})
	}
}
