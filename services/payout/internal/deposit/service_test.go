package deposit

import (
	"context"
	"regexp"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/partnerpay/api/pkg/envelope"
	"github.com/partnerpay/api/pkg/environment"
	"github.com/partnerpay/api/pkg/partner"
	"github.com/partnerpay/api/services/payout/internal/quote"
	"github.com/partnerpay/api/testkit/redistest"
)

const (
	baseUSDC    = "0x036CbD53842c5426634e7929541eC2318f3dCF7e"
	baseEURC    = "0x808456652fdb597867f38412077A9182bf77359F"
	sepoliaUSDC = "0x1c7D4B196Cb0C7B01d743Fbc6116a902379C7238"
	sepoliaEURC = "0x08210F9170F89Ab7658F0B5E3fF39b0E03C594D4"
	wallet      = "0x5aAeb6053F3E94C9b9A09f33669435E7Ef1BeAed"
)

var acme = partner.Caller{KeyID: "acme", Grants: partner.Grants{
	Products:        []string{"deposit"},
	Chains:          partner.Chains{Source: []int64{84532, 11155111}, Destination: []int64{84532, 11155111}},
	Tokens:          map[string][]string{"84532": {baseUSDC, baseEURC}, "11155111": {sepoliaUSDC, sepoliaEURC}},
	MaxExecutionUSD: "25000",
}}

func newService(t testing.TB) Service {
	t.Helper()
	rs := redistest.Start(t)
	rdb := redis.NewClient(&redis.Options{Addr: rs.Addr})
	t.Cleanup(func() { rdb.Close() })
	return NewService(environment.Sandbox, time.Minute, quote.NewBook(rdb, []byte("quote-secret-0123456789"), time.Now))
}

func req(srcChain int64, srcToken string, dstChain int64, dstToken, amount string) QuoteRequest {
	return QuoteRequest{Source: &Side{Address: wallet, Chain: srcChain, Token: srcToken},
		Destination: &Side{Address: wallet, Chain: dstChain, Token: dstToken}, Amount: amount, Method: "crypto"}
}

func TestDepositQuote(t *testing.T) {
	t.Parallel()
	svc := newService(t)
	r := req(84532, "0x036cbd53842c5426634e7929541ec2318f3dcf7e", 11155111, sepoliaUSDC, "1000000")
	r.Source.Address = "0x5aaeb6053f3e94c9b9a09f33669435e7ef1beaed"
	q, err := svc.Quote(context.Background(), acme, r)
	if err != nil {
		t.Fatal(err)
	}
	if !regexp.MustCompile(`^dq_84532_[0-9a-f]{32}$`).MatchString(q.QuoteID) {
		t.Errorf("quote id %s", q.QuoteID)
	}
	want := Quote{Mock: true, QuoteID: q.QuoteID,
		Source:      Side{Address: wallet, Chain: 84532, Token: baseUSDC},
		Destination: Side{Address: wallet, Chain: 11155111, Token: sepoliaUSDC},
		Method:      "crypto", AmountIn: "1000000", AmountOut: MockFigure, Fee: MockFigure,
		EstimatedSettlement: Settlement, ExpiresAt: q.ExpiresAt}
	if q != want {
		t.Fatalf("quote\n got %+v\nwant %+v (addresses echoed checksummed)", q, want)
	}
	// Every request opens a new quote (DESIGN §5, as the payout quote's).
	if again, _ := svc.Quote(context.Background(), acme, req(84532, baseUSDC, 11155111, sepoliaUSDC, "1000000")); again.QuoteID == q.QuoteID {
		t.Errorf("the same request again: %s, want a new quote", again.QuoteID)
	}
}

