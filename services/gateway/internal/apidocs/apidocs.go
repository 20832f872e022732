// Package apidocs serves the OpenAPI document the gateway answers to: as
// YAML (the source), as JSON (converted once at boot, key order kept), and
// as a readable HTML reference rendered on the server from the same
// document, so /docs needs no script or asset from anywhere.
package apidocs

import (
	"bytes"
	_ "embed"
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"

	"go.yaml.in/yaml/v3"
)

// Source is the OpenAPI document.
//
//go:embed openapi.yaml
var Source []byte

// Docs holds the document in every form the gateway serves.
type Docs struct {
	yaml, json, html []byte
}

// New parses the document and renders its JSON and HTML forms.
func New() (*Docs, error) {
	var root yaml.Node
	if err := yaml.Unmarshal(Source, &root); err != nil {
		return nil, fmt.Errorf("apidocs: %w", err)
	}
	var buf bytes.Buffer
	if err := writeJSON(&buf, &root); err != nil {
		return nil, fmt.Errorf("apidocs: %w", err)
	}
	page, err := render(buf.Bytes())
	if err != nil {
		return nil, fmt.Errorf("apidocs: %w", err)
	}
	return &Docs{yaml: Source, json: buf.Bytes(), html: page}, nil
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

// writeJSON converts a YAML node to JSON, keeping mapping order (a reader of
// openapi.json sees the document in the order it was written) and resolving
// anchors.
func writeJSON(buf *bytes.Buffer, n *yaml.Node) error {
	switch n.Kind {
	case yaml.DocumentNode:
		return writeJSON(buf, n.Content[0])
	case yaml.AliasNode:
		return writeJSON(buf, n.Alias)
	case yaml.MappingNode:
		buf.WriteByte('{')
		for i := 0; i < len(n.Content); i += 2 {
			if i > 0 {
				buf.WriteByte(',')
			}
			k, _ := json.Marshal(n.Content[i].Value)
			buf.Write(k)
			buf.WriteByte(':')
			if err := writeJSON(buf, n.Content[i+1]); err != nil {
				return err
			}
		}
		buf.WriteByte('}')
	case yaml.SequenceNode:
		buf.WriteByte('[')
		for i, c := range n.Content {
			if i > 0 {
				buf.WriteByte(',')
			}
			if err := writeJSON(buf, c); err != nil {
				return err
			}
		}
		buf.WriteByte(']')
	case yaml.ScalarNode:
		var v any
		if err := n.Decode(&v); err != nil {
			return err
		}
		b, err := json.Marshal(v)
		if err != nil {
			return fmt.Errorf("line %d: %w", n.Line, err)
		}
		buf.Write(b)
	default:
		return fmt.Errorf("line %d: unexpected YAML node", n.Line)
	}
	return nil
}
