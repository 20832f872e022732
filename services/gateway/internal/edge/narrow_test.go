package edge

import (
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/partnerpay/api/pkg/partner"
	"github.com/partnerpay/api/services/gateway/internal/apikey"
	"github.com/partnerpay/api/services/gateway/internal/ratelimit"
)

// narrowedKeys is the test key, with its narrowing.
func narrowedKeys(n apikey.Narrowing, products ...string) staticKeys {
	return staticKeys{apikey.NewSet(&apikey.File{Keys: []apikey.Key{{
		ID: "acme", Fingerprint: apikey.Fingerprint(testKey), RatePerSecond: 1000,
		Grants:    partner.Grants{Products: products, Chains: partner.Chains{Source: []int64{84532}}, MaxExecutionUSD: "25000"},
		Narrowing: n,
	}}})}
}

func ranges(t *testing.T, list ...string) apikey.Allowed {
	t.Helper()
	var out apikey.Allowed
	if err := out.EnvDecode(strings.Join(list, ",")); err != nil {
		t.Fatal(err)
	}
	return out
}

func TestTheOriginIsTheConnectionsUnlessATrustedProxySaysOtherwise(t *testing.T) {
	t.Parallel()
	trusted := ranges(t, "10.0.0.0/8", "fd00::/8")
	cases := []struct {
		name, peer string
		xff        []string
		trusted    apikey.Allowed
		want       string // "" : no origin
	}{
		{"no proxies: the peer", "203.0.113.7:4000", nil, nil, "203.0.113.7"},
		{"no proxies: a client's X-Forwarded-For decides nothing", "203.0.113.7:4000", []string{"198.51.100.1"}, nil, "203.0.113.7"},
		{"an untrusted peer's X-Forwarded-For decides nothing", "203.0.113.7:4000", []string{"198.51.100.1"}, trusted, "203.0.113.7"},
		{"a trusted proxy names the client", "10.1.2.3:4000", []string{"198.51.100.1"}, trusted, "198.51.100.1"},
		{"a forged hop left of the proxy's decides nothing", "10.1.2.3:4000", []string{"192.0.2.66, 198.51.100.1"}, trusted, "198.51.100.1"},
		{"a forged trusted-looking hop decides nothing", "10.1.2.3:4000", []string{"10.9.9.9, 198.51.100.1"}, trusted, "198.51.100.1"},
		{"two trusted proxies: the hop before them", "10.1.2.3:4000", []string{"198.51.100.1, 10.4.4.4"}, trusted, "198.51.100.1"},
		{"hops over several headers, in order", "10.1.2.3:4000", []string{"192.0.2.66", "198.51.100.1,10.4.4.4"}, trusted, "198.51.100.1"},
		{"a hop with a port", "10.1.2.3:4000", []string{"198.51.100.1:5555"}, trusted, "198.51.100.1"},
		{"an IPv6 hop with a port", "10.1.2.3:4000", []string{"[2001:db8::7]:5555"}, trusted, "2001:db8::7"},
		{"IPv4-mapped peer", "[::ffff:203.0.113.7]:4000", nil, nil, "203.0.113.7"},
		{"IPv4-mapped trusted proxy", "[::ffff:10.1.2.3]:4000", []string{"::ffff:198.51.100.1"}, trusted, "198.51.100.1"},
		{"IPv6 trusted proxy", "[fd00::1]:4000", []string{"2001:db8::7"}, trusted, "2001:db8::7"},
		{"only trusted hops: the first proxy", "10.1.2.3:4000", []string{"10.4.4.4"}, trusted, "10.4.4.4"},
		{"no header behind a trusted proxy: the proxy", "10.1.2.3:4000", nil, trusted, "10.1.2.3"},
		{"a hop that is no address, where the walk must read it", "10.1.2.3:4000", []string{"unknown"}, trusted, ""},
		{"an empty hop", "10.1.2.3:4000", []string{"198.51.100.1, "}, trusted, ""},
		{"garbage left of the client is never read", "10.1.2.3:4000", []string{"garbage, 198.51.100.1"}, trusted, "198.51.100.1"},
		{"a peer that is no address", "@", nil, trusted, ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			r := httptest.NewRequest("GET", "/v1/config", nil)
			r.RemoteAddr = c.peer
			for _, v := range c.xff {
				r.Header.Add("X-Forwarded-For", v)
			}
			got, ok := origin(r, c.trusted)
			if c.want == "" {
				if ok {
					t.Fatalf("origin %s, want none", got)
				}
				return
			}
			if !ok || got != netip.MustParseAddr(c.want) {
				t.Fatalf("origin %s (%v), want %s", got, ok, c.want)
			}
		})
	}
	t.Run("a padded header is not walked to its end", func(t *testing.T) {
		t.Parallel()
		r := httptest.NewRequest("GET", "/v1/config", nil)
		r.RemoteAddr = "10.1.2.3:4000"
		r.Header.Set("X-Forwarded-For", strings.Repeat("10.0.0.1,", 1000)+"10.0.0.1")
		if got, ok := origin(r, trusted); ok {
			t.Fatalf("origin %s from 1,001 hops", got)
		}
	})
}

