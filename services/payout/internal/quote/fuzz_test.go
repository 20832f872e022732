package quote

import (
	"strings"
	"testing"
)

// FuzzParse: an id accepted by its shape check is printed back exactly as
// it was sent: <prefix>_<chain>_<32 lower-case hex>, a chain in range.
func FuzzParse(f *testing.F) {
	for _, seed := range []string{"bpq_84532_" + strings.Repeat("0", 32), "bpq_1_" + strings.Repeat("f", 32), "bpq_084532_" + strings.Repeat("0", 32), "dq_1_x", "bpq_9007199254740991_" + strings.Repeat("a", 32), ""} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, s string) {
		id, ok := payout.Parse(s)
		if ok && id.String() != s {
			t.Fatalf("%q parsed as %q", s, id.String())
		}
	})
}
