package quotestore

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/partnerpay/api/pkg/redistest"
	"github.com/partnerpay/api/services/payout/internal/payout"
)

func TestSaveGetAndRetention(t *testing.T) {
	srv := redistest.Start(t)
	rdb := redis.NewClient(&redis.Options{Addr: srv.Addr})
	defer rdb.Close()
	s := New(rdb)
	ctx := context.Background()
	q := payout.StoredQuote{ID: "bpq_84532_aa", Owner: "acme", Chain: 84532, CryptoCurrency: "USDC", FiatCurrency: "EUR",
		Country: "DE", CryptoAmount: "100", Rail: "sepa", Settlement: "P1D", ExpiresAt: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}
	if err := s.Save(ctx, q); err != nil {
		t.Fatal(err)
	}
	got, err := s.Get(ctx, q.ID)
	if err != nil || got != q {
		t.Fatalf("Get = %+v, %v; want %+v", got, err, q)
	}
	ttl := rdb.TTL(ctx, "payout:quote:"+q.ID).Val()
	if ttl < 23*time.Hour || ttl > 24*time.Hour {
		t.Errorf("retention %s, want 24h", ttl)
	}
	if _, err := s.Get(ctx, "bpq_1_nope"); !errors.Is(err, payout.ErrNotFound) {
		t.Errorf("unknown id: %v", err)
	}
}
