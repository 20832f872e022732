package e2e

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	partnerapi "github.com/partnerpay/api/clients/go"
)

// The card on- and off-ramp as a user goes through it (DESIGN §7): the
// partner makes the order and mints the link with the generated client,
// the user pays on the provider's hosted page in Chromium, and the partner
// polls the order until it is final.

// newCardOrder makes an order through the generated client.
func newCardOrder(t *testing.T, c *partnerapi.ClientWithResponses, direction partnerapi.CreateOrderRequestDirection) partnerapi.Order {
	t.Helper()
	body := partnerapi.CreateOrderJSONRequestBody{Direction: direction, CryptoCurrency: "USDC", Chain: 84532, FiatCurrency: "EUR",
		Country: "DE", WalletAddress: orderWallet}
	if direction == partnerapi.CreateOrderRequestDirectionBuy {
		body.FiatAmount = ptr("100")
	} else {
		body.CryptoAmount = ptr("50")
	}
	r, err := c.CreateOrderWithResponse(context.Background(), nil, body)
	if err != nil || r.JSON200 == nil {
		t.Fatalf("create order: %v %s", err, r.Body)
	}
	return *r.JSON200
}

// payLink mints the hosted card page link, sending the browser back to
// returnURL (none: the gateway's own page).
func payLink(t *testing.T, c *partnerapi.ClientWithResponses, orderID, returnURL string) string {
	t.Helper()
	body := partnerapi.OrderLinkJSONRequestBody{OrderId: orderID}
	if returnURL != "" {
		body.ReturnUrl = &returnURL
	}
	r, err := c.OrderLinkWithResponse(context.Background(), body)
	if err != nil || r.JSON200 == nil {
		t.Fatalf("order link: %v %s", err, r.Body)
	}
	return r.JSON200.Link
}

// orderState reads an order's status through the generated client.
func orderState(t *testing.T, c *partnerapi.ClientWithResponses, orderID string) partnerapi.OrderState {
	t.Helper()
	r, err := c.OrderStatusWithResponse(context.Background(), partnerapi.OrderStatusJSONRequestBody{OrderId: orderID})
	if err != nil || r.JSON200 == nil {
		t.Fatalf("order status: %v %s", err, r.Body)
	}
	return *r.JSON200
}

// pollOrder polls the order until it is final, as a partner does, and
// answers its final state.
func pollOrder(t *testing.T, c *partnerapi.ClientWithResponses, orderID string) partnerapi.OrderState {
	t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	for {
		st := orderState(t, c, orderID)
		switch st.Status {
		case partnerapi.OrderStateStatusCompleted, partnerapi.OrderStateStatusFailed, partnerapi.OrderStateStatusExpired:
			return st
		}
		if time.Now().After(deadline) {
			t.Fatalf("order %s still %s", orderID, st.Status)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// partnerSite stands for the partner's page the browser comes back to.
func partnerSite(t *testing.T) string {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		fmt.Fprint(w, `<!doctype html><title>Partner</title><main><h1>Back at the partner</h1></main>`)
	}))
	t.Cleanup(srv.Close)
	return srv.URL
}

