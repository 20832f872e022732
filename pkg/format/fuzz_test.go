package format

import (
	"strings"
	"testing"
)

// FuzzIDs: an id accepted by its shape check is exactly what NewID makes
// (prefix and 24 lower-case hex), and LogID never lets anything else
// through.
func FuzzIDs(f *testing.F) {
	for _, seed := range []string{NewID("acc_"), "acc_nope", "acc_" + strings.Repeat("A", 24), "va_0123", strings.Repeat("x", 1000)} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, s string) {
		ok := ValidID("acc_", s)
		if ok && (len(s) != 28 || strings.Trim(s[4:], "0123456789abcdef") != "" || !strings.HasPrefix(s, "acc_")) {
			t.Fatalf("%q accepted", s)
		}
		if l := LogID("acc_", s); l != s && l != Malformed || (l == s && !ok && s != "") {
			t.Fatalf("LogID(%q) = %q", s, l)
		}
	})
}

// FuzzEVMAddress: an accepted address is 0x and 40 hex digits, its
// checksummed form is accepted again unchanged, and it names the same
// account as the input.
func FuzzEVMAddress(f *testing.F) {
	for _, seed := range []string{"0x5aAeb6053F3E94C9b9A09f33669435E7Ef1BeAed", "0x5aaeb6053f3e94c9b9a09f33669435e7ef1beaed", "0x5AAeb6053F3E94C9b9A09f33669435E7Ef1BeAed", "0x", ""} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, s string) {
		sum, ok := Checksummed(s)
		if !ok {
			return
		}
		again, ok2 := Checksummed(sum)
		if !ok2 || again != sum || !strings.EqualFold(sum, s) {
			t.Fatalf("%q → %q → %q %v", s, sum, again, ok2)
		}
	})
}
