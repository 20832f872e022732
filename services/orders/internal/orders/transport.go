package orders

import (
	"context"
	"log/slog"
	"net/http"

	"github.com/partnerpay/api/pkg/environment"
	"github.com/partnerpay/api/pkg/hostedlink"
	"github.com/partnerpay/api/pkg/kithttp"
)

// Routes adds the order service's routes to mux. idempotent wraps the
// creating route. The sandbox deposit exists only in sandbox. GET
// /orders/return is the browser's way back from the hosted card page; it
// answers a redirect or HTML, since a person reads it.
func Routes(mux *http.ServeMux, e Endpoints, env environment.Name, idempotent func(http.Handler) http.Handler, log *slog.Logger) {
	mux.Handle("POST /v1/orders", idempotent(kithttp.Server(e.Create, kithttp.Decode[CreateRequest], log)))
	mux.Handle("POST /v1/orders/link", kithttp.Server(e.Link, kithttp.Decode[LinkRequest], log))
	mux.Handle("POST /v1/orders/status", kithttp.Server(e.Status, kithttp.Decode[StatusRequest], log))
	mux.Handle("GET /v1/orders", kithttp.Server(e.List, kithttp.DecodeQuery, log))
	if env == environment.Sandbox {
		mux.Handle("POST /v1/sandbox/orders/deposit", kithttp.Server(e.SandboxDeposit, kithttp.Decode[StatusRequest], log))
	}
	mux.Handle("GET /orders/return", hostedlink.Handler(e.Return, encodeReturn, log))
}

// What a person reads when they come back with no returnUrl to go on to.
var returnPages = map[string]struct{ title, message string }{
	StatusAwaitingPayment: {"Not paid yet", "Nothing was charged. Go back to the app to pay or to start again."},
	StatusAwaitingDeposit: {"Card saved", "Send the stablecoins to the deposit address the app shows you; your card is credited once they arrive. You can close this page."},
	StatusProcessing:      {"Payment received", "Your order is on its way. You can close this page and return to the app."},
	StatusCompleted:       {"All done", "Your order is complete. You can close this page and return to the app."},
	StatusExpired:         {"This order has expired", "Nothing was charged. Go back to the app to start a new order."},
}

var failureMessages = map[string]string{
	"card_declined":         "Your card was declined. Nothing was charged. Go back to the app to try another card.",
	"authentication_failed": "Your bank could not confirm it was you. Nothing was charged. Go back to the app to try again.",
	"insufficient_funds":    "Your card has insufficient funds. Nothing was charged. Go back to the app to try another card.",
	"expired_card":          "Your card has expired. Nothing was charged. Go back to the app to try another card.",
}

func encodeReturn(_ context.Context, w http.ResponseWriter, response any) error {
	out := response.(Returned)
	if out.Redirect != "" {
		hostedlink.Redirect(w, out.Redirect)
		return nil
	}
	if out.Status == StatusFailed {
		return hostedlink.WritePage(w, http.StatusOK, "Payment failed", failureMessages[out.FailureReason])
	}
	p := returnPages[out.Status]
	return hostedlink.WritePage(w, http.StatusOK, p.title, p.message)
}
