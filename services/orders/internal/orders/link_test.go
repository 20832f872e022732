package orders

import (
	"context"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/partnerpay/api/pkg/bankprovider"
	"github.com/partnerpay/api/pkg/hostedlink"
	"github.com/partnerpay/api/pkg/idempotency"
	"github.com/partnerpay/api/pkg/partner"
	"github.com/partnerpay/api/testkit/pgtest"
)

var ctx = context.Background()

func (f fixture) buy(t *testing.T) string {
	t.Helper()
	o, err := f.svc.Create(ctx, card, CreateRequest{Direction: "buy", CryptoCurrency: "USDC", Chain: 84532, FiatCurrency: "EUR", Country: "DE", FiatAmount: ptr("100"), WalletAddress: wallet})
	if err != nil {
		t.Fatal(err)
	}
	return o.OrderID
}

// link mints a link and answers the state its return address carries.
func (f fixture) link(t *testing.T, id, returnURL string) string {
	t.Helper()
	l, err := f.svc.Link(ctx, card, LinkRequest{OrderID: id, ReturnURL: returnURL})
	if err != nil || !strings.HasPrefix(l.Link, "https://provider.test/card/cps_") {
		t.Fatalf("link: %+v %v", l, err)
	}
	back, _ := url.Parse(f.provider.returns[len(f.provider.returns)-1])
	if back.Host != "gw.test" || back.Path != "/orders/return" {
		t.Fatalf("the provider sends the browser to %s", back)
	}
	return back.Query().Get("state")
}

func TestTheReturnCarriesTheProvidersWord(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	id := f.buy(t)
	state := f.link(t, id, "https://partner.example/done?cart=7")
	f.provider.set(id, func(o *bankprovider.CardOrder) { o.Status, o.PaymentMethod = StatusProcessing, "apple_pay" })
	f.later(t, time.Second)
	out, err := f.svc.Return(ctx, state)
	if err != nil || out.Redirect != "https://partner.example/done?cart=7&orderId="+id+"&status=processing" {
		t.Fatalf("return: %+v %v", out, err)
	}
	if st, _ := f.svc.Status(ctx, card, StatusRequest{OrderID: id}); st.Status != StatusProcessing || st.PaymentMethod != "apple_pay" {
		t.Errorf("status after the return: %+v", st)
	}
	if _, err := f.svc.Return(ctx, state); err != hostedlink.ErrUsedState {
		t.Errorf("the same return twice: %v", err)
	}
	f.provider.set(id, func(o *bankprovider.CardOrder) { o.Status, o.TxHash = StatusCompleted, "0x"+strings.Repeat("ef", 32) })
	f.later(t, time.Second)
	if st, _ := f.svc.Status(ctx, card, StatusRequest{OrderID: id}); st.Status != StatusCompleted || st.TxHash != "0x"+strings.Repeat("ef", 32) || st.PaymentMethod != "apple_pay" {
		t.Errorf("status once settled: %+v", st)
	}
}

func TestADeclineReturnsAsFailedWithItsReason(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	id := f.buy(t)
	state := f.link(t, id, "")
	f.provider.set(id, func(o *bankprovider.CardOrder) {
		o.Status, o.PaymentMethod, o.FailureReason = StatusFailed, "card", "card_declined"
	})
	f.later(t, time.Second)
	out, err := f.svc.Return(ctx, state)
	if err != nil || out.Redirect != "" || out.Status != StatusFailed || out.FailureReason != "card_declined" {
		t.Fatalf("%+v %v", out, err)
	}
	// Final: whatever the provider says later changes nothing.
	f.provider.set(id, func(o *bankprovider.CardOrder) {
		o.Status, o.FailureReason, o.TxHash = StatusCompleted, "", "0x"+strings.Repeat("ab", 32)
	})
	f.later(t, time.Second)
	if st, _ := f.svc.Status(ctx, card, StatusRequest{OrderID: id}); st.Status != StatusFailed || st.FailureReason != "card_declined" || st.TxHash != "" {
		t.Errorf("a final order moved: %+v", st)
	}
}

