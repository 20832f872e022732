// Package render makes the served forms of the OpenAPI document: JSON from
// the YAML source, and the HTML reference page from the JSON. It runs at
// build time (make generate), never in the gateway: html/template's
// reflection would keep every method of every type in the gateway's binary
// (the Redis client's hundreds of commands among them), 12 MB more
// executable and more of it resident.
package render

import (
	"bytes"
	"encoding/json"
	"fmt"
	"html/template"
	"regexp"
	"sort"
	"strings"

	"go.yaml.in/yaml/v3"
)

// JSON converts the YAML document to JSON, keeping its key order.
func JSON(source []byte) ([]byte, error) {
	var root yaml.Node
	if err := yaml.Unmarshal(source, &root); err != nil {
		return nil, err
	}
	var buf bytes.Buffer
	if err := writeJSON(&buf, &root); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// Page renders the reference page from the JSON form.
func Page(jsonDoc []byte) ([]byte, error) { return render(jsonDoc) }

// The subset of OpenAPI the reference page shows. Paths are read in order
// from the JSON form, which keeps the YAML's order.
type document struct {
	Info struct {
		Title       string `json:"title"`
		Version     string `json:"version"`
		Summary     string `json:"summary"`
		Description string `json:"description"`
	} `json:"info"`
	Servers []struct {
		URL string `json:"url"`
	} `json:"servers"`
	Tags []struct {
		Name        string `json:"name"`
		Description string `json:"description"`
	} `json:"tags"`
	Components struct {
		Schemas    map[string]*schema   `json:"schemas"`
		Responses  map[string]*response `json:"responses"`
		Parameters map[string]*param    `json:"parameters"`
	} `json:"components"`
}

type operation struct {
	Tags        []string             `json:"tags"`
	OperationID string               `json:"operationId"`
	Summary     string               `json:"summary"`
	Description string               `json:"description"`
	Security    *[]any               `json:"security"`
	Parameters  []*param             `json:"parameters"`
	RequestBody *body                `json:"requestBody"`
	Responses   map[string]*response `json:"responses"`
}

type param struct {
	Ref         string `json:"$ref"`
	Name        string `json:"name"`
	In          string `json:"in"`
	Description string `json:"description"`
}

// pageParam is a parameter as the page shows it.
type pageParam struct {
	Name        string
	Description template.HTML
}

type body struct {
	Content map[string]media `json:"content"`
}

type media struct {
	Schema   *schema                    `json:"schema"`
	Example  json.RawMessage            `json:"example"`
	Examples map[string]json.RawMessage `json:"examples"`
}

type response struct {
	Ref         string           `json:"$ref"`
	Description string           `json:"description"`
	Content     map[string]media `json:"content"`
}

type schema struct {
	Ref         string             `json:"$ref"`
	Type        any                `json:"type"`
	Description string             `json:"description"`
	Required    []string           `json:"required"`
	Properties  map[string]*schema `json:"properties"`
	Items       *schema            `json:"items"`
	Enum        []any              `json:"enum"`
	Pattern     string             `json:"pattern"`
	Const       any                `json:"const"`
}

// Page model.
type page struct {
	Title, Version, Summary string
	Description             template.HTML
	Groups                  []group
}

type group struct {
	Tag         string
	Description template.HTML
	Ops         []op
}

type op struct {
	ID, Method, Path, Summary string
	Description               template.HTML
	Public                    bool
	Params                    []pageParam
	Fields                    []field
	RequestExample            string
	Curl                      string
	Responses                 []resp
}

type field struct {
	Name, Type  string
	Description template.HTML
	Required    bool
}

type resp struct {
	Status      string
	Description template.HTML
	Examples    []string
}

func render(jsonDoc []byte) ([]byte, error) {
	var doc document
	if err := json.Unmarshal(jsonDoc, &doc); err != nil {
		return nil, err
	}
	ops, err := orderedOperations(jsonDoc)
	if err != nil {
		return nil, err
	}
	p := page{Title: doc.Info.Title, Version: doc.Info.Version, Summary: doc.Info.Summary, Description: prose(doc.Info.Description)}
	server := "http://127.0.0.1:8080"
	if len(doc.Servers) > 0 {
		server = doc.Servers[0].URL
	}
	for _, t := range doc.Tags {
		g := group{Tag: t.Name, Description: inline(t.Description)}
		for _, o := range ops {
			if len(o.op.Tags) == 0 || o.op.Tags[0] != t.Name {
				continue
			}
			g.Ops = append(g.Ops, doc.pageOp(server, o.method, o.path, o.op))
		}
		p.Groups = append(p.Groups, g)
	}
	var buf bytes.Buffer
	if err := pageTemplate.Execute(&buf, p); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

type pathOp struct {
	method, path string
	op           *operation
}

// orderedOperations walks "paths" in document order.
func orderedOperations(jsonDoc []byte) ([]pathOp, error) {
	var top map[string]json.RawMessage
	if err := json.Unmarshal(jsonDoc, &top); err != nil {
		return nil, err
	}
	var out []pathOp
	paths, err := orderedKeys(top["paths"])
	if err != nil {
		return nil, err
	}
	for _, pk := range paths {
		methods, err := orderedKeys(pk.value)
		if err != nil {
			return nil, err
		}
		for _, mk := range methods {
			var o operation
			if err := json.Unmarshal(mk.value, &o); err != nil {
				return nil, err
			}
			out = append(out, pathOp{method: strings.ToUpper(mk.key), path: pk.key, op: &o})
		}
	}
	return out, nil
}

type kv struct {
	key   string
	value json.RawMessage
}

func orderedKeys(obj json.RawMessage) ([]kv, error) {
	dec := json.NewDecoder(bytes.NewReader(obj))
	if _, err := dec.Token(); err != nil {
		return nil, err
	}
	var out []kv
	for dec.More() {
		t, err := dec.Token()
		if err != nil {
			return nil, err
		}
		var v json.RawMessage
		if err := dec.Decode(&v); err != nil {
			return nil, err
		}
		out = append(out, kv{key: t.(string), value: v})
	}
	return out, nil
}

func (d *document) pageOp(server, method, path string, o *operation) op {
	out := op{ID: o.OperationID, Method: method, Path: path, Summary: o.Summary,
		Description: prose(o.Description), Public: o.Security != nil && len(*o.Security) == 0}
	for _, p := range o.Parameters {
		if p.Ref != "" {
			p = d.Components.Parameters[strings.TrimPrefix(p.Ref, "#/components/parameters/")]
		}
		if p != nil {
			out.Params = append(out.Params, pageParam{Name: p.Name, Description: inline(p.Description)})
		}
	}
	if o.RequestBody != nil {
		if m, ok := o.RequestBody.Content["application/json"]; ok {
			s := d.resolve(m.Schema)
			for _, name := range sortedKeys(s.Properties) {
				f := d.resolve(s.Properties[name])
				out.Fields = append(out.Fields, field{Name: name, Type: typeName(f, s.Properties[name]),
					Description: inline(f.Description), Required: contains(s.Required, name)})
			}
			out.RequestExample = pretty(m.Example)
		}
	}
	out.Curl = curl(server, method, path, o, out.Params, compact(o.RequestBody))
	statuses := make([]string, 0, len(o.Responses))
	for st := range o.Responses {
		statuses = append(statuses, st)
	}
	sort.Strings(statuses)
	for _, st := range statuses {
		r := o.Responses[st]
		if r.Ref != "" {
			r = d.Components.Responses[strings.TrimPrefix(r.Ref, "#/components/responses/")]
		}
		rr := resp{Status: st, Description: inline(r.Description)}
		for _, m := range r.Content {
			if len(m.Example) > 0 {
				rr.Examples = append(rr.Examples, pretty(m.Example))
			}
			for _, name := range sortedKeys(m.Examples) {
				var ex struct {
					Value json.RawMessage `json:"value"`
				}
				_ = json.Unmarshal(m.Examples[name], &ex)
				rr.Examples = append(rr.Examples, pretty(ex.Value))
			}
		}
		out.Responses = append(out.Responses, rr)
	}
	return out
}

func (d *document) resolve(s *schema) *schema {
	for s != nil && s.Ref != "" {
		s = d.Components.Schemas[strings.TrimPrefix(s.Ref, "#/components/schemas/")]
	}
	if s == nil {
		return &schema{}
	}
	return s
}

func typeName(s, orig *schema) string {
	name := ""
	if orig != nil && orig.Ref != "" {
		name = strings.TrimPrefix(orig.Ref, "#/components/schemas/")
	}
	t, _ := s.Type.(string)
	if t == "" {
		t = "object"
	}
	if name != "" {
		return name + " (" + t + ")"
	}
	return t
}

func pretty(raw json.RawMessage) string {
	if len(raw) == 0 {
		return ""
	}
	var buf bytes.Buffer
	if err := json.Indent(&buf, raw, "", "  "); err != nil {
		return string(raw)
	}
	return buf.String()
}

// compact is the request example of a body on one line, or "".
func compact(b *body) string {
	if b == nil {
		return ""
	}
	m, ok := b.Content["application/json"]
	if !ok || len(m.Example) == 0 {
		return ""
	}
	var buf bytes.Buffer
	if err := json.Compact(&buf, m.Example); err != nil {
		return ""
	}
	return buf.String()
}

// curl is a command that calls the operation on the local sandbox: the key
// from $PARTNER_API_KEY unless the route needs none, the body example.
func curl(server, method, path string, o *operation, params []pageParam, example string) string {
	var b strings.Builder
	b.WriteString("curl -sS")
	if method != "GET" {
		b.WriteString(" -X " + method)
	}
	b.WriteString(" " + server + path)
	if o.Security == nil || len(*o.Security) != 0 {
		b.WriteString(" \\\n  -H \"Authorization: Bearer $PARTNER_API_KEY\"")
	}
	for _, p := range params {
		if p.Name == "Idempotency-Key" {
			b.WriteString(" \\\n  -H \"Idempotency-Key: $(uuidgen)\"")
		}
	}
	if example != "" {
		b.WriteString(" \\\n  -H 'Content-Type: application/json' \\\n  -d '" + strings.ReplaceAll(example, "'", `'\''`) + "'")
	}
	return b.String()
}

var codeSpan = regexp.MustCompile("`([^`]+)`")
var bold = regexp.MustCompile(`\*\*([^*]+)\*\*`)

// prose renders the little Markdown the document uses: paragraphs, `code`
// and **bold**.
func prose(s string) template.HTML {
	var out strings.Builder
	for _, para := range strings.Split(strings.TrimSpace(s), "\n\n") {
		if para == "" {
			continue
		}
		out.WriteString("<p>" + string(inline(para)) + "</p>\n")
	}
	return template.HTML(out.String())
}

// inline renders `code` and **bold** in a line of text, escaped.
func inline(s string) template.HTML {
	h := template.HTMLEscapeString(strings.ReplaceAll(strings.TrimSpace(s), "\n", " "))
	h = codeSpan.ReplaceAllString(h, "<code>$1</code>")
	h = bold.ReplaceAllString(h, "<strong>$1</strong>")
	return template.HTML(h)
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

func contains(xs []string, x string) bool {
	for _, y := range xs {
		if y == x {
			return true
		}
	}
	return false
}

var pageTemplate = template.Must(template.New("docs").Parse(`<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>{{.Title}} {{.Version}} — reference</title>
<style>
body{margin:0;font:15px/1.5 system-ui,-apple-system,"Segoe UI",sans-serif;color:#1d2330;background:#fff}
nav{position:fixed;top:0;bottom:0;left:0;width:270px;overflow:auto;background:#f5f6f8;border-right:1px solid #dde1e6;padding:16px}
nav h2{font-size:12px;text-transform:uppercase;letter-spacing:.06em;color:#5a6270;margin:18px 0 6px}
nav a{display:block;color:#1d2330;text-decoration:none;padding:2px 0;font-size:14px}
nav a:hover,nav a:focus{text-decoration:underline}
main{margin-left:302px;padding:24px 40px;max-width:980px;box-sizing:border-box}
h1{margin-top:0}
section.op{border-top:1px solid #dde1e6;padding:18px 0}
.method{display:inline-block;min-width:52px;text-align:center;font:700 12px/1.9 ui-monospace,monospace;border-radius:4px;color:#fff;background:#3b6fd1;margin-right:8px}
.method.POST{background:#1f8a4c}
.path{font:600 15px ui-monospace,monospace}
.badge{font-size:12px;color:#5a6270;margin-left:8px}
code,pre{font-family:ui-monospace,SFMono-Regular,Menlo,monospace;font-size:13px}
code{background:#f0f2f5;padding:1px 4px;border-radius:3px}
pre{background:#0f1720;color:#e6edf3;padding:12px;border-radius:6px;overflow:auto;white-space:pre-wrap;overflow-wrap:anywhere}
table{border-collapse:collapse;width:100%;margin:8px 0}
th,td{text-align:left;border-bottom:1px solid #eceff2;padding:6px 8px;vertical-align:top;font-size:14px}
th{font-size:12px;text-transform:uppercase;color:#5a6270}
.status{font:700 13px ui-monospace,monospace}
.req{color:#b3261e;font-size:12px}
.empty{color:#5a6270;font-style:italic}
@media (max-width:800px){nav{position:static;width:auto}main{margin-left:0;padding:16px}}
</style>
</head>
<body>
<nav aria-label="Operations">
<strong>{{.Title}}</strong> <span class="badge">v{{.Version}}</span>
{{range .Groups}}<h2>{{.Tag}}</h2>{{range .Ops}}<a href="#{{.ID}}">{{.Summary}}</a>{{else}}<a href="#tag-{{.Tag}}">Not offered yet</a>{{end}}{{end}}
<h2>Document</h2><a href="/openapi.yaml">openapi.yaml</a><a href="/openapi.json">openapi.json</a>
</nav>
<main>
<h1>{{.Title}} <span class="badge">v{{.Version}}</span></h1>
<p><strong>{{.Summary}}</strong></p>
{{.Description}}
{{range .Groups}}
<h2 id="tag-{{.Tag}}">{{.Tag}}</h2>
<p>{{.Description}}</p>
{{if not .Ops}}<p class="empty">Not offered yet: this version has no operations here.</p>{{end}}
{{range .Ops}}
<section class="op" id="{{.ID}}" aria-labelledby="{{.ID}}-title">
<h3 id="{{.ID}}-title"><span class="method {{.Method}}">{{.Method}}</span> <span class="path">{{.Path}}</span>
<span class="badge">{{.ID}}{{if .Public}} · no key{{end}}</span></h3>
<p><strong>{{.Summary}}</strong></p>
{{.Description}}
{{if .Params}}<h4>Headers</h4><table><tr><th>Name</th><th>Description</th></tr>
{{range .Params}}<tr><td><code>{{.Name}}</code></td><td>{{.Description}}</td></tr>{{end}}</table>{{end}}
{{if .Fields}}<h4>Request body</h4><table><tr><th>Field</th><th>Type</th><th>Description</th></tr>
{{range .Fields}}<tr><td><code>{{.Name}}</code>{{if .Required}} <span class="req">required</span>{{end}}</td><td>{{.Type}}</td><td>{{.Description}}</td></tr>{{end}}</table>{{end}}
{{if .RequestExample}}<pre>{{.RequestExample}}</pre>{{end}}
<h4>Try it</h4>
<pre class="curl">{{.Curl}}</pre>
<h4>Responses</h4>
<table><tr><th>Status</th><th>Meaning</th></tr>
{{range .Responses}}<tr><td class="status">{{.Status}}</td><td>{{.Description}}{{range .Examples}}<pre>{{.}}</pre>{{end}}</td></tr>{{end}}
</table>
</section>
{{end}}{{end}}
</main>
</body>
</html>
`))

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
