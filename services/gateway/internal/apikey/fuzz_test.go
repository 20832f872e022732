package apikey

import (
	"encoding/json"
	"strings"
	"testing"
)

// FuzzFromAuthorization: a header yields a key only when it is "Bearer "
// (any case) and a well-formed key, nothing more.
func FuzzFromAuthorization(f *testing.F) {
	for _, seed := range []string{"Bearer pk_" + strings.Repeat("a", 43), "bearer pk_" + strings.Repeat("A", 43), "Basic x", "Bearer ", "", "Bearer  pk_" + strings.Repeat("a", 43)} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, h string) {
		key, ok := FromAuthorization(h)
		if ok && (!WellFormed(key) || !strings.EqualFold(h[:7], "Bearer ") || h[7:] != key) {
			t.Fatalf("%q → %q", h, key)
		}
	})
}

// FuzzParse: a keys file either fails to parse or is a valid set that
// survives a round trip; never a panic.
func FuzzParse(f *testing.F) {
	good, _ := json.Marshal(File{Keys: []Key{validKey("a"), validKey("b")}})
	for _, seed := range []string{string(good), `{"keys":[]}`, `{"keys":[{"id":"a"}]}`, `{`, `{"keys":[],"extra":1}`, `null`} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		file, err := Parse(b)
		if err != nil {
			return
		}
		if err := file.Validate(); err != nil {
			t.Fatalf("parsed but invalid: %v", err)
		}
		again, _ := json.Marshal(file)
		if _, err := Parse(again); err != nil {
			t.Fatalf("round trip: %v", err)
		}
	})
}
