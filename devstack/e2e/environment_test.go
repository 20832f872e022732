package e2e

import (
	"context"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/partnerpay/api/devstack"
)

// The environment is derived from the money upstreams at boot, never set:
// pointing the bank provider at a known production host makes a production
// deployment, with mainnets and without the sandbox calls.
func TestAProductionUpstreamMakesAProductionDeployment(t *testing.T) {
	// The local testnet is no chain of production's (a node whose chain is
	// not in the deployment's catalogue stops the boot): no chain is
	// configured.
	s := startStack(t, withEnv("BANK_PROVIDER_URL", "https://api.bank-provider.com"), withEnv("CHAIN_RPC_URL_84532", ""),
		withEnv("CHAIN_RPC_URL_11155111", ""))
	key := s.issue("acme", "--products", "bank,fiat", "--source-chains", "8453", "--destination-chains", "8453", "--rate", "1000")

	r := s.get("/v1/currencies", key)
	if !strings.HasPrefix(r.Body, `{"environment":"production","chains":[{"chain":1,"name":"Ethereum","testnet":false`) || strings.Contains(r.Body, "84532") {
		t.Fatalf("production catalogue: %.200s", r.Body)
	}
	if r := s.get("/v1/config", key); !strings.Contains(r.Body, `"settlementNetwork":{"chain":8453,"name":"Base"}`) {
		t.Errorf("production settles on Base: %s", r.Body)
	}
	q := s.post("/v1/bank/payout/quote", key, `{"cryptoCurrency":"USDC","chain":8453,"fiatCurrency":"EUR","country":"DE","cryptoAmount":"10"}`)
	if q.Status != 200 || !strings.HasPrefix(q.Body, `{"environment":"production","mock":true,"quoteId":"bpq_8453_`) {
		t.Errorf("production quote: %d %s", q.Status, q.Body)
	}
	for _, path := range []string{"/v1/sandbox/payin", "/v1/sandbox/identity"} {
		r := s.post(path, key, `{}`)
		if r.Status != 404 || r.Body != `{"environment":"production","error":{"code":"not_found","message":"No such endpoint."}}` {
			t.Errorf("%s in production: %d %s", path, r.Status, r.Body)
		}
	}
	if r := s.get("/v1/nope", ""); !strings.HasPrefix(r.Body, `{"environment":"production",`) {
		t.Errorf("refusals name production too: %s", r.Body)
	}
}

func TestAnUnknownUpstreamHostStopsTheBoot(t *testing.T) {
	dir := t.TempDir()
	rs := startRedis(t)
	addrs := freeAddrs(t, 2*len(services)+len(devstack.ChainAddrs))
	o := devstack.Options{
		BinDir: binDir, StateDir: dir, RedisURL: rs, Ports: map[string]string{},
		Env:  map[string]string{"BANK_PROVIDER_URL": "https://bank.example.org"},
		Logs: &syncBuffer{},
	}
	for i, svc := range services {
		o.Ports[svc], o.Ports[svc+"_admin"] = addrs[2*i], addrs[2*i+1]
	}
	next := 2 * len(services)
	for id := range devstack.ChainAddrs {
		o.Ports["chain_"+strconv.FormatInt(id, 10)] = addrs[next]
		next++
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	s, err := devstack.Start(ctx, o)
	if err == nil {
		s.Stop()
		t.Fatal("the stack booted with a bank provider that is neither a known production nor a sandbox host")
	}
	if logs := o.Logs.(*syncBuffer).String(); !strings.Contains(logs, `upstream host "bank.example.org" is neither a known production nor a known sandbox host`) {
		t.Errorf("the refusal does not say why:\n%s", logs)
	}
}
