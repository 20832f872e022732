// Package environment derives, once at boot, whether a deployment is sandbox or
// production from the hosts of its money upstreams. It is never a flag: a
// deployment is production only when every configured upstream is a known
// production host.
package environment

import (
	"fmt"
	"net"
	"net/url"
	"strings"
)

// Name is the environment reported in every answer.
type Name string

const (
	Sandbox    Name = "sandbox"
	Production Name = "production"
)

// Header carries a service's environment to the gateway, which refuses to
// pass on an answer from another environment than its own.
const Header = "X-Environment"

// Config is the part of a binary's configuration (config.Load) that
// names the money upstreams. Every binary derives its environment from the
// same variables, so they all agree.
type Config struct {
	BankProviderURL   string `env:"BANK_PROVIDER_URL"`
	PayoutProviderURL string `env:"PAYOUT_PROVIDER_URL"`
}

// Derive is the environment of a binary with these upstreams.
func (c Config) Derive() (Name, error) { return Derive(c.BankProviderURL, c.PayoutProviderURL) }

// productionHosts are the provider hosts where real money moves. A host gets
// here only when a production contract with its owner exists.
var productionHosts = map[string]bool{
	"api.bank-provider.com":   true,
	"api.payout-provider.com": true,
}

// sandboxHosts are the providers' public sandboxes.
var sandboxHosts = map[string]bool{
	"sandbox.bank-provider.com":   true,
	"sandbox.payout-provider.com": true,
}

// Derive classifies the given upstream URLs; empty ones are not configured.
// Any sandbox upstream makes the deployment sandbox; none at all means nothing
// real can move, so sandbox too. An unknown public host is an error: booting
// with a guess would risk calling a real provider a sandbox or the reverse.
func Derive(upstreams ...string) (Name, error) {
	configured, production := 0, 0
	for _, raw := range upstreams {
		if raw == "" {
			continue
		}
		u, err := url.Parse(raw)
		if err != nil || u.Hostname() == "" {
			return "", fmt.Errorf("environment: upstream %q is not an absolute URL", raw)
		}
		kind, err := classify(u.Hostname())
		if err != nil {
			return "", err
		}
		configured++
		if kind == Production {
			production++
		}
	}
	if configured > 0 && production == configured {
		return Production, nil
	}
	return Sandbox, nil
}

func classify(host string) (Name, error) {
	host = strings.ToLower(strings.TrimSuffix(host, "."))
	switch {
	case productionHosts[host]:
		return Production, nil
	case sandboxHosts[host], host == "localhost", strings.HasSuffix(host, ".localhost"):
		return Sandbox, nil
	}
	if ip := net.ParseIP(host); ip != nil {
		if ip.IsLoopback() || ip.IsPrivate() || ip.IsLinkLocalUnicast() || ip.IsUnspecified() {
			return Sandbox, nil
		}
		return "", fmt.Errorf("environment: upstream address %s is public and not a known provider", host)
	}
	if !strings.Contains(host, ".") { // a single-label name: a container or local host
		return Sandbox, nil
	}
	return "", fmt.Errorf("environment: upstream host %q is neither a known production nor a known sandbox host; add it to the table in pkg/environment", host)
}
