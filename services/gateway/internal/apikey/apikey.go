// Package apikey is the gateway's knowledge of partner keys: their format,
// their fingerprints (the only thing ever stored), the keys file, and the
// live set a running gateway authenticates against.
package apikey

import (
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/partnerpay/api/pkg/partner"
)

const (
	prefix    = "pk_"
	keyLen    = len(prefix) + 43 // 32 random bytes in unpadded base64url
	fpPrefix  = "sha256:"
	maxRate   = 100000
	bearerLen = len("Bearer ")
)

// Generate returns a new key: pk_ and 43 characters of base64url.
func Generate() (string, error) {
	var b [32]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", fmt.Errorf("apikey: random: %w", err)
	}
	return prefix + base64.RawURLEncoding.EncodeToString(b[:]), nil
}

// Fingerprint is what the keys file stores for key: sha256:<hex>.
func Fingerprint(key string) string {
	sum := sha256.Sum256([]byte(key))
	return fpPrefix + hex.EncodeToString(sum[:])
}

// WellFormed reports whether s has the shape of a key.
func WellFormed(s string) bool {
	if len(s) != keyLen || !strings.HasPrefix(s, prefix) {
		return false
	}
	for i := len(prefix); i < len(s); i++ {
		c := s[i]
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '-' || c == '_') {
			return false
		}
	}
	return true
}

// FromAuthorization extracts the key of an "Authorization: Bearer <key>"
// header. The scheme is case-insensitive, as HTTP says.
func FromAuthorization(h string) (key string, ok bool) {
	if len(h) <= bearerLen || !strings.EqualFold(h[:bearerLen], "Bearer ") {
		return "", false
	}
	key = h[bearerLen:]
	return key, WellFormed(key)
}

// Key is one entry of the keys file.
type Key struct {
	ID          string `json:"id"`
	Fingerprint string `json:"fingerprint"`
	partner.Grants
	RatePerSecond int `json:"ratePerSecond"`
	Narrowing
}

// File is the keys file: {"keys":[…]}.
type File struct {
	Keys []Key `json:"keys"`
}

var (
	idPattern    = regexp.MustCompile(`^[a-z0-9][a-z0-9_.-]{0,62}$`)
	fpPattern    = regexp.MustCompile(`^sha256:[0-9a-f]{64}$`)
	usdPattern   = regexp.MustCompile(`^\d+(\.\d+)?$`)
	errNotExists = errors.New("keys file does not exist")
)

// ValidID reports whether id can name a key: lower-case letters, digits, and
// . _ - after the first character, at most 63 characters.
func ValidID(id string) bool { return idPattern.MatchString(id) }

// Validate checks one entry.
func (k *Key) Validate() error {
	switch {
	case !ValidID(k.ID):
		return fmt.Errorf("key id %q: want lower-case letters, digits, '.', '_' or '-', at most 63", k.ID)
	case !fpPattern.MatchString(k.Fingerprint):
		return fmt.Errorf("key %q: fingerprint must be sha256:<64 lower-case hex>", k.ID)
	case k.RatePerSecond < 1 || k.RatePerSecond > maxRate:
		return fmt.Errorf("key %q: ratePerSecond must be 1..%d", k.ID, maxRate)
	case !usdPattern.MatchString(k.MaxExecutionUSD):
		return fmt.Errorf("key %q: maxExecutionUsd must be a decimal string", k.ID)
	}
	if err := k.Narrowing.validate(); err != nil {
		return fmt.Errorf("key %q: %w", k.ID, err)
	}
	for _, p := range k.Products {
		if !slices.Contains(partner.Products, p) {
			return fmt.Errorf("key %q: unknown product %q (known: %s)", k.ID, p, strings.Join(partner.Products, ", "))
		}
	}
	for _, c := range append(slices.Clone(k.Chains.Source), k.Chains.Destination...) {
		if c <= 0 {
			return fmt.Errorf("key %q: chain ids must be positive", k.ID)
		}
	}
	for chain := range k.Tokens {
		if n, err := strconv.ParseInt(chain, 10, 64); err != nil || n <= 0 {
			return fmt.Errorf("key %q: tokens are keyed by chain id, got %q", k.ID, chain)
		}
	}
	return nil
}

// Validate checks every entry and that ids and fingerprints are unique.
func (f *File) Validate() error {
	ids := make(map[string]bool, len(f.Keys))
	fps := make(map[string]bool, len(f.Keys))
	for i := range f.Keys {
		k := &f.Keys[i]
		if err := k.Validate(); err != nil {
			return err
		}
		if ids[k.ID] {
			return fmt.Errorf("key id %q appears twice", k.ID)
		}
		if fps[k.Fingerprint] {
			return fmt.Errorf("key %q: fingerprint appears twice", k.ID)
		}
		ids[k.ID], fps[k.Fingerprint] = true, true
	}
	return nil
}

// Find returns the entry with id.
func (f *File) Find(id string) (*Key, bool) {
	for i := range f.Keys {
		if f.Keys[i].ID == id {
			return &f.Keys[i], true
		}
	}
	return nil, false
}

// Load reads and validates the keys file. A file that does not exist reads as
// errNotExists (see IsNotExist).
func Load(path string) (*File, error) {
	b, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("%w: %s", errNotExists, path)
	}
	if err != nil {
		return nil, err
	}
	return Parse(b)
}

// Parse decodes and validates keys file content; unknown fields are refused
// so a typo in a grant does not silently drop it.
func Parse(b []byte) (*File, error) {
	var f File
	dec := json.NewDecoder(strings.NewReader(string(b)))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&f); err != nil {
		return nil, fmt.Errorf("keys file: %w", err)
	}
	if err := f.Validate(); err != nil {
		return nil, fmt.Errorf("keys file: %w", err)
	}
	return &f, nil
}

// IsNotExist reports whether err is Load's "file does not exist".
func IsNotExist(err error) bool { return errors.Is(err, errNotExists) }

// Save writes f atomically: a temporary file in the same directory, synced,
// then renamed over path. Readers see the old file or the new, never half.
func (f *File) Save(path string) error {
	if err := f.Validate(); err != nil {
		return err
	}
	if f.Keys == nil {
		f.Keys = []Key{}
	}
	b, err := json.MarshalIndent(f, "", "  ")
	if err != nil {
		return err
	}
	dir := filepath.Dir(path)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	tmp, err := os.CreateTemp(dir, "."+filepath.Base(path)+".*.tmp")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name()) // a no-op once renamed
	if _, err := tmp.Write(append(b, '\n')); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Chmod(0o600); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Sync(); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		return err
	}
	if d, err := os.Open(dir); err == nil { // make the rename itself durable
		_ = d.Sync()
		d.Close()
	}
	return nil
}
