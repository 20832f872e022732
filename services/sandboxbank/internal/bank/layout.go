package bank

import (
	"html/template"
	"net/http"
)

// layout is every hosted page's frame: plain HTML, no script, usable with a
// keyboard and a screen reader, with the sandbox's note first and the same
// page for a link that cannot be used. A page defines title (unless the
// link is unusable), brand, style (its own rules), note and content.
var layout = template.Must(template.New("page").Parse(`<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>{{if .Problem}}Link not usable{{else}}{{template "title" .}}{{end}} — {{template "brand"}}</title>
<style>
body{font:16px/1.5 system-ui,sans-serif;color:#1d2330;max-width:36rem;margin:3rem auto;padding:0 1rem}
.sandbox{background:#fff4ce;border:1px solid #e0c36c;padding:.5rem .75rem;border-radius:6px;font-size:14px}
.actions{display:flex;gap:1rem;margin-top:1.5rem}
button{font:inherit;padding:.6rem 1.4rem;border-radius:6px;border:2px solid #1d2330;background:#fff;cursor:pointer}
button.primary{background:#1f6feb;border-color:#1f6feb;color:#fff}
button:focus-visible,input:focus-visible{outline:3px solid #f59e0b;outline-offset:2px}
{{template "style"}}
</style>
</head>
<body>
<main>
<p class="sandbox" role="note">{{template "note"}}</p>
{{if .Problem}}
<h1>This link can't be used</h1>
<p>{{.Problem}}</p>
{{else}}{{template "content" .}}{{end}}
</main>
</body>
</html>
`))

// hostedPage is a page in layout's frame, its blocks defined by blocks.
func hostedPage(blocks string) *template.Template {
	return template.Must(template.Must(layout.Clone()).Parse(blocks))
}

// writeHTML answers a hosted page: not cached, never framed, no script, no
// referrer. No form-action: browsers apply it to the redirect after the
// submit too, and that goes to the partner's gateway, whose address varies.
func writeHTML(w http.ResponseWriter, status int, t *template.Template, data any) {
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	w.Header().Set("Content-Security-Policy", "default-src 'none'; style-src 'unsafe-inline'; frame-ancestors 'none'")
	w.Header().Set("X-Frame-Options", "DENY")
	w.Header().Set("Referrer-Policy", "no-referrer")
	w.WriteHeader(status)
	_ = t.Execute(w, data)
}
