package payout

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"testing"
	"time"

	"github.com/partnerpay/api/pkg/envelope"
	"github.com/partnerpay/api/pkg/environment"
	"github.com/partnerpay/api/pkg/partner"
)

type memStore struct {
	saved   []StoredQuote
	quotes  map[string]StoredQuote
	payouts map[string]StoredPayout
}

func (m *memStore) Save(_ context.Context, q StoredQuote) error {
	m.saved = append(m.saved, q)
	if m.quotes == nil {
		m.quotes = map[string]StoredQuote{}
	}
	m.quotes[q.ID] = q
	return nil
}

func (m *memStore) Get(_ context.Context, id string) (StoredQuote, error) {
	q, ok := m.quotes[id]
	if !ok {
		return q, ErrNotFound
	}
	return q, nil
}

func (m *memStore) PayoutFor(_ context.Context, id string) (StoredPayout, error) {
	p, ok := m.payouts[id]
	if !ok {
		return p, ErrNotFound
	}
	return p, nil
}

func (m *memStore) CreatePayout(_ context.Context, p StoredPayout) (StoredPayout, error) {
	if m.payouts == nil {
		m.payouts = map[string]StoredPayout{}
	}
	if old, ok := m.payouts[p.QuoteID]; ok {
		return old, nil
	}
	m.payouts[p.QuoteID] = p
	return p, nil
}

var (
	fixedNow = time.Date(2026, 11, 22, 10, 0, 0, 500_000_000, time.UTC)
	acme     = partner.Caller{KeyID: "acme", Grants: partner.Grants{Products: []string{"bank"}, Chains: partner.Chains{Source: []int64{84532}}}}
)

func strp(s string) *string { return &s }

func newTestService(store QuoteStore) Service {
	return NewService(environment.Sandbox, []byte("test-secret-0123456789"), time.Minute, store, func() time.Time { return fixedNow })
}

func TestQuoteAnswerAndRecord(t *testing.T) {
	store := &memStore{}
	q, err := newTestService(store).Quote(context.Background(), acme, QuoteRequest{
		CryptoCurrency: "usdc", Chain: 84532, FiatCurrency: "eur", Country: "de", CryptoAmount: strp("0100.50"),
	})
	if err != nil {
		t.Fatal(err)
	}
	mac := hmac.New(sha256.New, []byte("test-secret-0123456789"))
	mac.Write([]byte("bpq/v1\x00acme\x0084532\x00USDC\x00EUR\x00DE\x00crypto=100.5\x00fiat=\x00sepa_instant"))
	wantID := "bpq_84532_" + hex.EncodeToString(mac.Sum(nil)[:16])
	want := Quote{Mock: true, QuoteID: wantID, CryptoAmount: MockMoney, FiatAmount: MockMoney, Rate: MockMoney,
		Rail: "sepa_instant", EstimatedSettlement: "PT10S", ProviderFee: MockMoney, OurFee: MockMoney,
		ExpiresAt: "2026-11-22T10:01:00Z"}
	if q != want {
		t.Fatalf("quote\n got %+v\nwant %+v", q, want)
	}
	if len(store.saved) != 1 {
		t.Fatalf("%d quotes stored", len(store.saved))
	}
	s := store.saved[0]
	if s.ID != wantID || s.Owner != "acme" || s.CryptoCurrency != "USDC" || s.TokenCurrency != "USD" || s.FiatCurrency != "EUR" || s.Country != "DE" ||
		s.CryptoAmount != "100.5" || s.FiatAmount != "" || s.Rail != "sepa_instant" || !s.ExpiresAt.Equal(fixedNow.Add(time.Minute).Truncate(time.Second)) {
		t.Errorf("stored %+v", s)
	}
}

func TestInvalidQuotesStoreNothing(t *testing.T) {
	store := &memStore{}
	svc := newTestService(store)
	for _, req := range []QuoteRequest{
		{CryptoCurrency: "USDC", Chain: 84532, FiatCurrency: "EUR", Country: "DE"},
		{CryptoCurrency: "USDC", Chain: 84532, FiatCurrency: "JPY", Country: "JP", CryptoAmount: strp("1")},
		{CryptoCurrency: "USDC", Chain: 84532, FiatCurrency: "EUR", Country: "DE", CryptoAmount: strp("0")},
		{CryptoCurrency: "USDC", Chain: 84532, FiatCurrency: "EUR", Country: "DE", CryptoAmount: strp("1"), Rail: strp("")},
		{CryptoCurrency: "USDC", Chain: 11155111, FiatCurrency: "EUR", Country: "DE", CryptoAmount: strp("1")},
	} {
		_, err := svc.Quote(context.Background(), acme, req)
		var e *envelope.Error
		if !errors.As(err, &e) {
			t.Errorf("%+v: %v is not an API error", req, err)
		}
	}
	if len(store.saved) != 0 {
		t.Errorf("refused quotes were stored: %+v", store.saved)
	}
}

type brokenStore struct{ memStore }

func (*brokenStore) Save(context.Context, StoredQuote) error {
	return errors.New("redis: connection refused")
}

func TestStoreFailureIsInternal(t *testing.T) {
	_, err := newTestService(&brokenStore{}).Quote(context.Background(), acme, QuoteRequest{
		CryptoCurrency: "USDC", Chain: 84532, FiatCurrency: "EUR", Country: "DE", CryptoAmount: strp("1"),
	})
	if e, known := envelope.From(err); known || e.Code != envelope.CodeInternal {
		t.Fatalf("store failure maps to %+v (known %v), want internal", e, known)
	}
}

func TestConfigWithoutBankHasNoBankCorridors(t *testing.T) {
	c := newTestService(&memStore{}).Config(context.Background(), partner.Caller{KeyID: "f", Grants: partner.Grants{Products: []string{"fiat"}}})
	if len(c.Corridors.Bank) != 0 || c.Crypto.Chains.Source == nil || c.Crypto.Tokens == nil {
		t.Errorf("config %+v", c)
	}
}

func BenchmarkQuote(b *testing.B) {
	svc := newTestService(&discardStore{})
	req := QuoteRequest{CryptoCurrency: "USDC", Chain: 84532, FiatCurrency: "EUR", Country: "DE", CryptoAmount: strp("100")}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := svc.Quote(context.Background(), acme, req); err != nil {
			b.Fatal(err)
		}
	}
}

type discardStore struct{ memStore }

func (*discardStore) Save(context.Context, StoredQuote) error { return nil }
