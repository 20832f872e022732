package e2e

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	partnerapi "github.com/partnerpay/api/clients/go"
)

// The off-ramp end to end, as a partner integrates it through the generated
// client: for each rail family, a quote, its payout to that rail's
// beneficiary, the sandbox deposit of the stablecoins, and polling until
// the payout lands; then one that fails and one that comes back, each with
// its reason. No whole account number reaches a log.

// railCase is a payout on one rail: the quote, and the beneficiary that
// rail takes.
type railCase struct {
	rail        partnerapi.RailName
	quote       partnerapi.BankPayoutQuoteJSONRequestBody
	beneficiary func(*partnerapi.BankPayoutRequest_Beneficiary) error
	account     string // the whole account identifier: never in a log
	masked      string
}

var usAddress = partnerapi.Address{Line1: "1 Main St", City: "Springfield", PostalCode: "62701", Country: "US"}

func railCases() []railCase {
	q := func(fiat, country, amount string, rail *partnerapi.RailName) partnerapi.BankPayoutQuoteJSONRequestBody {
		body := partnerapi.BankPayoutQuoteJSONRequestBody{CryptoCurrency: "USDC", Chain: 84532, FiatCurrency: fiat, Country: country, FiatAmount: ptr(amount)}
		if rail != nil {
			body.Rail = ptr(string(*rail))
		}
		return body
	}
	return []railCase{
		{partnerapi.SepaInstant, q("EUR", "DE", "250", nil), func(b *partnerapi.BankPayoutRequest_Beneficiary) error {
			return b.FromSepaBeneficiary(partnerapi.SepaBeneficiary{Name: "Ada Lovelace", Iban: "DE89370400440532013000", Bic: ptr("DEUTDEFF")})
		}, "DE89370400440532013000", "3000"},
		{partnerapi.Sepa, q("EUR", "FR", "250", ptr(partnerapi.Sepa)), func(b *partnerapi.BankPayoutRequest_Beneficiary) error {
			return b.FromSepaBeneficiary(partnerapi.SepaBeneficiary{Name: "Émilie du Châtelet", Iban: "FR14 2004 1010 0505 0001 3M02 606"})
		}, "FR1420041010050500013M02606", "2606"},
		{partnerapi.FasterPayments, q("GBP", "GB", "250", nil), func(b *partnerapi.BankPayoutRequest_Beneficiary) error {
			return b.FromFasterPaymentsBeneficiary(partnerapi.FasterPaymentsBeneficiary{Name: "Alice Liddell", SortCode: "60-16-13", AccountNumber: "31926819"})
		}, "31926819", "6819"},
		{partnerapi.Ach, q("USD", "US", "250", ptr(partnerapi.Ach)), func(b *partnerapi.BankPayoutRequest_Beneficiary) error {
			return b.FromAchBeneficiary(partnerapi.AchBeneficiary{Name: "Grace Hopper", RoutingNumber: "021000021", AccountNumber: "000123456789", AccountType: partnerapi.Checking})
		}, "000123456789", "6789"},
		{partnerapi.Wire, q("USD", "US", "2500", nil), func(b *partnerapi.BankPayoutRequest_Beneficiary) error {
			return b.FromWireBeneficiary(partnerapi.WireBeneficiary{Name: "Grace Hopper", RoutingNumber: "011000015", AccountNumber: "0009876543210", Address: usAddress})
		}, "0009876543210", "3210"},
		{partnerapi.Spei, q("MXN", "MX", "2500", nil), func(b *partnerapi.BankPayoutRequest_Beneficiary) error {
			return b.FromSpeiBeneficiary(partnerapi.SpeiBeneficiary{Name: "Frida Kahlo", Clabe: "032180000118359719"})
		}, "032180000118359719", "9719"},
		{partnerapi.Pix, q("BRL", "BR", "500", nil), func(b *partnerapi.BankPayoutRequest_Beneficiary) error {
			return b.FromPixBeneficiary(partnerapi.PixBeneficiary{Name: "Ana Souza", PixKey: "ana.souza@example.com.br", TaxId: "52998224725"})
		}, "ana.souza@example.com.br", "m.br"},
		{partnerapi.Swift, q("USD", "JP", "2500", nil), func(b *partnerapi.BankPayoutRequest_Beneficiary) error {
			return b.FromSwiftBeneficiary(partnerapi.SwiftBeneficiary{Name: "Hideki Yukawa", Bic: "MHCBJPJT", AccountNumber: ptr("7712345678"),
				Address: partnerapi.Address{Line1: "1-1 Marunouchi", City: "Tokyo", PostalCode: "100-0005", Country: "JP"}})
		}, "7712345678", "5678"},
	}
}

