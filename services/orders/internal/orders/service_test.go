package orders

import (
	"context"
	"errors"
	"log/slog"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/partnerpay/api/pkg/bankprovider"
	"github.com/partnerpay/api/pkg/database"
	"github.com/partnerpay/api/pkg/envelope"
	"github.com/partnerpay/api/pkg/environment"
	"github.com/partnerpay/api/pkg/format"
	"github.com/partnerpay/api/pkg/idempotency"
	"github.com/partnerpay/api/pkg/partner"
	"github.com/partnerpay/api/testkit/pgtest"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

// countingStore is the real store (on the embedded engine) that counts
// its lookups.
type countingStore struct {
	*DBStore
	mu      sync.Mutex
	orders  map[string]bool
	lookups int
}

func (m *countingStore) Create(ctx context.Context, r Record, answer Order) error {
	m.mu.Lock()
	m.orders[r.ID] = true
	m.mu.Unlock()
	return m.DBStore.Create(ctx, r, answer)
}

func (m *countingStore) Get(ctx context.Context, id string) (Record, error) {
	m.mu.Lock()
	m.lookups++
	m.mu.Unlock()
	return m.DBStore.Get(ctx, id)
}

// fakeProvider is the card provider in memory: orders open, links mint
// and kill the earlier ones, and a test sets where an order stands.
type fakeProvider struct {
	now      func() time.Time // the provider's clock: it expires unpaid orders
	mu       sync.Mutex
	orders   map[string]bankprovider.CardOrder // by id
	byRef    map[string]string
	sessions map[string]string // session id → return URL
	returns  []string
	down     bool
	hang     bool // reads wait for their context's end
	seq      int
}

func newFakeProvider() *fakeProvider {
	return &fakeProvider{orders: map[string]bankprovider.CardOrder{}, byRef: map[string]string{}, sessions: map[string]string{}}
}

var errProviderDown = errors.New("card provider: connection refused")

func (p *fakeProvider) CreateCardOrder(_ context.Context, in bankprovider.NewCardOrder, key string) (bankprovider.CardOrder, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.down {
		return bankprovider.CardOrder{}, errProviderDown
	}
	if id, ok := p.byRef[key]; ok {
		return p.orders[id], nil
	}
	p.seq++
	o := bankprovider.CardOrder{ID: "co_" + strconv.Itoa(p.seq), Reference: in.Reference, Direction: in.Direction, Status: StatusAwaitingPayment}
	if in.Direction == "sell" {
		o.Status, o.DepositAddress = StatusAwaitingDeposit, "0x"+strings.Repeat("ab", 20)
	}
	o.ExpiresAt = in.ExpiresAt
	p.orders[o.ID], p.byRef[key] = o, o.ID
	return o, nil
}

func (p *fakeProvider) CardOrder(ctx context.Context, id string) (bankprovider.CardOrder, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.down {
		return bankprovider.CardOrder{}, errProviderDown
	}
	if p.hang {
		p.mu.Unlock()
		<-ctx.Done()
		p.mu.Lock()
		return bankprovider.CardOrder{}, ctx.Err()
	}
	o := p.orders[id]
	if expires, err := time.Parse(time.RFC3339, o.ExpiresAt); err == nil && p.now != nil && !p.now().Before(expires) &&
		(o.Status == StatusAwaitingPayment || o.Status == StatusAwaitingDeposit) {
		o.Status = StatusExpired
		p.orders[id] = o
	}
	return o, nil
}

func (p *fakeProvider) CreateCardSession(_ context.Context, orderID, returnURL string) (bankprovider.CardSession, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.seq++
	id := "cps_" + strconv.Itoa(p.seq)
	p.sessions[id] = returnURL
	p.returns = append(p.returns, returnURL)
	return bankprovider.CardSession{ID: id, CardOrderID: orderID, URL: "https://provider.test/card/" + id, Status: "open"}, nil
}

func (p *fakeProvider) SimulateCardDeposit(_ context.Context, id string) (bankprovider.CardOrder, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	o := p.orders[id]
	if o.Status == StatusAwaitingDeposit {
		o.Status, o.TxHash, o.PaymentMethod = StatusProcessing, "0x"+strings.Repeat("cd", 32), "card"
		p.orders[id] = o
	}
	return o, nil
}

// set makes the provider's order for our order id stand at o.
func (p *fakeProvider) set(orderID string, f func(*bankprovider.CardOrder)) {
	p.mu.Lock()
	defer p.mu.Unlock()
	id := p.byRef[orderID]
	o := p.orders[id]
	f(&o)
	p.orders[id] = o
}

const (
	baseUSDC = "0x036CbD53842c5426634e7929541eC2318f3dCF7e"
	wallet   = "0x5aAeb6053F3E94C9b9A09f33669435E7Ef1BeAed"
)

var card = partner.Caller{KeyID: "acme", Grants: partner.Grants{
	Products:        []string{"card"},
	Chains:          partner.Chains{Source: []int64{84532}, Destination: []int64{84532}},
	Tokens:          map[string][]string{"84532": {baseUSDC}},
	MaxExecutionUSD: "2500",
}}

type clock struct{ t time.Time }

func (c *clock) now() time.Time { return c.t }

type fixture struct {
	svc      *service
	store    *countingStore
	provider *fakeProvider
	clock    *clock
	worker   *Worker
}

func newFixture(t *testing.T) fixture {
	return newFixtureOn(pgtest.Open(t, idempotency.Migrations, Feed.Migrations(), Migrations))
}

// newFixtureOn is the fixture on db (migrated with idempotency.Migrations and Migrations).
func newFixtureOn(db *database.DB) fixture {
	f := fixture{store: &countingStore{DBStore: NewStore(db, environment.Sandbox), orders: map[string]bool{}}, provider: newFakeProvider(),
		clock: &clock{t: time.Date(2026, 11, 22, 5, 0, 0, 0, time.UTC)}}
	f.provider.now = f.clock.now
	f.svc = NewService(Config{Env: "sandbox", Store: f.store, Provider: f.provider, Secret: []byte("0123456789abcdef0123456789abcdef"),
		ReturnURL: "http://gw.test/orders/return", Log: slog.New(slog.DiscardHandler), Now: f.clock.now}).(*service)
	f.worker = NewWorker(f.svc, 2*time.Second, slog.New(slog.DiscardHandler), prometheus.NewRegistry())
	return f
}

// later moves the clock on by d and runs the worker's rounds until
// nothing is due: what the provider says reaches the orders.
func (f fixture) later(t *testing.T, d time.Duration) {
	t.Helper()
	f.clock.t = f.clock.t.Add(d)
	for range 20 {
		n, err := f.worker.Round(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		if n == 0 {
			return
		}
	}
	t.Fatal("orders still due after 20 rounds")
}

func newTestService(t *testing.T) (*service, *countingStore, *clock) {
	f := newFixture(t)
	return f.svc, f.store, f.clock
}

func code(err error) string {
	var e *envelope.Error
	if errors.As(err, &e) {
		return string(e.Code)
	}
	return ""
}

func ptr(s string) *string { return &s }

// TestOrderChecksRunInContractOrder: one row per check of POST /v1/orders,
// in DESIGN §7's order; each row breaks its check and every later one, so
// the answer shows which check runs first. Nothing is stored on a refusal.
func TestOrderChecksRunInContractOrder(t *testing.T) {
	t.Parallel()
	good := CreateRequest{Direction: "buy", CryptoCurrency: "USDC", Chain: 84532, FiatCurrency: "EUR", Country: "DE", FiatAmount: ptr("100"), WalletAddress: wallet}
	with := func(f func(*CreateRequest)) CreateRequest { r := good; f(&r); return r }
	noChain := card
	noChain.Grants.Chains = partner.Chains{Source: []int64{84532}}
	noToken := card
	noToken.Grants.Tokens = nil
	for _, tc := range []struct {
		name   string
		caller partner.Caller
		req    CreateRequest
		code   string
		msg    string
	}{
		{"no direction", card, with(func(r *CreateRequest) { r.Direction = ""; r.Chain = 1 }), "invalid_request", "direction is required"},
		{"a direction that is neither", card, with(func(r *CreateRequest) { r.Direction = "hold" }), "invalid_request", "direction must be buy or sell."},
		{"both amounts", card, with(func(r *CreateRequest) { r.CryptoAmount = ptr("1"); r.Chain = 1 }), "invalid_request", "Send exactly one of cryptoAmount and fiatAmount, not both."},
		{"no amount", card, with(func(r *CreateRequest) { r.FiatAmount = nil }), "invalid_request", "Send exactly one of cryptoAmount and fiatAmount."},
		{"a zero amount", card, with(func(r *CreateRequest) { r.FiatAmount = ptr("0") }), "invalid_request", "fiatAmount"},
		{"a wallet with a bad checksum", card, with(func(r *CreateRequest) { r.WalletAddress = "0x5AAeb6053F3E94C9b9A09f33669435E7Ef1BeAed"; r.Chain = 1 }), "invalid_request", "walletAddress"},
		{"a chain not in the catalogue", noChain, with(func(r *CreateRequest) { r.Chain = 1; r.Country = "JP" }), "invalid_request", "chain"},
		{"a token not on the chain", noChain, with(func(r *CreateRequest) { r.CryptoCurrency = "DAI"; r.Country = "JP" }), "invalid_request", "cryptoCurrency is not a token on chain 84532"},
		{"the key's destination chain, for a buy", noChain, with(func(r *CreateRequest) { r.Country = "JP" }), "chain_not_allowed", "This key is not enabled for chain 84532 as a destination."},
		{"the key's token", noToken, with(func(r *CreateRequest) { r.Country = "JP" }), "token_not_allowed", "This key is not enabled for token " + baseUSDC + " on chain 84532 as a destination"},
		{"no corridor for the country", card, with(func(r *CreateRequest) { r.Country = "JP"; r.FiatAmount = ptr("1") }), "no_route", "No card corridor serves EUR for cardholders in JP"},
		{"a corridor that takes no sells", card, with(func(r *CreateRequest) {
			r.Direction = "sell"
			r.FiatCurrency = "BRL"
			r.Country = "BR"
			r.FiatAmount = ptr("1")
		}), "no_route", "takes buy orders only"},
		{"below the corridor's limit", card, with(func(r *CreateRequest) { r.FiatAmount = ptr("19.99") }), "no_route", "The EUR card corridor takes 20 to 5000 EUR per order; this order is 19.99 EUR"},
		{"a crypto amount above the corridor's limit", card, with(func(r *CreateRequest) { r.FiatAmount = nil; r.CryptoAmount = ptr("6000") }), "no_route", "this order is 5555.56 EUR"},
		{"above the key's ceiling", card, with(func(r *CreateRequest) { r.FiatAmount = ptr("3000") }), "execution_capped", "This order is worth more than the key's maxExecutionUsd of 2500 USD"},
	} {
		svc, st, _ := newTestService(t)
		_, err := svc.Create(context.Background(), tc.caller, tc.req)
		if code(err) != tc.code || err == nil || !strings.Contains(err.Error(), tc.msg) {
			t.Errorf("%s: %v, want %s (%q)", tc.name, err, tc.code, tc.msg)
		}
		if len(st.orders) != 0 {
			t.Errorf("%s: an order was stored", tc.name)
		}
	}
}

func TestABuyAndASellOrder(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	svc, st := f.svc, f.store
	buy, err := svc.Create(context.Background(), card, CreateRequest{Direction: "BUY", CryptoCurrency: "usdc", Chain: 84532, FiatCurrency: "eur", Country: "de", FiatAmount: ptr("100"), WalletAddress: strings.ToLower(wallet)})
	if err != nil {
		t.Fatal(err)
	}
	want := Order{Mock: true, OrderID: buy.OrderID, Direction: "buy", Status: StatusAwaitingPayment, CryptoCurrency: "USDC", Chain: 84532,
		FiatCurrency: "EUR", Country: "DE", CryptoAmount: MockMoney, FiatAmount: MockMoney, Fee: MockMoney, WalletAddress: wallet,
		PaymentMethods: []string{"card", "apple_pay"}, ExpiresAt: "2026-11-22T05:30:00Z"}
	if !format.ValidID(orderPrefix, buy.OrderID) || !equalOrder(buy, want) {
		t.Errorf("buy order\n%+v\nwant\n%+v", buy, want)
	}
	if r, _ := st.Get(context.Background(), buy.OrderID); r.Owner != "acme" || r.FiatAmount != "100" || r.CryptoAmount != "" || r.WalletAddress != wallet {
		t.Errorf("stored %+v", r)
	}
	sell, err := svc.Create(context.Background(), card, CreateRequest{Direction: "sell", CryptoCurrency: "USDC", Chain: 84532, FiatCurrency: "EUR", Country: "FR", CryptoAmount: ptr("50"), WalletAddress: wallet})
	if err != nil {
		t.Fatal(err)
	}
	if sell.Status != StatusAwaitingDeposit || len(sell.DepositAddress) != 42 || sell.DepositAddress == wallet || strings.Join(sell.PaymentMethods, ",") != "card" {
		t.Errorf("sell order %+v: awaiting its deposit, with an address to send to, credited to a card", sell)
	}
	if addr, err := format.EVMAddress("depositAddress", sell.DepositAddress); err != nil || addr != sell.DepositAddress {
		t.Errorf("deposit address %q is not a checksummed address: %v", sell.DepositAddress, err)
	}

	// Status: the order is its owner's; past its expiry, unpaid, it expires.
	s, err := svc.Status(context.Background(), card, StatusRequest{OrderID: buy.OrderID})
	if err != nil || s.Status != StatusAwaitingPayment || s.Direction != "buy" || s.OrderID != buy.OrderID {
		t.Errorf("status %+v %v", s, err)
	}
	f.later(t, OrderTTL)
	if s, err := svc.Status(context.Background(), card, StatusRequest{OrderID: buy.OrderID}); err != nil || s.Status != StatusExpired {
		t.Errorf("at expiry: %+v %v, want expired", s, err)
	}
}

func equalOrder(a, b Order) bool {
	return a.Mock == b.Mock && a.OrderID == b.OrderID && a.Direction == b.Direction && a.Status == b.Status && a.CryptoCurrency == b.CryptoCurrency &&
		a.Chain == b.Chain && a.FiatCurrency == b.FiatCurrency && a.Country == b.Country && a.CryptoAmount == b.CryptoAmount &&
		a.FiatAmount == b.FiatAmount && a.Fee == b.Fee && a.WalletAddress == b.WalletAddress && a.DepositAddress == b.DepositAddress &&
		strings.Join(a.PaymentMethods, ",") == strings.Join(b.PaymentMethods, ",") && a.ExpiresAt == b.ExpiresAt
}

// Another key's order, an unknown one and an id of the wrong shape all
// answer order_not_found; the last without a lookup.
func TestAnotherKeysOrderIsNotFound(t *testing.T) {
	t.Parallel()
	svc, st, _ := newTestService(t)
	o, err := svc.Create(context.Background(), card, CreateRequest{Direction: "buy", CryptoCurrency: "USDC", Chain: 84532, FiatCurrency: "EUR", Country: "DE", FiatAmount: ptr("100"), WalletAddress: wallet})
	if err != nil {
		t.Fatal(err)
	}
	other := card
	other.KeyID = "globex"
	for _, id := range []string{o.OrderID, "ord_" + strings.Repeat("0", format.IDHexLen)} {
		if _, err := svc.Status(context.Background(), other, StatusRequest{OrderID: id}); code(err) != "order_not_found" {
			t.Errorf("%s for another key: %v", id, err)
		}
	}
	before := st.lookups
	for _, id := range []string{"ord_x", "bpq_84532_" + strings.Repeat("a", 32), strings.Repeat("o", 5000)} {
		if _, err := svc.Status(context.Background(), card, StatusRequest{OrderID: id}); code(err) != "order_not_found" {
			t.Errorf("id %.20q: %v", id, err)
		}
	}
	if st.lookups != before {
		t.Error("ids of the wrong shape were looked up")
	}
	if _, err := svc.Status(context.Background(), card, StatusRequest{}); code(err) != "invalid_request" {
		t.Errorf("no id: %v", err)
	}
}
