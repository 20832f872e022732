package edge

import "net/http"

// The spec: a key works equally from a server, a web page or a playground,
// and the calling origin is not checked. So every answer allows any origin
// and exposes the headers a page needs; a browser's preflight for a real
// endpoint is answered 204 without a key (browsers send none with it).

// CORS header values, shared by every answer (never modified).
var (
	corsAnyOrigin = []string{"*"}
	corsExposed   = []string{"RateLimit, RateLimit-Policy, Retry-After, X-Request-Id, Idempotent-Replayed"}
	corsMethods   = []string{"GET, POST"}
	corsHeaders   = []string{"Authorization, Content-Type, Idempotency-Key, X-Request-Id, traceparent"}
	corsMaxAge    = []string{"600"}
)

func allowAnyOrigin(h http.Header) {
	h["Access-Control-Allow-Origin"] = corsAnyOrigin
	h["Access-Control-Expose-Headers"] = corsExposed
}

// isPreflight reports whether r is a CORS preflight (a bare OPTIONS is not:
// it is a method no endpoint has, so not_found).
func isPreflight(r *http.Request) bool {
	return r.Method == http.MethodOptions && r.Header.Get("Access-Control-Request-Method") != ""
}

func preflight(w http.ResponseWriter, r *http.Request) {
	r.Pattern = "OPTIONS (preflight)"
	h := w.Header()
	h["Access-Control-Allow-Methods"] = corsMethods
	h["Access-Control-Allow-Headers"] = corsHeaders
	h["Access-Control-Max-Age"] = corsMaxAge
	w.WriteHeader(http.StatusNoContent)
}
