// Package quotestore keeps bank payout quotes in Redis for 24 hours, with
// their owner and expiry, so execution can tell an expired quote from an
// unknown one.
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

// ErrNotFound is a quote id the store does not know.
var ErrNotFound = errors.New("quote not found")

// Store is the Redis quote store.
type Store struct{ rdb redis.UniversalClient }

var _ payout.QuoteStore = (*Store)(nil)

// New returns a store on rdb.
func New(rdb redis.UniversalClient) *Store { return &Store{rdb: rdb} }

func key(id string) string { return "payout:quote:" + id }

// Save records q. Pricing the same request again refreshes its expiry.
func (s *Store) Save(ctx context.Context, q payout.StoredQuote) error {
	b, err := json.Marshal(q)
	if err != nil {
		return err
	}
	return s.rdb.Set(ctx, key(q.ID), b, Retention).Err()
}

// Get reads a quote.
func (s *Store) Get(ctx context.Context, id string) (payout.StoredQuote, error) {
	var q payout.StoredQuote
	b, err := s.rdb.Get(ctx, key(id)).Bytes()
	if errors.Is(err, redis.Nil) {
		return q, ErrNotFound
	}
	if err != nil {
		return q, err
	}
	return q, json.Unmarshal(b, &q)
}