// payoutTo quotes and executes rc, and returns the payout.
func payoutTo(t *testing.T, c *partnerapi.ClientWithResponses, rc railCase, reference string) partnerapi.BankPayout {
	t.Helper()
	ctx := context.Background()
	q, err := c.BankPayoutQuoteWithResponse(ctx, nil, rc.quote)
	if err != nil || q.JSON200 == nil || q.JSON200.Rail != rc.rail {
		t.Fatalf("%s quote: %v %s", rc.rail, err, q.Body)
	}
	body := partnerapi.BankPayoutJSONRequestBody{QuoteId: q.JSON200.QuoteId, Reference: ptr(reference)}
	if err := rc.beneficiary(&body.Beneficiary); err != nil {
		t.Fatal(err)
	}
	p, err := c.BankPayoutWithResponse(ctx, &partnerapi.BankPayoutParams{IdempotencyKey: ptr("pay-" + q.JSON200.QuoteId)}, body)
	if err != nil || p.JSON200 == nil {
		t.Fatalf("%s payout: %v %d %s", rc.rail, err, p.StatusCode(), p.Body)
	}
	got := *p.JSON200
	if got.Status != partnerapi.PayoutStatusValueAwaitingDeposit || got.Rail != rc.rail || got.QuoteId != q.JSON200.QuoteId ||
		got.Beneficiary.Account != rc.masked || got.Reference == nil || *got.Reference != reference ||
		got.Deposit.Chain != 84532 || got.Deposit.CryptoCurrency != "USDC" || got.Deposit.Token != "0x036CbD53842c5426634e7929541eC2318f3dCF7e" ||
		got.Deposit.Amount != "1234567.89" || !strings.HasPrefix(got.Deposit.Address, "0x") || time.Until(got.Deposit.ExpiresAt) < 29*time.Minute {
		t.Fatalf("%s payout: %s", rc.rail, p.Body)
	}
	if strings.Contains(string(p.Body), rc.account) {
		t.Errorf("%s: the whole account left in the answer: %s", rc.rail, p.Body)
	}
	return got
}

