package edge

import "github.com/partnerpay/api/pkg/partner"

// Upstream names.
const (
	UpstreamPayout = "payout"
)

// Route is one endpoint of the partner API: method and path, the service that
// answers it, and the product the key must carry ("" means any valid key).
type Route struct {
	Method   string
	Path     string
	Upstream string
	Product  string
}

// Routes is the whole keyed API the gateway serves. An endpoint is method and
// path: anything not listed here is 404 not_found.
var Routes = []Route{
	{"POST", "/v1/bank/payout/quote", UpstreamPayout, partner.ProductBank},
	{"POST", "/v1/bank/payout", UpstreamPayout, partner.ProductBank},
	{"GET", "/v1/config", UpstreamPayout, ""},
	{"GET", "/v1/currencies", UpstreamPayout, ""},
	{"GET", "/v1/limits", UpstreamPayout, ""},
	{"GET", "/v1/countries", UpstreamPayout, ""},
}

// PublicRoutes are served without a key or a rate limit, besides GET /health
// and the documentation routes.
var PublicRoutes = []string{}
