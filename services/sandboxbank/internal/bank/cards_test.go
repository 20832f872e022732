package bank

import (
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/partnerpay/api/pkg/bankprovider"
)

func cardOrderIn(direction string, now time.Time) bankprovider.NewCardOrder {
	return bankprovider.NewCardOrder{Reference: "ord_1", Direction: direction, CryptoCurrency: "USDC", Chain: 84532,
		WalletAddress: "0x1111111111111111111111111111111111111111", FiatCurrency: "EUR", Country: "DE", FiatAmount: "100",
		PaymentMethods: []string{"card", "apple_pay"}, ExpiresAt: now.Add(30 * time.Minute).Format(time.RFC3339)}
}

// openCard opens an order and mints a link for it.
func openCard(t *testing.T, b *Bank, direction string) (bankprovider.CardOrder, bankprovider.CardSession) {
	t.Helper()
	o, created, err := b.CreateCardOrder(cardOrderIn(direction, b.now()), "")
	if err != nil || !created {
		t.Fatalf("open: %v", err)
	}
	s, err := b.CreateCardSession(o.ID, "http://gw.test/orders/return?state=abc")
	if err != nil {
		t.Fatal(err)
	}
	return o, s
}

// waitStatus polls the order until it reaches want.
func waitStatus(t *testing.T, b *Bank, id, want string) bankprovider.CardOrder {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		o, _ := b.CardOrder(id)
		if o.Status == want || time.Now().After(deadline) {
			if o.Status != want {
				t.Fatalf("order %s is %s, want %s", id, o.Status, want)
			}
			return o
		}
		time.Sleep(5 * time.Millisecond)
	}
}

var card4242 = CardEntry{Method: "card", Number: "4242 4242 4242 4242", Expiry: "12/39", CVC: "123"}

func TestTestCardsHaveTheirOutcomes(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		number, status, reason string
	}{
		{"4242424242424242", cardProcessing, ""},
		{"4000 0000 0000 0002", cardFailed, reasonDeclined},
		{"4000-0000-0000-9995", cardFailed, reasonFunds},
		{"4000000000000069", cardFailed, reasonExpiredCard},
	} {
		b := newBank(&clock{time.Now()})
		o, s := openCard(t, b, "buy")
		e := card4242
		e.Number = c.number
		p := b.PayByCard(s.ID, e)
		if p.redirect != "http://gw.test/orders/return?state=abc" {
			t.Fatalf("%s: %+v", c.number, p)
		}
		got, _ := b.CardOrder(o.ID)
		if got.Status != c.status || got.FailureReason != c.reason || got.PaymentMethod != "card" {
			t.Errorf("%s: %+v", c.number, got)
		}
		if c.status == cardProcessing {
			if done := waitStatus(t, b, o.ID, cardCompleted); !strings.HasPrefix(done.TxHash, "0x") || len(done.TxHash) != 66 {
				t.Errorf("settled without a tx hash: %+v", done)
			}
		}
		if again := b.PayByCard(s.ID, card4242); again.Status != 410 || again.redirect != "" {
			t.Errorf("%s: a used link took a second payment: %+v", c.number, again)
		}
	}
}

func TestMistakesAreShownAndChangeNothing(t *testing.T) {
	t.Parallel()
	b := newBank(&clock{time.Date(2026, 11, 26, 12, 0, 0, 0, time.UTC)})
	o, s := openCard(t, b, "buy")
	for _, c := range []struct {
		entry CardEntry
		want  string
	}{
		{CardEntry{Method: "card", Number: "4242 4242 4242 4241", Expiry: "12/39", CVC: "123"}, "Check the card number."},
		{CardEntry{Method: "card", Number: "42", Expiry: "12/39", CVC: "123"}, "Check the card number."},
		{CardEntry{Method: "card", Number: "4242424242424242", Expiry: "13/39", CVC: "123"}, "Enter the expiry as MM/YY."},
		{CardEntry{Method: "card", Number: "4242424242424242", Expiry: "10/26", CVC: "123"}, "This card has expired: check the expiry date."},
		{CardEntry{Method: "card", Number: "4242424242424242", Expiry: "12/39", CVC: "12"}, "Enter the 3 or 4 digit security code."},
		{CardEntry{Method: "card", Number: "5555555555554444", Expiry: "12/39", CVC: "123"}, "This is the sandbox: no real card is charged. Use a test card, such as 4242 4242 4242 4242."},
		{CardEntry{Method: "apple_pay", Token: "tok_forged"}, "Apple Pay is not available for this order."},
		{CardEntry{Method: "bitcoin"}, "Choose how to pay."},
	} {
		p := b.PayByCard(s.ID, c.entry)
		if p.Status != 422 || p.FormError != c.want || p.redirect != "" {
			t.Errorf("%+v: %+v", c.entry, p)
		}
	}
	if got, _ := b.CardOrder(o.ID); got.Status != cardAwaitingPayment || got.PaymentMethod != "" {
		t.Errorf("a mistake moved the order: %+v", got)
	}
	if p := b.PayByCard(s.ID, card4242); p.redirect == "" {
		t.Errorf("the link no longer works after mistakes: %+v", p)
	}
}

