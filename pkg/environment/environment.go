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

// UpstreamVars are the variables that name money upstreams. Every binary
// derives its environment from the same list, so they all agree.
var UpstreamVars = []string{"BANK_PROVIDER_URL", "PAYOUT_PROVIDER_URL"}

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

// FromEnv derives the environment from UpstreamVars read through getenv.
func FromEnv(getenv func(string) string) (Name, error) {
	urls := make([]string, len(UpstreamVars))
	for i, v := range UpstreamVars {
		urls[i] = getenv(v)
	}
	return Derive(urls...)
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