func TestAnAddressPinnedKeyAnswersOnlyFromItsAddresses(t *testing.T) {
	t.Parallel()
	called := 0
	up := upstreamFunc(func(r *http.Request) *http.Response {
		called++
		return answer(200, "sandbox", `{"environment":"sandbox","items":[]}`)(r)
	})
	keys := narrowedKeys(apikey.Narrowing{AllowedIPs: []string{"192.0.2.0/24", "2001:db8::/32"}}, partner.ProductBank)
	g := newGateway(t, keys, up, quiet())
	t.Cleanup(g.Close)
	from := func(peer string, xff ...string) *httptest.ResponseRecorder {
		r := httptest.NewRequest("GET", "/v1/bank/payouts", nil)
		r.Header.Set("Authorization", "Bearer "+testKey)
		r.RemoteAddr = peer
		for _, v := range xff {
			r.Header.Add("X-Forwarded-For", v)
		}
		w := httptest.NewRecorder()
		g.ServeHTTP(w, r)
		return w
	}
	for _, peer := range []string{"192.0.2.1:1234", "[::ffff:192.0.2.200]:1234", "[2001:db8:1::5]:80"} {
		if w := from(peer); w.Code != 200 {
			t.Errorf("from %s: %d %s", peer, w.Code, w.Body)
		}
	}
	const refused = `{"environment":"sandbox","error":{"code":"ip_not_allowed","message":"This key may not be used from this address: it is limited to the addresses its operator listed."}}`
	for _, peer := range []string{"198.51.100.1:1234", "[2001:db9::1]:80", "[::ffff:198.51.100.1]:1234"} {
		w := from(peer, "192.0.2.1") // a client's own X-Forwarded-For: no proxy is trusted
		if w.Code != 403 || strings.TrimSpace(w.Body.String()) != refused {
			t.Errorf("from %s: %d %s", peer, w.Code, w.Body)
		}
		if w.Header().Get("RateLimit") != "" {
			t.Errorf("from %s: the address is the key's step, before the rate limit; got RateLimit %q", peer, w.Header().Get("RateLimit"))
		}
	}
	if called != 3 {
		t.Errorf("the upstream saw %d calls, want the 3 allowed", called)
	}
}

