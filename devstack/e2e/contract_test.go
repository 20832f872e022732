package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/getkin/kin-openapi/openapi3filter"
	"github.com/getkin/kin-openapi/routers"
	"github.com/getkin/kin-openapi/routers/legacy"
)

// The OpenAPI document is the contract: every request these tests send and
// every answer they get is checked against it, so an undocumented field,
// status, header or code fails the build.
var contract struct {
	once   sync.Once
	doc    *openapi3.T
	router routers.Router
	err    error
}

func loadContract() (*openapi3.T, routers.Router, error) {
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
		contract.doc = doc
		contract.router, contract.err = legacy.NewRouter(doc)
	})
	return contract.doc, contract.router, contract.err
}

// checkContract returns what is wrong with one exchange, or nil.
func checkContract(req *http.Request, reqBody []byte, resp *http.Response, respBody []byte) error {
	doc, router, err := loadContract()
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
		var v any
		if err := json.Unmarshal(respBody, &v); err != nil {
			return fmt.Errorf("404 body is not JSON: %w", err)
		}
		return doc.Components.Schemas["Error404"].Value.VisitJSON(v, openapi3.EnableJSONSchema2020())
	}

	req.Body = io.NopCloser(bytes.NewReader(reqBody))
	in := &openapi3filter.RequestValidationInput{
		Request: req, PathParams: params, Route: route,
		Options: &openapi3filter.Options{AuthenticationFunc: openapi3filter.NoopAuthenticationFunc},
	}
	reqErr := openapi3filter.ValidateRequest(ctx, in)
	if reqErr != nil && resp.StatusCode < 300 {
		return fmt.Errorf("the document refuses this request, yet it got %d: %v", resp.StatusCode, reqErr)
	}

	opts := &openapi3filter.Options{IncludeResponseStatus: true}
	ct := resp.Header.Get("Content-Type")
	if !strings.HasPrefix(ct, "application/json") {
		opts.ExcludeResponseBody = true // YAML and HTML documents: status and headers only
	}
	out := &openapi3filter.ResponseValidationInput{
		RequestValidationInput: in,
		Status:                 resp.StatusCode,
		Header:                 resp.Header,
		Body:                   io.NopCloser(bytes.NewReader(respBody)),
		Options:                opts,
	}
	if err := openapi3filter.ValidateResponse(ctx, out); err != nil {
		var re *openapi3filter.ResponseError
		if errors.As(err, &re) && re.Err != nil {
			return fmt.Errorf("answer %d breaks the document: %s: %v", resp.StatusCode, re.Reason, re.Err)
		}
		return fmt.Errorf("answer %d breaks the document: %v", resp.StatusCode, err)
	}
	return nil
}