func TestAnOlderLinkNoLongerCounts(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	id := f.buy(t)
	first := f.link(t, id, "")
	second := f.link(t, id, "")
	if _, err := f.svc.Return(ctx, first); err != hostedlink.ErrOldState {
		t.Errorf("the killed link's return: %v", err)
	}
	if _, err := f.svc.Return(ctx, second); err != nil {
		t.Errorf("the current link's return: %v", err)
	}
	if _, err := f.svc.Return(ctx, "forged.state"); err != hostedlink.ErrBadState {
		t.Errorf("a forged state: %v", err)
	}
	other := f.svc.links.Signer.Sign("ol_" + strings.Repeat("0", 24))
	if _, err := f.svc.Return(ctx, other); err != hostedlink.ErrBadState {
		t.Errorf("a signed state for no link: %v", err)
	}
}

func TestLinkChecks(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	id := f.buy(t)
	globex := card
	globex.KeyID = "globex"
	for _, c := range []struct {
		name   string
		caller partner.Caller
		req    LinkRequest
		code   string
	}{
		{"an http return URL to another host", card, LinkRequest{OrderID: id, ReturnURL: "http://partner.example/"}, "invalid_request"},
		{"no order id", card, LinkRequest{}, "invalid_request"},
		{"another key's order", globex, LinkRequest{OrderID: id}, "order_not_found"},
		{"an id of the wrong shape", card, LinkRequest{OrderID: "ord_<script>"}, "order_not_found"},
	} {
		if _, err := f.svc.Link(ctx, c.caller, c.req); code(err) != c.code {
			t.Errorf("%s: %v, want %s", c.name, err, c.code)
		}
	}
	if len(f.provider.returns) != 0 {
		t.Errorf("a refused link reached the provider")
	}
}

// The provider's word decides, but only in our own shapes: an answer out of
// them is not kept.
func TestAProviderAnswerOutOfShapeIsNotKept(t *testing.T) {
	t.Parallel()
	for _, bad := range []func(*bankprovider.CardOrder){
		func(o *bankprovider.CardOrder) { o.Status = "refunded" },
		func(o *bankprovider.CardOrder) { o.Status = StatusAwaitingDeposit },             // a buy never awaits a deposit
		func(o *bankprovider.CardOrder) { o.Status = StatusCompleted },                   // a buy completes with its hash
		func(o *bankprovider.CardOrder) { o.Status, o.FailureReason = StatusFailed, "" }, // failed says why
		func(o *bankprovider.CardOrder) { o.Status, o.FailureReason = StatusFailed, "stolen <card>" },
		func(o *bankprovider.CardOrder) { o.Status, o.PaymentMethod = StatusProcessing, "4242424242424242" },
		func(o *bankprovider.CardOrder) { o.Status, o.TxHash = StatusCompleted, "0xnothex" },
	} {
		f := newFixture(t)
		id := f.buy(t)
		f.provider.set(id, bad)
		f.later(t, time.Second)
		if st, err := f.svc.Status(ctx, card, StatusRequest{OrderID: id}); err != nil || st.Status != StatusAwaitingPayment || st.PaymentMethod != "" || st.FailureReason != "" {
			t.Errorf("%+v %v", st, err)
		}
	}
}

// A status read never calls the provider: with the provider down or
// silent it answers at once, as last known, and the worker moves the
// order on once the provider answers again.
func TestAStatusReadSurvivesTheProvidersOutage(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	id := f.buy(t)
	f.provider.set(id, func(o *bankprovider.CardOrder) { o.Status, o.PaymentMethod = StatusProcessing, "card" })
	f.later(t, time.Second)
	if st, _ := f.svc.Status(ctx, card, StatusRequest{OrderID: id}); st.Status != StatusProcessing {
		t.Fatalf("%+v", st)
	}
	for _, fault := range []func(){func() { f.provider.down = true }, func() { f.provider.down, f.provider.hang = false, true }} {
		fault()
		f.provider.set(id, func(o *bankprovider.CardOrder) { o.Status, o.TxHash = StatusCompleted, "0x"+strings.Repeat("ab", 32) })
		if st, err := f.svc.Status(ctx, card, StatusRequest{OrderID: id}); err != nil || st.Status != StatusProcessing {
			t.Errorf("with the provider down or silent: %+v %v, want the last known status at once", st, err)
		}
	}
	f.provider.down, f.provider.hang = false, false
	f.later(t, time.Second)
	if st, _ := f.svc.Status(ctx, card, StatusRequest{OrderID: id}); st.Status != StatusCompleted {
		t.Errorf("once the provider answers: %+v", st)
	}
	f.provider.down = true
	if _, err := f.svc.Create(ctx, card, CreateRequest{Direction: "buy", CryptoCurrency: "USDC", Chain: 84532, FiatCurrency: "EUR", Country: "DE", FiatAmount: ptr("100"), WalletAddress: wallet}); err == nil || code(err) != "" {
		t.Errorf("an order the provider could not open: %v, want an internal error", err)
	}
	if len(f.store.orders) != 1 {
		t.Errorf("an order the provider never opened was stored")
	}
}