// pollUntil polls a payout's status until it is final (or completed when
// stopAtCompleted), and returns it.
func pollUntil(t *testing.T, c *partnerapi.ClientWithResponses, payoutID string, want partnerapi.PayoutStatusValue) partnerapi.BankPayoutStatus {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		st, err := c.BankPayoutStatusWithResponse(context.Background(), partnerapi.BankPayoutStatusJSONRequestBody{PayoutId: payoutID})
		if err != nil || st.JSON200 == nil {
			t.Fatalf("status: %v %s", err, st.Body)
		}
		if st.JSON200.Status == want {
			return *st.JSON200
		}
		if time.Now().After(deadline) {
			t.Fatalf("payout %s still %s after 30s, want %s", payoutID, st.JSON200.Status, want)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func historyOf(st partnerapi.BankPayoutStatus) string {
	var s []string
	for _, h := range st.History {
		s = append(s, string(h.Status))
	}
	return strings.Join(s, ",")
}

func TestEveryRailCanBePaidAndLands(t *testing.T) {
	s := startStack(t)
	key := s.issue("acme", "--products", "bank", "--source-chains", "84532", "--rate", "1000", "--max-execution-usd", "1000000")
	c := newClient(t, s, key)
	ctx := context.Background()
	cases := railCases()
	for i, rc := range cases {
		t.Run(string(rc.rail), func(t *testing.T) {
			p := payoutTo(t, c, rc, fmt.Sprintf("invoice-%d", i))
			d, err := c.SandboxPayoutDepositWithResponse(ctx, nil, partnerapi.SandboxPayoutDepositJSONRequestBody{PayoutId: p.PayoutId})
			if err != nil || d.JSON200 == nil || d.JSON200.Status != partnerapi.PayoutStatusValueAwaitingDeposit || len(d.JSON200.TxHash) != 66 {
				t.Fatalf("deposit: %v %s", err, d.Body)
			}
			st := pollUntil(t, c, p.PayoutId, partnerapi.PayoutStatusValueCompleted)
			if historyOf(st) != "awaiting_deposit,processing,completed" || st.CompletedAt == nil || st.FailureReason != nil || st.ReturnReason != nil ||
				st.Beneficiary.Account != rc.masked {
				t.Fatalf("completed: %+v", st)
			}
			// A chain cannot refuse a transfer: a second deposit is refunded.
			again, _ := c.SandboxPayoutDepositWithResponse(ctx, nil, partnerapi.SandboxPayoutDepositJSONRequestBody{PayoutId: p.PayoutId})
			if again.JSON200 == nil || again.JSON200.TxHash == *st.DepositTxHash {
				t.Fatalf("a second deposit: %d %s", again.StatusCode(), again.Body)
			}
			var later partnerapi.BankPayoutStatus
			if !eventually(30*time.Second, func() bool {
				r, err := c.BankPayoutStatusWithResponse(ctx, partnerapi.BankPayoutStatusJSONRequestBody{PayoutId: p.PayoutId})
				if err != nil || r.JSON200 == nil {
					return false
				}
				later = *r.JSON200
				return len(later.Refunds) == 1
			}) || later.Status != partnerapi.PayoutStatusValueCompleted || later.Refunds[0].Reason != partnerapi.PayoutRefundReasonDepositUnexpected {
				t.Errorf("a second deposit: %+v, want the payout completed and the deposit refunded (deposit_unexpected)", later)
			}
		})
	}
	for _, outcome := range []struct {
		outcome partnerapi.SandboxPayoutDepositRequestOutcome
		reason  string
		final   partnerapi.PayoutStatusValue
		history string
	}{
		{"failed", "account_not_found", partnerapi.PayoutStatusValueFailed, "awaiting_deposit,processing,failed"},
		{"returned", "beneficiary_deceased", partnerapi.PayoutStatusValueReturned, "awaiting_deposit,processing,completed,returned"},
	} {
		t.Run(string(outcome.outcome), func(t *testing.T) {
			p := payoutTo(t, c, cases[0], "invoice-"+string(outcome.outcome))
			d, err := c.SandboxPayoutDepositWithResponse(ctx, &partnerapi.SandboxPayoutDepositParams{IdempotencyKey: ptr("dep-" + string(outcome.outcome))},
				partnerapi.SandboxPayoutDepositJSONRequestBody{PayoutId: p.PayoutId, Outcome: &outcome.outcome, Reason: ptr(outcome.reason)})
			if err != nil || d.JSON200 == nil {
				t.Fatalf("deposit: %v %s", err, d.Body)
			}
			st := pollUntil(t, c, p.PayoutId, outcome.final)
			reason := st.FailureReason
			if outcome.final == partnerapi.PayoutStatusValueReturned {
				reason = nil
				if st.ReturnReason != nil {
					reason = (*partnerapi.PayoutFailureReason)(st.ReturnReason)
				}
			}
			if historyOf(st) != outcome.history || reason == nil || string(*reason) != outcome.reason {
				t.Fatalf("%s: %+v", outcome.outcome, st)
			}
		})
	}
	t.Run("another key's payout, an unknown one and a malformed id are 404 payout_not_found", func(t *testing.T) {
		p := payoutTo(t, c, cases[0], "invoice-private")
		other := newClient(t, s, s.issue("globex", "--products", "bank", "--source-chains", "84532", "--rate", "1000"))
		for _, id := range []string{p.PayoutId, "bpo_00000000000000000000000000000000", "bpo_" + strings.Repeat("x", 900)} {
			r, _ := other.BankPayoutStatusWithResponse(ctx, partnerapi.BankPayoutStatusJSONRequestBody{PayoutId: id})
			if r.JSON404 == nil {
				t.Fatalf("%.40s: %d %s", id, r.StatusCode(), r.Body)
			}
			wantError(t, "status of "+id[:12], r.HTTPResponse, r.Body, 404, string(r.JSON404.Error.Code), "payout_not_found", "No payout with this payoutId exists for this key.")
		}
	})
	// Account numbers are personal data: the logs of the whole stack hold
	// none whole (nor the partner's references), as card numbers are held.
	logs := s.logs.String()
	for _, rc := range cases {
		if strings.Contains(logs, rc.account) {
			t.Errorf("the %s account %s reached the logs", rc.rail, rc.account)
		}
	}
	if strings.Contains(logs, "invoice-") {
		t.Error("a partner's reference reached the logs")
	}
}
