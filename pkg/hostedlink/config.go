package hostedlink

import "github.com/partnerpay/api/pkg/config"

// Config is a hosted-page service's part of its binary's configuration
// (config.Load), under the binary's prefix (`env:", prefix=ORDERS_"`):
// the secret that signs the state a link carries through the browser, and
// the gateway's public return route (the binary sets its default).
type Config struct {
	Secret    config.Secret `env:"SECRET, required"`
	ReturnURL config.URL    `env:"RETURN_URL"`
}
