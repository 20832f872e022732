// Package apidocs serves the OpenAPI document the gateway answers to: as
// YAML (the source), as JSON (key order kept), and as a readable HTML
// reference, so /docs needs no script or asset from anywhere. The JSON and
// the page are made from the YAML by make generate (package render) and
// embedded; a test fails when they are not the source's.
package apidocs

import (
	_ "embed"
	"net/http"
	"strconv"
)

//go:generate go run ./gen

// Source is the OpenAPI document.
//
//go:embed openapi.yaml
var Source []byte

var (
	//go:embed openapi.json
	generatedJSON []byte
	//go:embed docs.html
	generatedPage []byte
)

// Docs holds the document in every form the gateway serves.
type Docs struct {
	yaml, json, html []byte
}

// New returns the document's forms.
func New() *Docs {
	return &Docs{yaml: Source, json: generatedJSON, html: generatedPage}
}

// JSON is the document as JSON.
func (d *Docs) JSON() []byte { return d.json }

// Routes are the patterns Handle serves.
var Routes = []string{"GET /openapi.yaml", "GET /openapi.json", "GET /docs"}

// Handle serves path if it is one of Routes, and reports whether it did.
func (d *Docs) Handle(w http.ResponseWriter, r *http.Request) bool {
	if r.Method != http.MethodGet {
		return false
	}
	var body []byte
	var ct string
	switch r.URL.Path {
	case "/openapi.yaml":
		body, ct = d.yaml, "application/yaml"
	case "/openapi.json":
		body, ct = d.json, "application/json"
	case "/docs":
		body, ct = d.html, "text/html; charset=utf-8"
		w.Header().Set("Content-Security-Policy", "default-src 'none'; style-src 'unsafe-inline'; img-src data:")
	default:
		return false
	}
	r.Pattern = "GET " + r.URL.Path
	w.Header().Set("Content-Type", ct)
	w.Header().Set("Content-Length", strconv.Itoa(len(body)))
	w.Header().Set("Cache-Control", "public, max-age=300")
	_, _ = w.Write(body)
	return true
}
