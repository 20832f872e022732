package e2e

import (
	"net/http"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"
)

var (
	quoteIDPattern = regexp.MustCompile(`^bpq_(\d+)_[0-9a-f]{32}$`)
	quoteFields    = []string{"environment", "mock", "quoteId", "cryptoAmount", "fiatAmount", "rate", "rail", "estimatedSettlement", "providerFee", "ourFee", "expiresAt"}
)

type quoteAnswer struct {
	ID, Rail, Settlement string
	ExpiresAt            time.Time
}

// checkQuote asserts a 200 quote is exactly the contract's shape and returns
// its variable parts.
func checkQuote(t testing.TB, r response) quoteAnswer {
	t.Helper()
	if r.Status != http.StatusOK {
		t.Fatalf("status %d, body %s", r.Status, r.Body)
	}
	if got := fieldOrder(t, r.Body); !slices.Equal(got, quoteFields) {
		t.Fatalf("fields %v, want exactly %v", got, quoteFields)
	}
	m := regexp.MustCompile(`"quoteId":"([^"]*)".*"rail":"([^"]*)","estimatedSettlement":"([^"]*)".*"expiresAt":"([^"]*)"`).FindStringSubmatch(r.Body)
	if m == nil {
		t.Fatalf("unparseable quote %s", r.Body)
	}
	q := quoteAnswer{ID: m[1], Rail: m[2], Settlement: m[3]}
	if !quoteIDPattern.MatchString(q.ID) {
		t.Errorf("quoteId %q does not match bpq_<chain>_<32 hex>", q.ID)
	}
	var err error
	if q.ExpiresAt, err = time.Parse(time.RFC3339, m[4]); err != nil || !strings.HasSuffix(m[4], "Z") {
		t.Errorf("expiresAt %q is not RFC 3339 in UTC", m[4])
	}
	want := `{"environment":"sandbox","mock":true,"quoteId":"` + q.ID + `","cryptoAmount":"1234567.89","fiatAmount":"1234567.89","rate":"1234567.89","rail":"` + q.Rail + `","estimatedSettlement":"` + q.Settlement + `","providerFee":"1234567.89","ourFee":"1234567.89","expiresAt":"` + m[4] + `"}`
	if r.Body != want {
		t.Errorf("body\n got %s\nwant %s", r.Body, want)
	}
	return q
}

