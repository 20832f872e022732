// Package quotestore keeps bank payout quotes in Redis for 24 hours, with
// their owner and expiry, so execution can tell an expired quote from an
// unknown one; and the payout of each executed quote, so it runs once.
package quotestore

import (
	"context"
	"encoding/json"
	"errors"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/partnerpay/api/services/payout/internal/payout"
)

// Retention is how long a quote is remembered after it was last priced.
const Retention = 24 * time.Hour

// PayoutRetention is how long a payout record is kept.
const PayoutRetention = 30 * 24 * time.Hour

// Store is the Redis quote store.
type Store struct{ rdb redis.UniversalClient }

var _ payout.QuoteStore = (*Store)(nil)

// New returns a store on rdb.
func New(rdb redis.UniversalClient) *Store { return &Store{rdb: rdb} }

func quoteKey(id string) string  { return "payout:quote:" + id }
func payoutKey(id string) string { return "payout:executed:" + id }

// Save records q. Pricing the same request again refreshes its expiry.
func (s *Store) Save(ctx context.Context, q payout.StoredQuote) error {
	b, err := json.Marshal(q)
	if err != nil {
		return err
	}
	return s.rdb.Set(ctx, quoteKey(q.ID), b, Retention).Err()
}

// Get reads a quote.
func (s *Store) Get(ctx context.Context, id string) (payout.StoredQuote, error) {
	var q payout.StoredQuote
	return q, s.get(ctx, quoteKey(id), &q)
}

// PayoutFor reads the payout of a quote.
func (s *Store) PayoutFor(ctx context.Context, quoteID string) (payout.StoredPayout, error) {
	var p payout.StoredPayout
	return p, s.get(ctx, payoutKey(quoteID), &p)
}

// CreatePayout stores p with SET NX on the quote's id: of racing executions
// one wins, and every one of them answers the winner.
func (s *Store) CreatePayout(ctx context.Context, p payout.StoredPayout) (payout.StoredPayout, error) {
	b, err := json.Marshal(p)
	if err != nil {
		return p, err
	}
	created, err := s.rdb.SetNX(ctx, payoutKey(p.QuoteID), b, PayoutRetention).Result()
	if err != nil || created {
		return p, err
	}
	return s.PayoutFor(ctx, p.QuoteID)
}

func (s *Store) get(ctx context.Context, key string, dst any) error {
	b, err := s.rdb.Get(ctx, key).Bytes()
	if errors.Is(err, redis.Nil) {
		return payout.ErrNotFound
	}
	if err != nil {
		return err
	}
	return json.Unmarshal(b, dst)
}