func TestThreeDSecureStep(t *testing.T) {
	t.Parallel()
	for _, approve := range []bool{true, false} {
		b := newBank(&clock{time.Now()})
		o, s := openCard(t, b, "buy")
		e := card4242
		e.Number = "4000000000003220"
		if p := b.PayByCard(s.ID, e); !p.Challenge || p.redirect != "" || p.Status != 200 {
			t.Fatalf("the 3DS card: %+v", p)
		}
		if p := b.PayByCard(s.ID, card4242); p.Status != 409 {
			t.Errorf("a second card while the step waits: %+v", p)
		}
		if got, _ := b.CardOrder(o.ID); got.Status != cardAwaitingPayment {
			t.Errorf("the step moved the order: %+v", got)
		}
		p := b.Authenticate(s.ID, approve)
		got, _ := b.CardOrder(o.ID)
		switch {
		case p.redirect == "":
			t.Errorf("approve=%v: %+v", approve, p)
		case approve && got.Status != cardProcessing:
			t.Errorf("approved: %+v", got)
		case !approve && (got.Status != cardFailed || got.FailureReason != reasonAuthentication):
			t.Errorf("failed: %+v", got)
		}
	}
	b := newBank(&clock{time.Now()})
	_, s := openCard(t, b, "buy")
	if p := b.Authenticate(s.ID, true); p.Status != 409 || p.redirect != "" {
		t.Errorf("a 3DS answer with no step waiting: %+v", p)
	}
}

func TestApplePayAndItsAbsenceOnASell(t *testing.T) {
	t.Parallel()
	b := newBank(&clock{time.Now()})
	o, s := openCard(t, b, "buy")
	if p := b.CardPageFor(s.ID); !p.ApplePay {
		t.Fatalf("a buy in a corridor with Apple Pay: %+v", p)
	}
	if p := b.PayByCard(s.ID, CardEntry{Method: "apple_pay", Token: ApplePayToken}); p.redirect == "" {
		t.Fatalf("Apple Pay: %+v", p)
	}
	if got := waitStatus(t, b, o.ID, cardCompleted); got.PaymentMethod != "apple_pay" {
		t.Errorf("%+v", got)
	}
	_, sell := openCard(t, b, "sell")
	if p := b.PayByCard(sell.ID, CardEntry{Method: "apple_pay", Token: ApplePayToken}); p.ApplePay || p.Status != 422 {
		t.Errorf("Apple Pay on a sell: %+v", p)
	}
}

func TestCardLinksDieAfterFiveMinutesOrANewerLink(t *testing.T) {
	t.Parallel()
	c := &clock{time.Now()}
	b := newBank(c)
	o, first := openCard(t, b, "buy")
	second, _ := b.CreateCardSession(o.ID, "http://gw.test/orders/return?state=def")
	if p := b.PayByCard(first.ID, card4242); p.Status != 410 || !strings.Contains(p.Problem, "newer link") {
		t.Errorf("the killed link: %+v", p)
	}
	c.t = c.t.Add(5 * time.Minute)
	if p := b.PayByCard(second.ID, card4242); p.Status != 410 || !strings.Contains(p.Problem, "expired") {
		t.Errorf("the old link: %+v", p)
	}
	if got, _ := b.CardOrder(o.ID); got.Status != cardAwaitingPayment {
		t.Errorf("a dead link moved the order: %+v", got)
	}
	c.t = c.t.Add(25 * time.Minute)
	if got, _ := b.CardOrder(o.ID); got.Status != cardExpired {
		t.Errorf("an order unpaid past its expiry: %+v", got)
	}
}

