package reference

import (
	"encoding/json"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/partnerpay/api/pkg/environment"
	"github.com/partnerpay/api/pkg/partner"
)

func TestConfigWithoutBankHasNoBankCorridors(t *testing.T) {
	t.Parallel()
	r := New(environment.Sandbox)
	c := r.Config(partner.Grants{Products: []string{"fiat"}})
	if len(c.Corridors.Bank) != 0 || c.Crypto.Chains.Source == nil || c.Crypto.Tokens == nil {
		t.Errorf("config %+v", c)
	}
	bank := r.Config(partner.Grants{Products: []string{"bank"}})
	if len(bank.Corridors.Bank) == 0 || bank.SettlementNetwork.Chain != 84532 {
		t.Errorf("a bank key's config %+v", bank)
	}
}

// Every read answers 200, JSON, environment first, not cached by anyone;
// each list is filled.
func TestEveryReadAnswersEnvironmentFirst(t *testing.T) {
	t.Parallel()
	for _, env := range []environment.Name{environment.Sandbox, environment.Production} {
		r := New(env)
		for _, path := range Paths {
			w := httptest.NewRecorder()
			if !r.Serve(w, path, partner.Grants{Products: []string{"bank"}}) {
				t.Fatalf("%s: not served", path)
			}
			body := w.Body.String()
			var v map[string]json.RawMessage
			if w.Code != 200 || w.Header().Get("Content-Type") != "application/json" || w.Header().Get("Cache-Control") != "no-store" ||
				!strings.HasPrefix(body, `{"environment":"`+string(env)+`",`) || json.Unmarshal([]byte(body), &v) != nil || len(v) < 2 {
				t.Errorf("%s %s: %d %v %.80s", env, path, w.Code, w.Header(), body)
			}
			for k, raw := range v {
				if string(raw) == "null" || string(raw) == "[]" && k != "card" && k != "bank" {
					t.Errorf("%s %s: %s is %s", env, path, k, raw)
				}
			}
		}
		if r.Serve(httptest.NewRecorder(), "/v1/nothing", partner.Grants{}) {
			t.Error("an unknown path was served")
		}
	}
}