// Each check of DESIGN §5, in its order: a request that fails several
// checks gets the first one's answer.
func TestDepositChecksInOrder(t *testing.T) {
	t.Parallel()
	svc := newService(t)
	noDest := acme
	noDest.Grants.Chains.Destination = []int64{84532}
	noToken := acme
	noToken.Grants.Tokens = map[string][]string{"84532": {baseEURC}, "11155111": {sepoliaUSDC}}
	small := acme
	small.Grants.MaxExecutionUSD = "100"
	badSum := req(84532, baseUSDC, 11155111, sepoliaUSDC, "1")
	badSum.Destination.Address = "0x5AAeb6053F3E94C9b9A09f33669435E7Ef1BeAed"
	noSource := req(84532, baseUSDC, 11155111, sepoliaUSDC, "1")
	noSource.Source = nil
	otherMethod := req(84532, baseUSDC, 11155111, sepoliaUSDC, "1")
	otherMethod.Method = "card"
	for _, tt := range []struct {
		name   string
		caller partner.Caller
		req    QuoteRequest
		code   envelope.Code
		msg    string
	}{
		{"no source", acme, noSource, "invalid_request", "source is required: the address, chain and token the stablecoins are sent from."},
		{"a bad checksum", acme, badSum, "invalid_request", "destination.address must be 0x followed by 40 hex digits, with a valid EIP-55 checksum if it is mixed-case."},
		{"an amount with a decimal point", acme, req(84532, baseUSDC, 11155111, sepoliaUSDC, "1.5"), "invalid_request", `amount must be an integer string in the token's smallest unit greater than zero, such as "1000000".`},
		{"a method other than crypto", acme, otherMethod, "invalid_request", `method must be "crypto": the deposit is sent from a wallet.`},
		{"a chain not in the catalogue beats the key's chains", noDest, req(1, baseUSDC, 11155111, sepoliaUSDC, "1"), "invalid_request", "source.chain 1 is not in this deployment's catalogue; see GET /v1/currencies."},
		{"a token not on its chain", acme, req(84532, baseUSDC, 11155111, baseEURC, "1"), "invalid_request", "destination.token 0x808456652fdb597867f38412077A9182bf77359F is not a token on chain 11155111; see GET /v1/currencies."},
		{"the key's destination chain", noDest, req(84532, baseUSDC, 11155111, sepoliaUSDC, "1"), "chain_not_allowed", "This key is not enabled for chain 11155111 as a destination."},
		{"the key's tokens", noToken, req(84532, baseUSDC, 11155111, sepoliaUSDC, "1"), "token_not_allowed", "This key is not enabled for token 0x036CbD53842c5426634e7929541eC2318f3dCF7e on chain 84532 as a source; see crypto.tokens in GET /v1/config."},
		{"tokens come before the route", noToken, req(84532, baseUSDC, 11155111, sepoliaEURC, "1"), "token_not_allowed", "This key is not enabled for token 0x036CbD53842c5426634e7929541eC2318f3dCF7e on chain 84532 as a source; see crypto.tokens in GET /v1/config."},
		{"USDC to EURC", acme, req(84532, baseUSDC, 11155111, sepoliaEURC, "1"), "no_route", "There is no route from USDC to EURC: a deposit delivers the same currency on another chain."},
		{"the same chain and token on both sides", acme, req(84532, baseUSDC, 84532, baseUSDC, "1"), "no_route", "Source and destination are the same token on the same chain: there is nothing to move."},
		{"over the ceiling", small, req(84532, baseUSDC, 11155111, sepoliaUSDC, "100000001"), "execution_capped", "This deposit is worth more than the key's maxExecutionUsd of 100 USD at the reference rates of GET /v1/rates."},
		{"EURC counts at the EUR reference rate", small, req(84532, baseEURC, 11155111, sepoliaEURC, "93000000"), "execution_capped", "This deposit is worth more than the key's maxExecutionUsd of 100 USD at the reference rates of GET /v1/rates."},
		{"at the ceiling", small, req(84532, baseUSDC, 11155111, sepoliaUSDC, "100000000"), "", ""},
	} {
		t.Run(tt.name, func(t *testing.T) {
			_, err := svc.Quote(context.Background(), tt.caller, tt.req)
			if tt.code == "" {
				if err != nil {
					t.Fatal(err)
				}
				return
			}
			e, _ := envelope.From(err)
			if e.Code != tt.code || e.Message != tt.msg {
				t.Fatalf("got %s %q\nwant %s %q", e.Code, e.Message, tt.code, tt.msg)
			}
		})
	}
}
