package orders

import (
	"log/slog"
	"net/http"

	"github.com/partnerpay/api/pkg/kithttp"
)

// Routes adds the order service's routes to mux. idempotent wraps the
// creating route.
func Routes(mux *http.ServeMux, e Endpoints, idempotent func(http.Handler) http.Handler, log *slog.Logger) {
	mux.Handle("POST /v1/orders", idempotent(kithttp.Server(e.Create, kithttp.Decode[CreateRequest], log)))
	mux.Handle("POST /v1/orders/status", kithttp.Server(e.Status, kithttp.Decode[StatusRequest], log))
}