func TestSellSettlesOnTheDeposit(t *testing.T) {
	t.Parallel()
	b := newBank(&clock{time.Now()})
	o, s := openCard(t, b, "sell")
	if !walletRe.MatchString(o.DepositAddress) || o.Status != cardAwaitingDeposit {
		t.Fatalf("%+v", o)
	}
	if p := b.PayByCard(s.ID, card4242); p.redirect == "" {
		t.Fatalf("the card to credit: %+v", p)
	}
	if got, _ := b.CardOrder(o.ID); got.Status != cardAwaitingDeposit || got.PaymentMethod != "card" {
		t.Errorf("a sell with its card, before the deposit: %+v", got)
	}
	d, err := b.SimulateCardDeposit(o.ID)
	if err != nil || d.Status != cardProcessing || len(d.TxHash) != 66 {
		t.Fatalf("%+v %v", d, err)
	}
	if again, err := b.SimulateCardDeposit(o.ID); err != nil || again.TxHash != d.TxHash {
		t.Errorf("a second deposit call: %+v %v", again, err)
	}
	waitStatus(t, b, o.ID, cardCompleted)
	buy, _ := openCard(t, b, "buy")
	if _, err := b.SimulateCardDeposit(buy.ID); failure(t, err).Status != 409 {
		t.Errorf("a deposit for a buy: %v", err)
	}
}

func TestCardOrderIdempotencyAndRefusals(t *testing.T) {
	t.Parallel()
	b := newBank(&clock{time.Now()})
	in := cardOrderIn("buy", b.now())
	first, created, _ := b.CreateCardOrder(in, "ord_1")
	again, createdAgain, _ := b.CreateCardOrder(in, "ord_1")
	if !created || createdAgain || again.ID != first.ID {
		t.Errorf("a retry opened a second order: %s %s", first.ID, again.ID)
	}
	in.Direction, in.Chain, in.CryptoAmount = "hold", 1, "5"
	_, _, err := b.CreateCardOrder(in, "")
	if f := failure(t, err); f.Status != 422 || len(f.Body.Error.Details) != 3 {
		t.Errorf("%+v", f.Body)
	}
}

// The page through HTTP: the form POST a script can send, and nothing typed
// is written back or logged.
func TestCardPageOverHTTP(t *testing.T) {
	t.Parallel()
	b := newBank(&clock{time.Now()})
	var logs strings.Builder
	srv := httptest.NewServer(NewHandler(b, "pk", slog.New(slog.NewJSONHandler(&logs, nil))))
	defer srv.Close()
	_, s := openCard(t, b, "buy")
	noRedirect := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	resp, err := noRedirect.Get(srv.URL + "/card/" + s.ID)
	if err != nil {
		t.Fatal(err)
	}
	page, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || !strings.Contains(string(page), `id="apple-pay"`) || !strings.Contains(string(page), `autocomplete="cc-number"`) ||
		resp.Header.Get("X-Frame-Options") != "DENY" {
		t.Fatalf("%d %s", resp.StatusCode, page)
	}
	bad := url.Values{"method": {"card"}, "number": {"4000000000000010"}, "expiry": {"12/39"}, "cvc": {"123"}}
	resp, _ = noRedirect.PostForm(srv.URL+"/card/"+s.ID, bad)
	page, _ = io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 422 || strings.Contains(string(page), "4000000000000010") {
		t.Errorf("a wrong number: %d %s", resp.StatusCode, page)
	}
	good := url.Values{"method": {"card"}, "number": {"4242 4242 4242 4242"}, "expiry": {"12/39"}, "cvc": {"123"}}
	resp, _ = noRedirect.PostForm(srv.URL+"/card/"+s.ID, good)
	resp.Body.Close()
	if resp.StatusCode != 303 || resp.Header.Get("Location") != "http://gw.test/orders/return?state=abc" {
		t.Errorf("a test card: %d %v", resp.StatusCode, resp.Header)
	}
	if strings.Contains(logs.String(), "4242") || strings.Contains(logs.String(), "4000000000000010") {
		t.Errorf("a card number reached the log:\n%s", logs.String())
	}
}
