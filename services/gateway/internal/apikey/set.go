package apikey

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"strconv"
)

// Entry is a key as the gateway serves it, with the headers it forwards
// already encoded, so the per-request path only copies strings.
type Entry struct {
	ID            string
	RatePerSecond int
	Key           Key
	// GrantsHeader is the X-Partner-Grants value: the grants as compact JSON.
	GrantsHeader string
	// PolicyHeader is the RateLimit-Policy value.
	PolicyHeader string
}

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
			GrantsHeader:  string(g),
			PolicyHeader:  `"default";q=` + strconv.Itoa(k.RatePerSecond) + `;w=1`,
		}
	}
	return s
}

// Len is the number of keys.
func (s *Set) Len() int { return len(s.byDigest) }

// Lookup finds the entry of a well-formed key.
func (s *Set) Lookup(key string) (*Entry, bool) {
	e, ok := s.byDigest[sha256.Sum256([]byte(key))]
	return e, ok
}