func TestBehindTrustedProxiesTheLastHopTheyDidNotAddDecides(t *testing.T) {
	t.Parallel()
	up := answer(200, "sandbox", `{"environment":"sandbox","items":[]}`)
	keys := narrowedKeys(apikey.Narrowing{AllowedIPs: []string{"203.0.113.7/32"}}, partner.ProductBank)
	g, err := New(Config{
		Env: "sandbox", Keys: keys, Limiter: ratelimit.NewLocal(time.Now),
		Upstreams: upstreams(), Transport: up,
		InternalToken: "internal-token-0123456789", Log: quiet(),
		TrustedProxies: ranges(t, "10.0.0.0/8"),
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(g.Close)
	from := func(peer, xff string) int {
		r := httptest.NewRequest("GET", "/v1/bank/payouts", nil)
		r.Header.Set("Authorization", "Bearer "+testKey)
		r.RemoteAddr = peer
		if xff != "" {
			r.Header.Set("X-Forwarded-For", xff)
		}
		w := httptest.NewRecorder()
		g.ServeHTTP(w, r)
		return w.Code
	}
	for _, c := range []struct {
		peer, xff string
		want      int
	}{
		{"10.0.0.5:1", "203.0.113.7", 200},                        // the proxy saw the partner
		{"10.0.0.5:1", "203.0.113.7, 10.0.0.9", 200},              // through two proxies
		{"10.0.0.5:1", "198.51.100.1", 403},                       // the proxy saw someone else
		{"10.0.0.5:1", "203.0.113.7, 198.51.100.1", 403},          // who claims to be the partner
		{"198.51.100.1:1", "203.0.113.7", 403},                    // straight in, claiming it too
		{"203.0.113.7:1", "", 200},                                // the partner straight in
		{"10.0.0.5:1", "", 403},                                   // the proxy itself is not the partner
		{"10.0.0.5:1", "not-an-address, 203.0.113.7", 200},        // left of the partner: never read
		{"10.0.0.5:1", "203.0.113.7, not-an-address", 403},        // what the proxies added is unreadable
		{"10.0.0.5:1", "::ffff:203.0.113.7", 200},                 // mapped, the same address
		{"[::ffff:10.0.0.5]:1", "203.0.113.7", 200},               // a mapped proxy is still trusted
		{"10.0.0.5:1", "203.0.113.7:61000", 200},                  // with a port
		{"10.0.0.5:1", "203.0.113.8, 203.0.113.7, 10.0.0.1", 200}, // the hop the proxies did not add
	} {
		if got := from(c.peer, c.xff); got != c.want {
			t.Errorf("peer %s, X-Forwarded-For %q: %d, want %d", c.peer, c.xff, got, c.want)
		}
	}
}

func TestAReadKeyReadsAndIsLimitedBeforeItIsRefused(t *testing.T) {
	t.Parallel()
	var called []string
	up := upstreamFunc(func(r *http.Request) *http.Response {
		called = append(called, r.Method+" "+r.URL.Path)
		return answer(200, "sandbox", `{"environment":"sandbox","ok":true}`)(r)
	})
	keys := staticKeys{apikey.NewSet(&apikey.File{Keys: []apikey.Key{{
		ID: "acme", Fingerprint: apikey.Fingerprint(testKey), RatePerSecond: 4,
		Grants:    partner.Grants{Products: partner.Products, MaxExecutionUSD: "25000"},
		Narrowing: apikey.Narrowing{Scope: apikey.ScopeRead},
	}}})}
	// Four calls a second, on a clock that stands still: the fifth call is
	// limited however slowly the machine runs.
	still := time.Now()
	g := newGatewayWith(t, keys, ratelimit.NewLocal(func() time.Time { return still }), up, quiet())
	t.Cleanup(g.Close)

	for _, c := range [][2]string{{"GET", "/v1/bank/payouts"}, {"POST", "/v1/bank/payout/status"}, {"POST", "/v1/bank/payout/validate"}} {
		if w := serveOne(g, c[0], c[1], map[string]string{"GET": ""}[c[0]]+map[string]string{"POST": `{}`}[c[0]]); w.Code != 200 {
			t.Errorf("a read key's %s %s: %d %s", c[0], c[1], w.Code, w.Body)
		}
	}
	const refused = `{"environment":"sandbox","error":{"code":"permission_denied","message":"This key's scope is read: it reads, and creates or moves nothing. Use a key with the write scope."}}`
	w := serveOne(g, "POST", "/v1/bank/payout", `{"quoteId":"x"}`)
	if w.Code != 403 || strings.TrimSpace(w.Body.String()) != refused {
		t.Fatalf("a read key executing: %d %s", w.Code, w.Body)
	}
	if w.Header().Get("RateLimit") == "" {
		t.Error("the scope is the product step, after the rate limit: the refusal carries RateLimit")
	}
	// Hammering a write route, the key is limited first.
	if w := serveOne(g, "POST", "/v1/bank/payout", `{"quoteId":"x"}`); w.Code != 429 {
		t.Errorf("the fifth call of a 4/s read key, to a write route: %d %s, want 429", w.Code, w.Body)
	}
	if want := "GET /v1/bank/payouts POST /v1/bank/payout/status POST /v1/bank/payout/validate"; strings.Join(called, " ") != want {
		t.Errorf("the upstream saw %q, want %q", called, want)
	}
}

func TestTheRoutesScopesAreTheContracts(t *testing.T) {
	t.Parallel()
	// DESIGN §2: a read key calls the GETs and the status and validate
	// POSTs; nothing else.
	for _, r := range Routes {
		reads := r.Method == http.MethodGet || strings.HasSuffix(r.Path, "/status") || strings.HasSuffix(r.Path, "/validate")
		if want := map[bool]string{true: apikey.ScopeRead, false: apikey.ScopeWrite}[reads]; r.Scope != want {
			t.Errorf("%s %s needs scope %q, want %q", r.Method, r.Path, r.Scope, want)
		}
	}
	for _, route := range []string{"POST /v1/bank/payout/quote", "POST /v1/deposit/quote", "POST /v1/bank/payout/refund-address", "POST /v1/sandbox/payin"} {
		method, path, _ := strings.Cut(route, " ")
		for _, r := range Routes {
			if r.Method == method && r.Path == path && r.Scope != apikey.ScopeWrite {
				t.Errorf("%s is open to read keys", route)
			}
		}
	}
}

func TestAnExpiredKeyIsRefusedLikeAnUnknownOne(t *testing.T) {
	t.Parallel()
	past, future := time.Now().Add(-time.Second), time.Now().Add(time.Hour)
	up := answer(200, "sandbox", `{"environment":"sandbox","ok":true}`)
	unknown := serveOne(newGateway(t, keySet(), up, quiet()), "GET", "/v1/config", "", "Authorization", "Bearer pk_"+strings.Repeat("B", 43))
	for _, c := range []struct {
		at   time.Time
		want int
	}{{past, 401}, {future, 200}} {
		g := newGateway(t, narrowedKeys(apikey.Narrowing{ExpiresAt: &c.at}), up, quiet())
		t.Cleanup(g.Close)
		w := serveOne(g, "GET", "/v1/config", "")
		if w.Code != c.want {
			t.Errorf("expiring at %s: %d %s", c.at, w.Code, w.Body)
		}
		if c.want == 401 && (w.Body.String() != unknown.Body.String() || w.Header().Get("WWW-Authenticate") != unknown.Header().Get("WWW-Authenticate")) {
			t.Errorf("an expired key's answer differs from an unknown key's:\n%s\n%s", w.Body, unknown.Body)
		}
	}
}

func TestKeysMeSaysWhatTheKeyMayDo(t *testing.T) {
	t.Parallel()
	at := time.Date(2027, 1, 31, 0, 0, 0, 0, time.FixedZone("CET", 3600))
	for _, c := range []struct {
		n    apikey.Narrowing
		want string
	}{
		{apikey.Narrowing{}, `{"environment":"sandbox","keyId":"acme","scope":"write","products":["bank"],"chains":{"source":[84532],"destination":[]},"tokens":{},"ratePerSecond":1000,"maxExecutionUsd":"25000","allowedIps":[],"expiresAt":null}`},
		{apikey.Narrowing{Scope: "read", AllowedIPs: []string{"192.0.2.0/24", "2001:db8::/32"}, ExpiresAt: &at},
			`{"environment":"sandbox","keyId":"acme","scope":"read","products":["bank"],"chains":{"source":[84532],"destination":[]},"tokens":{},"ratePerSecond":1000,"maxExecutionUsd":"25000","allowedIps":["192.0.2.0/24","2001:db8::/32"],"expiresAt":"2027-01-30T23:00:00Z"}`},
	} {
		g := newGateway(t, narrowedKeys(c.n, partner.ProductBank), answer(500, "", ""), quiet())
		t.Cleanup(g.Close)
		w := serveOne(g, "GET", "/v1/keys/me", "")
		if w.Code != 200 || w.Body.String() != c.want {
			t.Errorf("GET /v1/keys/me: %d\n got %s\nwant %s", w.Code, w.Body, c.want)
		}
		if strings.Contains(w.Body.String(), "sha256") || strings.Contains(w.Body.String(), testKey) {
			t.Error("the answer shows the key or its fingerprint")
		}
	}
}