// waitLocation waits until the browser is at an address starting with
// prefix, and answers it.
func waitLocation(t *testing.T, ctx context.Context, prefix string) string {
	t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	for {
		where, err := chromedp.Run(ctx, chromedp.Location())
		if err != nil {
			t.Fatal(err)
		}
		if strings.HasPrefix(where, prefix) {
			return where
		}
		if time.Now().After(deadline) {
			t.Fatalf("the browser is at %s, not %s…", where, prefix)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// payByCard opens link, fills the hosted page's card form and submits it.
func payByCard(ctx context.Context, link, number string) error {
	return chromedp.Do(ctx,
		chromedp.Navigate(link),
		chromedp.WaitVisible(chromedp.CSS("#card-number")),
		chromedp.SendKeys(chromedp.CSS("#card-number"), number),
		chromedp.SendKeys(chromedp.CSS("#card-expiry"), "12/39"),
		chromedp.SendKeys(chromedp.CSS("#card-cvc"), "123"),
		chromedp.Click(chromedp.CSS("#pay")),
	)
}

func heading(t *testing.T, ctx context.Context) string {
	t.Helper()
	h, err := chromedp.Run(ctx, chromedp.Text(chromedp.CSS("main h1")))
	if err != nil {
		t.Fatal(err)
	}
	return h
}

func TestCardBuysInChromium(t *testing.T) {
	s := startStack(t)
	c := newClient(t, s, s.cardKey("acme"))
	provider := "http://" + s.Services["sandboxbank"].Addr
	partner := partnerSite(t)

	t.Run("an approved card after its 3-D Secure step", func(t *testing.T) {
		o := newCardOrder(t, c, partnerapi.CreateOrderRequestDirectionBuy)
		link := payLink(t, c, o.OrderId, partner+"/checkout/done?cart=7")
		if !strings.HasPrefix(link, provider+"/card/") {
			t.Fatalf("the link %s is not the provider's page", link)
		}
		ctx, requested := browser(t)
		if err := payByCard(ctx, link, "4000 0000 0000 3220"); err != nil {
			t.Fatalf("card page: %v", err)
		}
		if err := chromedp.Do(ctx, chromedp.WaitVisible(chromedp.CSS("#approve-3ds")), chromedp.Click(chromedp.CSS("#approve-3ds"))); err != nil {
			t.Fatalf("card page: %v", err)
		}
		where, _ := url.Parse(waitLocation(t, ctx, partner+"/checkout/done?"))
		q := where.Query()
		if q.Get("cart") != "7" || q.Get("orderId") != o.OrderId || (q.Get("status") != "processing" && q.Get("status") != "completed") {
			t.Errorf("back at the partner with %s", where.RawQuery)
		}
		st := pollOrder(t, c, o.OrderId)
		if st.Status != partnerapi.OrderStateStatusCompleted || st.TxHash == nil || len(*st.TxHash) != 66 ||
			st.PaymentMethod == nil || *st.PaymentMethod != "card" || st.FailureReason != nil {
			t.Errorf("the order: %+v", st)
		}
		// The browser gave the card to the provider only: our gateway saw
		// the return, never a form.
		for _, u := range requested() {
			if !strings.HasPrefix(u, provider+"/card/") && !strings.HasPrefix(u, s.GatewayURL+"/orders/return?state=") && !strings.HasPrefix(u, partner) {
				t.Errorf("the card flow fetched %s", u)
			}
		}
	})

	t.Run("Apple Pay", func(t *testing.T) {
		o := newCardOrder(t, c, partnerapi.CreateOrderRequestDirectionBuy)
		ctx, _ := browser(t)
		if err := chromedp.Do(ctx, chromedp.Navigate(payLink(t, c, o.OrderId, "")),
			chromedp.WaitVisible(chromedp.CSS("#apple-pay")), chromedp.Click(chromedp.CSS("#apple-pay"))); err != nil {
			t.Fatalf("card page: %v", err)
		}
		waitLocation(t, ctx, s.GatewayURL+"/orders/return?")
		if h := heading(t, ctx); h != "Payment received" && h != "All done" {
			t.Errorf("the return page says %q", h)
		}
		if st := pollOrder(t, c, o.OrderId); st.Status != partnerapi.OrderStateStatusCompleted || st.PaymentMethod == nil || *st.PaymentMethod != "apple_pay" || st.TxHash == nil {
			t.Errorf("the order: %+v", st)
		}
	})

	t.Run("a declined card", func(t *testing.T) {
		o := newCardOrder(t, c, partnerapi.CreateOrderRequestDirectionBuy)
		ctx, _ := browser(t)
		if err := payByCard(ctx, payLink(t, c, o.OrderId, ""), "4000000000000002"); err != nil {
			t.Fatalf("card page: %v", err)
		}
		waitLocation(t, ctx, s.GatewayURL+"/orders/return?")
		if h := heading(t, ctx); h != "Payment failed" {
			t.Errorf("the return page says %q", h)
		}
		st := orderState(t, c, o.OrderId)
		if st.Status != partnerapi.OrderStateStatusFailed || st.FailureReason == nil || *st.FailureReason != "card_declined" || st.TxHash != nil {
			t.Errorf("the order: %+v", st)
		}
	})

	t.Run("a link killed by a newer one takes no payment", func(t *testing.T) {
		o := newCardOrder(t, c, partnerapi.CreateOrderRequestDirectionBuy)
		old := payLink(t, c, o.OrderId, "")
		fresh := payLink(t, c, o.OrderId, "")
		ctx, _ := browser(t)
		if err := chromedp.Do(ctx, chromedp.Navigate(old), chromedp.WaitVisible(chromedp.CSS("main h1"))); err != nil {
			t.Fatal(err)
		}
		body, _ := chromedp.Run(ctx, chromedp.Text(chromedp.CSS("main")))
		if h := heading(t, ctx); h != "This link can't be used" || !strings.Contains(body, "A newer link was made for this order") {
			t.Errorf("the killed link shows %q: %s", h, body)
		}
		if st := orderState(t, c, o.OrderId); st.Status != partnerapi.OrderStateStatusAwaitingPayment {
			t.Errorf("after the killed link: %+v", st)
		}
		if err := payByCard(ctx, fresh, "4242424242424242"); err != nil {
			t.Fatal(err)
		}
		waitLocation(t, ctx, s.GatewayURL+"/orders/return?")
		if st := pollOrder(t, c, o.OrderId); st.Status != partnerapi.OrderStateStatusCompleted {
			t.Errorf("paid with the newer link: %+v", st)
		}
	})
}

var noFollow = &http.Client{Timeout: 10 * time.Second, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}

// postForm sends the hosted page's form as a script would (the partner guide), without
// following the redirect; with no form, it GETs link.
func postForm(t *testing.T, link string, form url.Values) (int, string, string) {
	t.Helper()
	var resp *http.Response
	var err error
	if form == nil {
		resp, err = noFollow.Get(link)
	} else {
		resp, err = noFollow.PostForm(link, form)
	}
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, resp.Header.Get("Location"), string(b)
}

var testCard = url.Values{"method": {"card"}, "number": {"4242 4242 4242 4242"}, "expiry": {"12/39"}, "cvc": {"123"}}

// A link older than its life takes no payment. The stack's links live two
// seconds here; the test waits for the page to say so.
func TestAnExpiredCardLinkTakesNoPayment(t *testing.T) {
	s := startStack(t, withEnv("SANDBOXBANK_LINK_TTL", "2s"))
	c := newClient(t, s, s.cardKey("acme"))
	o := newCardOrder(t, c, partnerapi.CreateOrderRequestDirectionBuy)
	link := payLink(t, c, o.OrderId, "")
	deadline := time.Now().Add(15 * time.Second)
	for {
		resp, err := client.Get(link)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode == 410 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the link still answers %d", resp.StatusCode)
		}
		time.Sleep(100 * time.Millisecond)
	}
	status, location, body := postForm(t, link, testCard)
	if status != 410 || location != "" || !strings.Contains(body, "This link has expired") {
		t.Errorf("a payment on the expired link: %d %q\n%s", status, location, body)
	}
	if st := orderState(t, c, o.OrderId); st.Status != partnerapi.OrderStateStatusAwaitingPayment || st.PaymentMethod != nil {
		t.Errorf("after the expired link: %+v", st)
	}
}

// A sell: the card to credit given with the form POST a script sends, the
// user's deposit simulated, the order polled to completed; the return's
// forged outcome is not read; another key sees nothing.
func TestACardSellSettlesThroughTheSandboxDeposit(t *testing.T) {
	s := startStack(t)
	key := s.cardKey("acme")
	c := newClient(t, s, key)
	o := newCardOrder(t, c, partnerapi.CreateOrderRequestDirectionSell)
	if o.Status != "awaiting_deposit" || o.DepositAddress == nil || len(o.PaymentMethods) != 1 || o.PaymentMethods[0] != "card" {
		t.Fatalf("the sell: %+v", o)
	}
	link := payLink(t, c, o.OrderId, "http://127.0.0.1:9/back")
	status, location, _ := postForm(t, link, testCard)
	if status != 303 || !strings.HasPrefix(location, s.GatewayURL+"/orders/return?state=") {
		t.Fatalf("the card to credit: %d %s", status, location)
	}
	// The browser's word is not read: a status added to the return is ignored.
	if status, to, _ := postForm(t, location+"&status=completed", nil); status != 303 || to != "http://127.0.0.1:9/back?orderId="+o.OrderId+"&status=awaiting_deposit" {
		t.Errorf("the return: %d %s", status, to)
	}
	if status, _, body := postForm(t, location, nil); status != 410 || !strings.Contains(body, "This return link was already used.") {
		t.Errorf("the same return twice: %d %s", status, body)
	}

	other := newClient(t, s, s.cardKey("globex"))
	r, err := other.SandboxOrderDepositWithResponse(context.Background(), partnerapi.SandboxOrderDepositJSONRequestBody{OrderId: o.OrderId})
	if err != nil || r.JSON404 == nil {
		t.Fatalf("another key's deposit: %v %s", err, r.Body)
	}
	wantError(t, "another key's deposit", r.HTTPResponse, r.Body, 404, string(r.JSON404.Error.Code), "order_not_found", "No order with this orderId exists for this key.")

	d, err := c.SandboxOrderDepositWithResponse(context.Background(), partnerapi.SandboxOrderDepositJSONRequestBody{OrderId: o.OrderId})
	if err != nil || d.JSON200 == nil || (d.JSON200.Status != "processing" && d.JSON200.Status != "completed") || d.JSON200.TxHash == nil {
		t.Fatalf("the deposit: %v %s", err, d.Body)
	}
	if st := pollOrder(t, c, o.OrderId); st.Status != partnerapi.OrderStateStatusCompleted || st.PaymentMethod == nil || *st.PaymentMethod != "card" || st.TxHash == nil {
		t.Errorf("the sell: %+v", st)
	}

	buy := newCardOrder(t, c, partnerapi.CreateOrderRequestDirectionBuy)
	bad, _ := c.SandboxOrderDepositWithResponse(context.Background(), partnerapi.SandboxOrderDepositJSONRequestBody{OrderId: buy.OrderId})
	if bad.JSON400 == nil {
		t.Fatalf("a deposit for a buy: %d %s", bad.StatusCode(), bad.Body)
	}
	wantError(t, "a deposit for a buy", bad.HTTPResponse, bad.Body, 400, string(bad.JSON400.Error.Code), "invalid_request",
		"Only a sell order takes a stablecoin deposit; a buy is paid on the hosted card page (POST /v1/orders/link).")
}
