package main

import (
	"strings"
	"testing"

	"github.com/partnerpay/api/pkg/config"
	"github.com/partnerpay/api/services/gateway/internal/edge"
)

// The grace a stopping gateway gives requests in flight is longer than its
// longest route timeout, so none is cut.
func TestShutdownGraceExceedsTheLongestRouteTimeout(t *testing.T) {
	t.Parallel()
	if binary.Grace <= edge.LongestTimeout {
		t.Fatalf("grace %s is not above the longest route timeout %s", binary.Grace, edge.LongestTimeout)
	}
}

func TestSettingsAreReadOnceWithTheirDefaults(t *testing.T) {
	t.Parallel()
	env := map[string]string{"INTERNAL_TOKEN": "internal-token-of-this-test", "PAYOUT_URL": "https://payout.internal:8443"}
	var c settings
	if err := config.Load(func(k string) string { return env[k] }, &c); err != nil {
		t.Fatal(err)
	}
	if sc := c.Serving(); sc.Drain.String() != "5s" || sc.ReadTimeout.String() != "15s" || c.Replicas != 1 || c.KeysFile != ".local/keys.json" {
		t.Errorf("defaults: %+v %+v", sc, c)
	}
	if u := c.upstreams()[edge.UpstreamPayout]; u.Host != "payout.internal:8443" {
		t.Errorf("payout upstream %v", u)
	}
	env["GATEWAY_TRUSTED_PROXIES"] = "10.0.0.0/8, fd00::/8"
	if err := config.Load(func(k string) string { return env[k] }, &c); err != nil || len(c.TrustedProxies) != 2 || c.TrustedProxies[1].String() != "fd00::/8" {
		t.Errorf("GATEWAY_TRUSTED_PROXIES: %v, %v", c.TrustedProxies, err)
	}
	env["GATEWAY_TRUSTED_PROXIES"] = "10.0.0.0/33"
	if err := config.Load(func(k string) string { return env[k] }, &c); err == nil || !strings.Contains(err.Error(), `"10.0.0.0/33" is not an address or a CIDR range`) {
		t.Errorf("a bad GATEWAY_TRUSTED_PROXIES: %v", err)
	}
	delete(env, "GATEWAY_TRUSTED_PROXIES")
	env["GATEWAY_REPLICAS"], env["KEYS_RELOAD_INTERVAL"], env["SHUTDOWN_DRAIN"] = "0", "-1s", "-1s"
	err := config.Load(func(k string) string { return env[k] }, &c)
	for _, want := range []string{"GATEWAY_REPLICAS: 0 is not a positive integer", "KEYS_RELOAD_INTERVAL: -1s is not a positive duration", "SHUTDOWN_DRAIN: -1s is negative"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%v lacks %q", err, want)
		}
	}
}
