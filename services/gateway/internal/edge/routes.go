package edge

import (
	"time"

	"github.com/partnerpay/api/pkg/partner"
	"github.com/partnerpay/api/services/gateway/internal/apikey"
)

// Upstream names.
const (
	UpstreamPayout  = "payout"
	UpstreamFiat    = "fiat"
	UpstreamConsent = "consent"
	UpstreamOrders  = "orders"
	// UpstreamGateway is the gateway itself: the reference reads, which
	// need only the catalogue and the key's grants (internal/reference).
	UpstreamGateway = "gateway"
)

// Route is one endpoint of the partner API: method and path, the service that
// answers it, the product the key must carry ("" means any valid key), and
// how long the service has to answer, and the scope the key needs (read: it
// creates and moves nothing). A sandbox-only route does not exist in
// production.
type Route struct {
	Method      string
	Path        string
	Upstream    string
	Product     string
	SandboxOnly bool
	Timeout     time.Duration
	Scope       string
}

// The scopes a route needs (DESIGN §2): a read key calls the GETs and the
// status and validate POSTs; everything else needs a write key.
const (
	read  = apikey.ScopeRead
	write = apikey.ScopeWrite
)

// Route timeouts: every read (a status, a list) answers from PostgreSQL
// alone (the services' workers keep the records up to date with the
// providers; a read waits at most 2 s for the standby's confirmation); the
// reference reads answer from memory; a payout's execution waits for its
// commit on a synchronous standby; the creating calls of fiat, consent and
// orders, and the sandbox calls, call the provider (whose client gives up
// within them). The longest is what the gateway's shutdown grace must
// exceed.
const (
	readTimeout     = 5 * time.Second
	executeTimeout  = 10 * time.Second
	providerTimeout = 20 * time.Second
)

// LongestTimeout is the longest route timeout.
const LongestTimeout = providerTimeout

// Routes is the whole keyed API the gateway serves. An endpoint is method and
// path: anything not listed here is 404 not_found.
var Routes = []Route{
	{"POST", "/v1/bank/payout/quote", UpstreamPayout, partner.ProductBank, false, readTimeout, write},
	{"POST", "/v1/bank/payout", UpstreamPayout, partner.ProductBank, false, executeTimeout, write},
	{"POST", "/v1/bank/payout/status", UpstreamPayout, partner.ProductBank, false, readTimeout, read},
	{"POST", "/v1/bank/payout/refund-address", UpstreamPayout, partner.ProductBank, false, executeTimeout, write},
	{"POST", "/v1/bank/payout/validate", UpstreamPayout, partner.ProductBank, false, executeTimeout, read},
	{"GET", "/v1/bank/payouts", UpstreamPayout, partner.ProductBank, false, readTimeout, read},
	{"GET", "/v1/config", UpstreamGateway, "", false, readTimeout, read},
	{"GET", "/v1/currencies", UpstreamGateway, "", false, readTimeout, read},
	{"GET", "/v1/limits", UpstreamGateway, "", false, readTimeout, read},
	{"GET", "/v1/countries", UpstreamGateway, "", false, readTimeout, read},
	{"GET", "/v1/statuses", UpstreamGateway, "", false, readTimeout, read},
	{"GET", "/v1/payment-methods", UpstreamGateway, "", false, readTimeout, read},
	{"GET", "/v1/rates", UpstreamGateway, "", false, readTimeout, read},
	{"GET", "/v1/events", UpstreamFeed, "", false, readTimeout, read},
	{"GET", "/v1/keys/me", UpstreamGateway, "", false, readTimeout, read},
	{"POST", "/v1/deposit/quote", UpstreamPayout, partner.ProductDeposit, false, readTimeout, write},
	{"POST", "/v1/orders", UpstreamOrders, partner.ProductCard, false, providerTimeout, write},
	{"POST", "/v1/orders/link", UpstreamOrders, partner.ProductCard, false, providerTimeout, write},
	{"POST", "/v1/orders/status", UpstreamOrders, partner.ProductCard, false, readTimeout, read},
	{"GET", "/v1/orders", UpstreamOrders, partner.ProductCard, false, readTimeout, read},
	{"POST", "/v1/fiat/accounts", UpstreamFiat, partner.ProductFiat, false, providerTimeout, write},
	{"POST", "/v1/fiat/virtual-accounts", UpstreamFiat, partner.ProductFiat, false, providerTimeout, write},
	{"POST", "/v1/fiat/deposits", UpstreamFiat, partner.ProductFiat, false, providerTimeout, write},
	{"POST", "/v1/fiat/status", UpstreamFiat, partner.ProductFiat, false, readTimeout, read},
	{"GET", "/v1/fiat/accounts", UpstreamFiat, partner.ProductFiat, false, readTimeout, read},
	{"GET", "/v1/fiat/virtual-accounts", UpstreamFiat, partner.ProductFiat, false, readTimeout, read},
	{"GET", "/v1/fiat/deposits", UpstreamFiat, partner.ProductFiat, false, readTimeout, read},
	{"POST", "/v1/fiat/consent/link", UpstreamConsent, partner.ProductFiat, false, providerTimeout, write},
	{"POST", "/v1/fiat/consent/status", UpstreamConsent, partner.ProductFiat, false, readTimeout, read},
	{"POST", "/v1/sandbox/payin", UpstreamFiat, partner.ProductFiat, true, providerTimeout, write},
	{"POST", "/v1/sandbox/identity", UpstreamFiat, partner.ProductFiat, true, providerTimeout, write},
	{"POST", "/v1/sandbox/orders/deposit", UpstreamOrders, partner.ProductCard, true, providerTimeout, write},
	{"POST", "/v1/sandbox/payouts/deposit", UpstreamPayout, partner.ProductBank, true, providerTimeout, write},
	{"POST", "/v1/sandbox/payouts/expire", UpstreamPayout, partner.ProductBank, true, executeTimeout, write},
}

// PublicRoute is served without a key or a rate limit, for browsers and
// for the providers' notifications: its answer (a page, a redirect, a
// notification's receipt) passes through as the service made it.
type PublicRoute struct {
	Method, Path, Upstream string
}

// Public are the public routes besides GET /health and the documentation.
var Public = []PublicRoute{
	{"GET", "/consent/return", UpstreamConsent},
	{"GET", "/orders/return", UpstreamOrders},
	// The bank provider's signed notification that its changes feed has
	// news (DESIGN §3): the payout service checks the signature.
	{"POST", "/provider/notifications", UpstreamPayout},
}

// publicTimeout is a public route's: the consent and order returns read the
// outcome back from the provider.
const publicTimeout = providerTimeout

// PublicRoutes lists Public as "METHOD /path".
var PublicRoutes = func() []string {
	out := make([]string, len(Public))
	for i, r := range Public {
		out[i] = r.Method + " " + r.Path
	}
	return out
}()
