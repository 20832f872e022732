package partner

import (
	"net/http"
	"net/http/httptest"
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
