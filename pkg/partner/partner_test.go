package partner

import (
	"net/http"
	"net/http/httptest"
	"strconv"
	"testing"
)

func TestRequireInternalToken(t *testing.T) {
	t.Parallel()
	ok := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(http.StatusNoContent) })
	h := RequireInternalToken("s3cret", ok, "/health")
	tests := []struct {
		name, path, token string
		want              int
	}{
		{"right token passes", "/v1/x", "s3cret", 204},
		{"no token is refused", "/v1/x", "", 401},
		{"wrong token is refused", "/v1/x", "s3cre", 401},
		{"health needs no token", "/health", "", 204},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := httptest.NewRequest(http.MethodGet, tt.path, nil)
			if tt.token != "" {
				r.Header.Set(HeaderInternalToken, tt.token)
			}
			w := httptest.NewRecorder()
			h.ServeHTTP(w, r)
			if w.Code != tt.want {
				t.Fatalf("status = %d, want %d", w.Code, tt.want)
			}
			if tt.want == 401 && w.Body.String() != `{"error":{"code":"unauthorized","message":"Missing, malformed or unknown API key."}}` {
				t.Errorf("body = %s", w.Body)
			}
		})
	}
	empty := RequireInternalToken("", ok)
	w := httptest.NewRecorder()
	empty.ServeHTTP(w, httptest.NewRequest(http.MethodGet, "/v1/x", nil))
	if w.Code != 401 {
		t.Errorf("an unset token must refuse everything, got %d", w.Code)
	}
}

func TestFromRequest(t *testing.T) {
	t.Parallel()
	r := httptest.NewRequest(http.MethodGet, "/", nil)
	r.Header.Set(HeaderKeyID, "acme")
	r.Header.Set(HeaderGrants, `{"products":["bank"],"chains":{"source":[84532],"destination":[]},"tokens":{"84532":["0xAbC"]},"maxExecutionUsd":"25000"}`)
	c, err := FromRequest(r)
	if err != nil {
		t.Fatal(err)
	}
	if c.KeyID != "acme" || !c.Grants.HasProduct("bank") || c.Grants.HasProduct("fiat") ||
		c.Grants.AllowChain(Source, 84532) != nil ||
		c.Grants.Tokens["84532"][0] != "0xAbC" || c.Grants.MaxExecutionUSD != "25000" {
		t.Errorf("caller = %+v", c)
	}
	if err := c.Grants.AllowChain(Destination, 84532); err == nil || err.Error() != "chain_not_allowed: This key is not enabled for chain 84532 as a destination." {
		t.Errorf("destination 84532: %v", err)
	}
	r.Header.Del(HeaderGrants)
	if _, err := FromRequest(r); err == nil {
		t.Error("a request without grants must be refused")
	}
}

// A key's grants arrive as the same text on every request; they are
// decoded once, and each text keeps its own.
//
// Not parallel: testing.AllocsPerRun refuses to run in a parallel test.
func TestAKeysGrantsAreDecodedOnce(t *testing.T) {
	request := func(key, grants string) *http.Request {
		r := httptest.NewRequest(http.MethodGet, "/", nil)
		r.Header.Set(HeaderKeyID, key)
		r.Header.Set(HeaderGrants, grants)
		return r
	}
	bank := request("acme", `{"products":["bank"],"chains":{"source":[84532],"destination":[]},"tokens":{},"maxExecutionUsd":"100"}`)
	fiat := request("zeta", `{"products":["fiat"],"chains":{"source":[],"destination":[11155111]},"tokens":{},"maxExecutionUsd":"7"}`)
	for range 2 {
		a, errA := FromRequest(bank)
		z, errZ := FromRequest(fiat)
		if errA != nil || errZ != nil || a.KeyID != "acme" || !a.Grants.HasProduct("bank") || a.Grants.HasProduct("fiat") ||
			a.Grants.MaxExecutionUSD != "100" || z.KeyID != "zeta" || !z.Grants.HasProduct("fiat") || z.Grants.MaxExecutionUSD != "7" ||
			z.Grants.AllowChain(Destination, 11155111) != nil || a.Grants.AllowChain(Destination, 11155111) == nil {
			t.Fatalf("acme %+v %v, zeta %+v %v", a, errA, z, errZ)
		}
	}
	if n := testing.AllocsPerRun(100, func() { _, _ = FromRequest(bank) }); n != 0 {
		t.Errorf("grants seen before were decoded again: %.0f allocations a request", n)
	}
	// A text that is not grants is refused every time: a refusal is never kept as grants.
	broken := request("acme", `{"products":["bank"]`)
	for range 2 {
		if _, err := FromRequest(broken); err == nil || err.Error() != "unauthorized: Missing, malformed or unknown API key." {
			t.Fatalf("broken grants: %v", err)
		}
	}
}

// Past its bound the cache keeps nothing more, and every text is still
// read as itself.
func TestGrantsPastTheBoundAreStillRead(t *testing.T) {
	t.Parallel()
	c := grantsCache{max: 2}
	for round := range 2 {
		for i := range 5 {
			max := strconv.Itoa(i)
			g, ok := c.of(`{"products":["bank"],"maxExecutionUsd":"` + max + `"}`)
			if !ok || g.MaxExecutionUSD != max || !g.HasProduct("bank") {
				t.Fatalf("round %d, text %d: %+v %v", round, i, g, ok)
			}
		}
	}
	if n := c.n.Load(); n != 2 {
		t.Errorf("the cache holds %d texts, want its bound, 2", n)
	}
}

// BenchmarkFromRequest reads the caller of a request as a service does on
// every request, with the grants of a key that has every product.
func BenchmarkFromRequest(b *testing.B) {
	r := httptest.NewRequest(http.MethodGet, "/", nil)
	r.Header.Set(HeaderKeyID, "default")
	r.Header.Set(HeaderGrants, `{"products":["bank","fiat","deposit","card"],"chains":{"source":[84532,11155111],"destination":[84532,11155111]},`+
		`"tokens":{"11155111":["0x1c7D4B196Cb0C7B01d743Fbc6116a902379C7238","0x08210F9170F89Ab7658F0B5E3fF39b0E03C594D4"],`+
		`"84532":["0x036CbD53842c5426634e7929541eC2318f3dCF7e","0x808456652fdb597867f38412077A9182bf77359F"]},"maxExecutionUsd":"25000"}`)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := FromRequest(r); err != nil {
			b.Fatal(err)
		}
	}
}
