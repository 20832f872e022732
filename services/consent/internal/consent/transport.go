package consent

import (
	"context"
	"html/template"
	"log/slog"
	"net/http"

	httptransport "github.com/go-kit/kit/transport/http"

	"github.com/partnerpay/api/pkg/envelope"
	"github.com/partnerpay/api/pkg/environment"
	"github.com/partnerpay/api/pkg/jsonbody"
	"github.com/partnerpay/api/pkg/kithttp"
	"github.com/partnerpay/api/pkg/partner"
)

// NewHandler is the service's HTTP API. /internal/sessions is for the fiat
// service; the gateway never routes it. GET /consent/return is the browser's
// way back; it answers HTML, since a person reads it.
func NewHandler(s Service, e Endpoints, env environment.Name, internalToken string, log *slog.Logger) http.Handler {
	opts := kithttp.ServerOptions(log)
	mux := http.NewServeMux()
	mux.Handle("POST /internal/sessions", httptransport.NewServer(e.CreateSession, decodeCreate, kithttp.EncodeJSON, opts...))
	mux.Handle("POST /v1/fiat/consent/link", httptransport.NewServer(e.Link, decodeLink, kithttp.EncodeJSON, opts...))
	mux.Handle("POST /v1/fiat/consent/status", httptransport.NewServer(e.Status, decodeStatus, kithttp.EncodeJSON, opts...))
	mux.Handle("GET /consent/return", returnHandler(s, log))
	return kithttp.Wrap(mux, env, internalToken)
}

func decodeCreate(_ context.Context, r *http.Request) (any, error) {
	var req createSessionRequest
	if err := jsonbody.Decode(r, &req); err != nil {
		return nil, err
	}
	if req.Owner == "" || req.AccountID == "" || req.ProviderCustomerID == "" {
		return nil, envelope.InvalidRequest("owner, accountId and providerCustomerId are required.")
	}
	return req, nil
}

func decodeLink(_ context.Context, r *http.Request) (any, error) {
	caller, err := partner.FromRequest(r)
	if err != nil {
		return nil, err
	}
	var body LinkRequest
	if err := jsonbody.Decode(r, &body); err != nil {
		return nil, err
	}
	return linkRequest{Caller: caller, Body: body}, nil
}

func decodeStatus(_ context.Context, r *http.Request) (any, error) {
	caller, err := partner.FromRequest(r)
	if err != nil {
		return nil, err
	}
	var body StatusRequest
	if err := jsonbody.Decode(r, &body); err != nil {
		return nil, err
	}
	return statusRequest{Caller: caller, Body: body}, nil
}

var returnPage = template.Must(template.New("return").Parse(`<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>{{.Title}}</title>
<style>body{font:16px/1.5 system-ui,sans-serif;color:#1d2330;max-width:36rem;margin:3rem auto;padding:0 1rem}</style>
</head>
<body>
<main>
<h1>{{.Title}}</h1>
<p>{{.Message}}</p>
</main>
</body>
</html>
`))

func writePage(w http.ResponseWriter, status int, title, message string) {
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	w.Header().Set("Content-Security-Policy", "default-src 'none'; style-src 'unsafe-inline'")
	w.Header().Set("Referrer-Policy", "no-referrer")
	w.WriteHeader(status)
	_ = returnPage.Execute(w, struct{ Title, Message string }{title, message})
}

func returnHandler(s Service, log *slog.Logger) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		q := r.URL.Query()
		out, err := s.Return(r.Context(), q.Get("state"), q.Get("result"))
		if err != nil {
			e, known := envelope.From(err)
			if !known {
				log.ErrorContext(r.Context(), "consent return failed", "err", err, "request_id", r.Header.Get(partner.HeaderRequestID))
			}
			w.Header().Set(partner.HeaderErrorCode, e.Code)
			writePage(w, e.Status, "We could not finish this step", e.Message)
			return
		}
		if out.Redirect != "" {
			http.Redirect(w, r, out.Redirect, http.StatusSeeOther)
			return
		}
		if out.Result == "declined" {
			writePage(w, http.StatusOK, "You declined", "You can close this page and return to the app.")
			return
		}
		writePage(w, http.StatusOK, "All done", "You can close this page and return to the app.")
	})
}