func TestASellSettlesOnTheSandboxDeposit(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	sell, err := f.svc.Create(ctx, card, CreateRequest{Direction: "sell", CryptoCurrency: "USDC", Chain: 84532, FiatCurrency: "EUR", Country: "DE", CryptoAmount: ptr("50"), WalletAddress: wallet})
	if err != nil || sell.DepositAddress != "0xABaBaBaBABabABabAbAbABAbABabababaBaBABaB" {
		t.Fatalf("%+v %v: the provider's deposit address, checksummed", sell, err)
	}
	st, err := f.svc.SandboxDeposit(ctx, card, StatusRequest{OrderID: sell.OrderID})
	if err != nil || st.Status != StatusProcessing || st.TxHash == "" {
		t.Fatalf("%+v %v", st, err)
	}
	if again, err := f.svc.SandboxDeposit(ctx, card, StatusRequest{OrderID: sell.OrderID}); err != nil || again != st {
		t.Errorf("a repeat: %+v %v", again, err)
	}
	f.provider.set(sell.OrderID, func(o *bankprovider.CardOrder) { o.Status = StatusCompleted })
	f.later(t, time.Second)
	if st, _ := f.svc.Status(ctx, card, StatusRequest{OrderID: sell.OrderID}); st.Status != StatusCompleted {
		t.Errorf("%+v", st)
	}
	buy := f.buy(t)
	if _, err := f.svc.SandboxDeposit(ctx, card, StatusRequest{OrderID: buy}); err != errNotASell {
		t.Errorf("a deposit for a buy: %v", err)
	}
	f.svc.env = "production"
	if _, err := f.svc.SandboxDeposit(ctx, card, StatusRequest{OrderID: sell.OrderID}); code(err) != "not_found" {
		t.Errorf("in production: %v", err)
	}
}

// Many returns of one link at once (a double click, a replayed address),
// : one is redeemed, every other is told the link was used,
// and the order moves once.
func TestConcurrentReturnsRedeemALinkOnce(t *testing.T) {
	t.Parallel()
	db := pgtest.Open(t, idempotency.Migrations, Feed.Migrations(), Migrations)
	concurrentReturns(t, newFixtureOn(db))
}

func concurrentReturns(t *testing.T, f fixture) {
	id := f.buy(t)
	state := f.link(t, id, "")
	f.provider.set(id, func(o *bankprovider.CardOrder) { o.Status, o.PaymentMethod = StatusProcessing, "card" })
	f.later(t, time.Second)
	const n = 16
	errs := make(chan error, n)
	for range n {
		go func() {
			_, err := f.svc.Return(ctx, state)
			errs <- err
		}()
	}
	ok := 0
	for range n {
		switch err := <-errs; err {
		case nil:
			ok++
		case hostedlink.ErrUsedState:
		default:
			t.Errorf("a concurrent return: %v", err)
		}
	}
	if ok != 1 {
		t.Errorf("%d returns redeemed the link, want 1", ok)
	}
	if st, _ := f.svc.Status(ctx, card, StatusRequest{OrderID: id}); st.Status != StatusProcessing {
		t.Errorf("%+v", st)
	}
}

// A payment the provider took just before the order's expiry is not lost to
// our clock: while the provider cannot be reached, the order stays as last
// known (not expired here), and moves on once the provider answers.
func TestOurClockNeverExpiresAnOrderTheProviderMayHavePaid(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	id := f.buy(t)
	f.provider.set(id, func(o *bankprovider.CardOrder) { o.Status, o.PaymentMethod = StatusProcessing, "card" })
	f.provider.down = true
	f.later(t, OrderTTL+time.Minute)
	if st, err := f.svc.Status(ctx, card, StatusRequest{OrderID: id}); err != nil || st.Status != StatusAwaitingPayment {
		t.Fatalf("past expiry, the provider down: %+v %v, want awaiting_payment as last known", st, err)
	}
	f.provider.down = false
	f.later(t, time.Minute)
	if st, _ := f.svc.Status(ctx, card, StatusRequest{OrderID: id}); st.Status != StatusProcessing || st.PaymentMethod != "card" {
		t.Errorf("once the provider answers: %+v, want the payment it took", st)
	}
}
