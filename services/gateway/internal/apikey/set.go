package apikey

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"time"

	"github.com/partnerpay/api/services/gateway/internal/ratelimit"
)

// Entry is a key as the gateway serves it, with the header values it sends
// already built, so the per-request path allocates none of them. The value
// slices are shared: they have len == cap, so an append elsewhere copies.
type Entry struct {
	ID            string
	RatePerSecond int
	Key           Key
	// IDValue is the X-Partner-Key-Id value.
	IDValue []string
	// GrantsValue is the X-Partner-Grants value: the grants as compact JSON.
	GrantsValue []string
	// PolicyValue is the RateLimit-Policy value.
	PolicyValue []string
	// ReadOnly: the key's scope is read.
	ReadOnly bool
	// Allowed are the addresses the key may call from; nil, any.
	Allowed Allowed
	// Expires is the end of the key's life; zero, never.
	Expires time.Time
}

// Expired reports whether the key's life has ended at now.
func (e *Entry) Expired(now time.Time) bool { return !e.Expires.IsZero() && !now.Before(e.Expires) }

// HasProduct reports whether the key carries product.
func (e *Entry) HasProduct(product string) bool { return e.Key.HasProduct(product) }

// Set is an immutable set of keys, looked up by the SHA-256 of the key.
type Set struct {
	byDigest map[[32]byte]*Entry
}

// NewSet indexes f by fingerprint.
func NewSet(f *File) *Set {
	s := &Set{byDigest: make(map[[32]byte]*Entry, len(f.Keys))}
	for _, k := range f.Keys {
		var d [32]byte
		if _, err := hex.Decode(d[:], []byte(k.Fingerprint[len(fpPrefix):])); err != nil {
			continue // Validate already refused it
		}
		g, _ := json.Marshal(k.Grants)
		s.byDigest[d] = &Entry{
			ID:            k.ID,
			RatePerSecond: k.RatePerSecond,
			Key:           k,
			IDValue:       []string{k.ID},
			GrantsValue:   []string{string(g)},
			PolicyValue:   []string{ratelimit.Policy(k.RatePerSecond)},
			ReadOnly:      k.Scope == ScopeRead,
			Allowed:       parseAllowed(k.AllowedIPs),
		}
		if k.ExpiresAt != nil {
			s.byDigest[d].Expires = *k.ExpiresAt
		}
	}
	return s
}

// Len is the number of keys.
func (s *Set) Len() int { return len(s.byDigest) }

// IDs are the key ids of the set.
func (s *Set) IDs() []string {
	ids := make([]string, 0, len(s.byDigest))
	for _, e := range s.byDigest {
		ids = append(ids, e.ID)
	}
	return ids
}

// Lookup finds the entry of a well-formed key.
func (s *Set) Lookup(key string) (*Entry, bool) {
	var buf [keyLen]byte // a key of the issued length is hashed from the stack
	b := buf[:]
	if len(key) != keyLen {
		b = []byte(key)
	}
	copy(b, key)
	e, ok := s.byDigest[sha256.Sum256(b)]
	return e, ok
}

// Expiring counts the keys whose life ends within ExpiringWithin of now,
// and those already ended (refused, but still in the file).
func (s *Set) Expiring(now time.Time) (soon, ended int) {
	for _, e := range s.byDigest {
		switch {
		case e.Expires.IsZero():
		case e.Expired(now):
			ended++
		case e.Expires.Sub(now) <= ExpiringWithin:
			soon++
		}
	}
	return soon, ended
}