func TestQuote(t *testing.T) {
	s := startStack(t)
	acme := s.issue("acme", "--products", "bank", "--source-chains", "84532", "--rate", "1000")
	other := s.issue("other", "--products", "bank", "--source-chains", "84532", "--rate", "1000")
	fiatOnly := s.issue("fiatonly", "--products", "fiat", "--source-chains", "84532", "--rate", "1000")
	sepoliaOnly := s.issue("sepolia", "--products", "bank", "--source-chains", "11155111", "--rate", "1000")
	const path = "/v1/bank/payout/quote"

	t.Run("prices a payout with the contract's exact shape", func(t *testing.T) {
		before := time.Now().UTC()
		q := checkQuote(t, s.post(path, acme, `{"cryptoCurrency":"USDC","chain":84532,"fiatCurrency":"EUR","country":"DE","cryptoAmount":"100"}`))
		if q.Rail != "sepa_instant" || q.Settlement != "PT10S" {
			t.Errorf("rail %s/%s, want sepa_instant/PT10S", q.Rail, q.Settlement)
		}
		if !strings.HasPrefix(q.ID, "bpq_84532_") {
			t.Errorf("quoteId %s does not carry the chain", q.ID)
		}
		if d := q.ExpiresAt.Sub(before); d < 58*time.Second || d > 62*time.Second {
			t.Errorf("expiresAt is %s from now, want the default QUOTE_TTL of 60s", d)
		}
	})

	t.Run("every request opens a new quote; a keyed retry is answered the first", func(t *testing.T) {
		base := `{"cryptoCurrency":"USDC","chain":84532,"fiatCurrency":"EUR","country":"DE","cryptoAmount":"100"}`
		seen := map[string]bool{}
		for _, body := range []string{base, base,
			`{"cryptoCurrency":"usdc","chain":84532,"fiatCurrency":"eur","country":"de","cryptoAmount":"0100.00"}`,
			`{"cryptoCurrency":"USDC","chain":84532,"fiatCurrency":"EUR","country":"DE","cryptoAmount":"100","rail":"sepa_instant"}`,
		} {
			id := checkQuote(t, s.post(path, acme, body)).ID
			if seen[id] {
				t.Errorf("quote id %s answered twice: every request opens a new quote", id)
			}
			seen[id] = true
		}
		first := s.do("POST", path, acme, base, "Idempotency-Key", "quote-7")
		again := s.do("POST", path, acme, base, "Idempotency-Key", "quote-7")
		if checkQuote(t, first).ID == "" || again.Body != first.Body || again.Header.Get("Idempotent-Replayed") != "true" {
			t.Errorf("a keyed retry: %s then %s, want the first answer replayed", first.Body, again.Body)
		}
		// The same JSON, its keys in another order and spaced otherwise, is
		// the same request.
		if reordered := s.do("POST", path, acme, `{ "country": "DE", "cryptoAmount": "100", "fiatCurrency": "EUR", "chain": 84532, "cryptoCurrency": "USDC" }`,
			"Idempotency-Key", "quote-7"); reordered.Body != first.Body {
			t.Errorf("the same JSON reordered under the key: %d %s, want the first answer", reordered.Status, reordered.Body)
		}
		if changed := s.do("POST", path, acme, strings.Replace(base, `"100"`, `"101"`, 1), "Idempotency-Key", "quote-7"); changed.Status != 422 {
			t.Errorf("another request under the key: %d %s, want 422", changed.Status, changed.Body)
		}
		// Keys are per partner key: another key's "quote-7" is its own.
		if theirs := s.do("POST", path, other, base, "Idempotency-Key", "quote-7"); theirs.Status != 200 || checkQuote(t, theirs).ID == checkQuote(t, first).ID {
			t.Errorf("another key under the same Idempotency-Key: %d %s", theirs.Status, theirs.Body)
		}
	})

	t.Run("resolves rails from the published table", func(t *testing.T) {
		tests := []struct{ body, rail, settlement string }{
			{`{"cryptoCurrency":"USDC","chain":84532,"fiatCurrency":"USD","country":"US","fiatAmount":"250.5"}`, "wire", "PT4H"},
			{`{"cryptoCurrency":"USDC","chain":84532,"fiatCurrency":"USD","country":"US","cryptoAmount":"1","rail":"ach"}`, "ach", "P1D"},
			{`{"cryptoCurrency":"EURC","chain":84532,"fiatCurrency":"EUR","country":"FR","cryptoAmount":"10","rail":"SEPA"}`, "sepa", "P1D"},
			{`{"cryptoCurrency":"USDC","chain":84532,"fiatCurrency":"GBP","country":"GB","cryptoAmount":"10"}`, "faster_payments", "PT2H"},
			{`{"cryptoCurrency":"USDC","chain":84532,"fiatCurrency":"MXN","country":"MX","cryptoAmount":"10"}`, "spei", "PT1M"},
			{`{"cryptoCurrency":"USDC","chain":84532,"fiatCurrency":"BRL","country":"BR","cryptoAmount":"10"}`, "pix", "PT1M"},
			{`{"cryptoCurrency":"USDC","chain":84532,"fiatCurrency":"EUR","country":"US","cryptoAmount":"1000"}`, "swift", "P3D"},
			{`{"cryptoCurrency":"USDC","chain":84532,"fiatCurrency":"GBP","country":"DE","cryptoAmount":"1000"}`, "swift", "P3D"},
			{`{"cryptoCurrency":"USDC","chain":84532,"fiatCurrency":"EUR","country":"DE","fiatAmount":"500000"}`, "sepa", "P1D"},
			{`{"cryptoCurrency":"USDC","chain":84532,"fiatCurrency":"USD","country":"US","fiatAmount":"50"}`, "ach", "P1D"},
		}
		for _, tt := range tests {
			q := checkQuote(t, s.post(path, acme, tt.body))
			if q.Rail != tt.rail || q.Settlement != tt.settlement {
				t.Errorf("%s: rail %s/%s, want %s/%s", tt.body, q.Rail, q.Settlement, tt.rail, tt.settlement)
			}
		}
	})

	t.Run("refuses each error row of the contract", func(t *testing.T) {
		tests := []struct {
			name, key, body string
			status          int
			code, message   string
		}{
			{"both amounts", acme, `{"cryptoCurrency":"USDC","chain":84532,"fiatCurrency":"EUR","country":"DE","cryptoAmount":"1","fiatAmount":"1"}`,
				400, "invalid_request", "Send exactly one of cryptoAmount and fiatAmount, not both."},
			{"neither amount", acme, `{"cryptoCurrency":"USDC","chain":84532,"fiatCurrency":"EUR","country":"DE"}`,
				400, "invalid_request", "Send exactly one of cryptoAmount and fiatAmount."},
			{"chain not in the catalogue", acme, `{"cryptoCurrency":"USDC","chain":1,"fiatCurrency":"EUR","country":"DE","cryptoAmount":"1"}`,
				400, "invalid_request", "chain 1 is not in this deployment's catalogue; see GET /v1/currencies."},
			{"token not on the chain", acme, `{"cryptoCurrency":"USDT","chain":84532,"fiatCurrency":"EUR","country":"DE","cryptoAmount":"1"}`,
				400, "invalid_request", "cryptoCurrency is not a token on chain 84532; see GET /v1/currencies."},
			{"country not a known alpha-2 code", acme, `{"cryptoCurrency":"USDC","chain":84532,"fiatCurrency":"EUR","country":"ZZ","cryptoAmount":"1"}`,
				400, "invalid_request", "country must be a known ISO 3166-1 alpha-2 country code."},
			{"country alias UK is not the code GB", acme, `{"cryptoCurrency":"USDC","chain":84532,"fiatCurrency":"GBP","country":"UK","cryptoAmount":"1"}`,
				400, "invalid_request", "country must be a known ISO 3166-1 alpha-2 country code."},
			{"fiatCurrency not three letters", acme, `{"cryptoCurrency":"USDC","chain":84532,"fiatCurrency":"EURO","country":"DE","cryptoAmount":"1"}`,
				400, "invalid_request", "fiatCurrency must be an ISO 4217 code of three letters."},
			{"a three-letter code no rail serves is no_route (the spec's table)", acme, `{"cryptoCurrency":"USDC","chain":84532,"fiatCurrency":"XYZ","country":"DE","cryptoAmount":"1"}`,
				400, "no_route", "No payout rail serves XYZ to DE; see GET /v1/limits."},
			{"AAA is no_route too", acme, `{"cryptoCurrency":"USDC","chain":84532,"fiatCurrency":"aaa","country":"DE","cryptoAmount":"1"}`,
				400, "no_route", "No payout rail serves AAA to DE; see GET /v1/limits."},
			{"a forced rail outside its limits", acme, `{"cryptoCurrency":"USDC","chain":84532,"fiatCurrency":"EUR","country":"DE","fiatAmount":"500000","rail":"sepa_instant"}`,
				400, "no_route", "The forced rail sepa_instant takes 1 to 100000 EUR per payout; this payout is 500000 EUR; see GET /v1/limits."},
			{"an amount no rail takes", acme, `{"cryptoCurrency":"USDC","chain":84532,"fiatCurrency":"EUR","country":"DE","fiatAmount":"0.5"}`,
				400, "no_route", "No payout rail takes 0.5 EUR to DE: the rails that serve it take 1 to 1000000 EUR per payout; see GET /v1/limits."},
			{"a crypto amount is converted for the rail's limits", acme, `{"cryptoCurrency":"USDC","chain":84532,"fiatCurrency":"EUR","country":"US","cryptoAmount":"50"}`,
				400, "no_route", "No payout rail takes 46.3 EUR to US: the rails that serve it take 100 to 10000000 EUR per payout; see GET /v1/limits."},
			{"field names match exactly: CHAIN is unknown", acme, `{"cryptoCurrency":"USDC","CHAIN":84532,"fiatCurrency":"EUR","country":"DE","cryptoAmount":"1"}`,
				400, "invalid_request", `Unknown field "CHAIN".`},
			{"cryptoamount is not cryptoAmount", acme, `{"cryptoCurrency":"USDC","chain":84532,"fiatCurrency":"EUR","country":"DE","cryptoamount":"1"}`,
				400, "invalid_request", `Unknown field "cryptoamount".`},
			{"a name given twice", acme, `{"cryptoCurrency":"USDC","chain":84532,"chain":11155111,"fiatCurrency":"EUR","country":"DE","cryptoAmount":"1"}`,
				400, "invalid_request", `Field "chain" is given twice.`},
			{"null is not an omitted field", acme, `{"cryptoCurrency":"USDC","chain":84532,"fiatCurrency":"EUR","country":"DE","cryptoAmount":"1","fiatAmount":null}`,
				400, "invalid_request", `Field "fiatAmount" must not be null; leave it out instead.`},
			{"amount not a decimal string", acme, `{"cryptoCurrency":"USDC","chain":84532,"fiatCurrency":"EUR","country":"DE","cryptoAmount":"1e3"}`,
				400, "invalid_request", `cryptoAmount must be a decimal string in major units greater than zero, such as "100.50".`},
			{"amount as a JSON number", acme, `{"cryptoCurrency":"USDC","chain":84532,"fiatCurrency":"EUR","country":"DE","cryptoAmount":100}`,
				400, "invalid_request", `Field "cryptoAmount" must be a string.`},
			{"chain as a string", acme, `{"cryptoCurrency":"USDC","chain":"84532","fiatCurrency":"EUR","country":"DE","cryptoAmount":"1"}`,
				400, "invalid_request", `Field "chain" must be an integer.`},
			{"chain with a fraction", acme, `{"cryptoCurrency":"USDC","chain":1.5,"fiatCurrency":"EUR","country":"DE","cryptoAmount":"1"}`,
				400, "invalid_request", `Field "chain" must be an integer.`},
			{"chain in exponent notation", acme, `{"cryptoCurrency":"USDC","chain":1e3,"fiatCurrency":"EUR","country":"DE","cryptoAmount":"1"}`,
				400, "invalid_request", `Field "chain" must be an integer.`},
			{"chain above 2^53-1", acme, `{"cryptoCurrency":"USDC","chain":9007199254740992,"fiatCurrency":"EUR","country":"DE","cryptoAmount":"1"}`,
				400, "invalid_request", "chain must be a positive integer no greater than 9007199254740991."},
			{"chain zero", acme, `{"cryptoCurrency":"USDC","chain":0,"fiatCurrency":"EUR","country":"DE","cryptoAmount":"1"}`,
				400, "invalid_request", "chain is required: a positive integer chain id."},
			{"negative chain", acme, `{"cryptoCurrency":"USDC","chain":-5,"fiatCurrency":"EUR","country":"DE","cryptoAmount":"1"}`,
				400, "invalid_request", "chain must be a positive integer no greater than 9007199254740991."},
			{"unknown field", acme, `{"cryptoCurrency":"USDC","chain":84532,"fiatCurrency":"EUR","country":"DE","cryptoAmount":"1","memo":"x"}`,
				400, "invalid_request", `Unknown field "memo".`},
			{"body not JSON", acme, `{"cryptoCurrency":`, 400, "invalid_request", "Request body is not valid JSON."},
			{"no rail serves the currency", acme, `{"cryptoCurrency":"USDC","chain":84532,"fiatCurrency":"JPY","country":"JP","cryptoAmount":"1"}`,
				400, "no_route", "No payout rail serves JPY to JP; see GET /v1/limits."},
			{"the forced rail does not serve it", acme, `{"cryptoCurrency":"USDC","chain":84532,"fiatCurrency":"EUR","country":"DE","cryptoAmount":"1","rail":"pix"}`,
				400, "no_route", "The forced rail does not serve EUR to DE; see GET /v1/limits."},
			{"an unknown forced rail", acme, `{"cryptoCurrency":"USDC","chain":84532,"fiatCurrency":"EUR","country":"DE","cryptoAmount":"1","rail":"telegraph"}`,
				400, "no_route", "The forced rail does not serve EUR to DE; see GET /v1/limits."},
			{"key lacks the bank product", fiatOnly, `{"cryptoCurrency":"USDC","chain":84532,"fiatCurrency":"EUR","country":"DE","cryptoAmount":"1"}`,
				403, "permission_denied", "This key does not carry the bank product."},
			{"key not enabled for the source chain", sepoliaOnly, `{"cryptoCurrency":"USDC","chain":84532,"fiatCurrency":"EUR","country":"DE","cryptoAmount":"1"}`,
				403, "chain_not_allowed", "This key is not enabled for chain 84532 as a source."},
			{"chain_not_allowed comes after the catalogue checks", sepoliaOnly, `{"cryptoCurrency":"USDT","chain":84532,"fiatCurrency":"EUR","country":"DE","cryptoAmount":"1"}`,
				400, "invalid_request", "cryptoCurrency is not a token on chain 84532; see GET /v1/currencies."},
			{"no_route comes after chain_not_allowed", sepoliaOnly, `{"cryptoCurrency":"USDC","chain":84532,"fiatCurrency":"JPY","country":"JP","cryptoAmount":"1"}`,
				403, "chain_not_allowed", "This key is not enabled for chain 84532 as a source."},
			{"unauthorized: unknown key", "pk_" + strings.Repeat("A", 43), `{}`, 401, "unauthorized", "Missing, malformed or unknown API key."},
		}
		for _, tt := range tests {
			t.Run(tt.name, func(t *testing.T) {
				r := s.post(path, tt.key, tt.body)
				if r.Status != tt.status || r.Body != errorBody(tt.code, tt.message) {
					t.Fatalf("got %d %s\nwant %d %s", r.Status, r.Body, tt.status, errorBody(tt.code, tt.message))
				}
			})
		}
	})

	t.Run("an upstream that is down is a 500 internal with no detail", func(t *testing.T) {
		s.Services["payout"].Stop()
		r := s.post(path, acme, `{"cryptoCurrency":"USDC","chain":84532,"fiatCurrency":"EUR","country":"DE","cryptoAmount":"10"}`)
		want := errorBody("internal", "Internal error; it has been logged.")
		if r.Status != 500 || r.Body != want {
			t.Fatalf("got %d %s, want 500 %s", r.Status, r.Body, want)
		}
		if !s.logged(`"msg":"upstream failed","service":"gateway","upstream":"payout","err":"dial tcp`) {
			t.Error("the gateway did not log the upstream failure's detail")
		}
		if err := s.Services["payout"].Start(); err != nil {
			t.Fatal(err)
		}
	})
}

func TestQuoteTTLIsConfigurable(t *testing.T) {
	s := startStack(t, withEnv("QUOTE_TTL", "5s"))
	key := s.issue("acme", "--products", "bank", "--source-chains", "84532")
	before := time.Now().UTC()
	q := checkQuote(t, s.post("/v1/bank/payout/quote", key, `{"cryptoCurrency":"USDC","chain":84532,"fiatCurrency":"EUR","country":"DE","cryptoAmount":"10"}`))
	if d := q.ExpiresAt.Sub(before); d < 3*time.Second || d > 7*time.Second {
		t.Errorf("expiresAt is %s from now, want QUOTE_TTL=5s", d)
	}
}
