package iban

import "testing"

// FuzzValidate: an accepted IBAN is the normalised input, of a registry
// country and length, with good check digits; anything else is a labelled
// refusal, never a panic.
func FuzzValidate(f *testing.F) {
	for _, seed := range []string{"DE89370400440532013000", "de89 3704 0044 0532 0130 00", "GB29NWBK60161331926819", "DE88370400440532013000", "", "XX00", "FR1420041010050500013M02606"} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, s string) {
		n, err := Validate(s)
		if err != nil {
			if e, ok := err.(*Error); !ok || e.Label == "" {
				t.Fatalf("%q: %v", s, err)
			}
			return
		}
		if n != Normalize(s) || mod97(n[4:]+n[:4]) != 1 || !matches(n[4:], bban[n[:2]]) {
			t.Fatalf("%q accepted as %q", s, n)
		}
	})
}
