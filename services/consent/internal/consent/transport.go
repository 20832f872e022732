package consent

import (
	"context"
	"log/slog"
	"net/http"

	"github.com/partnerpay/api/pkg/consentapi"
	"github.com/partnerpay/api/pkg/hostedlink"
	"github.com/partnerpay/api/pkg/jsonbody"
	"github.com/partnerpay/api/pkg/kithttp"
)

// Routes adds the service's routes to mux. The /internal routes are the fiat
// service's (consentapi); the gateway never routes them. GET
// /consent/return is the browser's way back; it answers HTML, since a
// person reads it.
func Routes(mux *http.ServeMux, e Endpoints, log *slog.Logger) {
	mux.Handle(consentapi.RouteCreate, kithttp.Server(e.CreateSession, decodeCreate, log))
	mux.Handle(consentapi.RouteGet, kithttp.Server(e.Session, decodeSession, log))
	mux.Handle("POST /v1/fiat/consent/link", kithttp.Server(e.Link, kithttp.Decode[LinkRequest], log))
	mux.Handle("POST /v1/fiat/consent/status", kithttp.Server(e.Status, kithttp.Decode[StatusRequest], log))
	mux.Handle("GET /consent/return", hostedlink.Handler(e.Return, encodeReturn, log))
}

func decodeCreate(_ context.Context, r *http.Request) (any, error) {
	var req consentapi.CreateSession
	if err := jsonbody.Decode(r, &req); err != nil {
		return nil, err
	}
	return req, nil
}

func decodeSession(_ context.Context, r *http.Request) (any, error) {
	return sessionRequest{Owner: r.URL.Query().Get("owner"), ID: r.PathValue("id")}, nil
}

func encodeReturn(_ context.Context, w http.ResponseWriter, response any) error {
	out := response.(Returned)
	if out.Redirect != "" {
		hostedlink.Redirect(w, out.Redirect)
		return nil
	}
	if out.Result == "declined" {
		return hostedlink.WritePage(w, http.StatusOK, "You declined", "You can close this page and return to the app.")
	}
	return hostedlink.WritePage(w, http.StatusOK, "All done", "You can close this page and return to the app.")
}
