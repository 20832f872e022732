package apikey

import (
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/partnerpay/api/pkg/partner"
)

func TestAllowListsMatchEitherFamily(t *testing.T) {
	t.Parallel()
	for _, c := range []struct{ in, want string }{
		{"203.0.113.0/24", "203.0.113.0/24"},
		{"203.0.113.9/24", "203.0.113.0/24"}, // host bits dropped
		{"203.0.113.9", "203.0.113.9/32"},
		{"2001:db8::/32", "2001:db8::/32"},
		{"2001:DB8::1", "2001:db8::1/128"},
		{"::ffff:203.0.113.0/120", "203.0.113.0/24"}, // IPv4-mapped: the IPv4 range
		{"::ffff:203.0.113.9", "203.0.113.9/32"},
		{" 10.0.0.0/8 ", "10.0.0.0/8"},
	} {
		p, err := ParseRange(c.in)
		if err != nil || p.String() != c.want {
			t.Errorf("ParseRange(%q) = %s, %v; want %s", c.in, p, err, c.want)
		}
	}
	for _, bad := range []string{"", "any", "203.0.113.0/33", "2001:db8::/129", "::ffff:0:0/95", "fe80::1%eth0", "203.0.113", "10.0.0.0/8/8", "1.2.3.4:80"} {
		if p, err := ParseRange(bad); err == nil {
			t.Errorf("ParseRange(%q) = %s, want an error", bad, p)
		}
	}

	var l Allowed
	if err := l.EnvDecode("203.0.113.0/24, 2001:db8::/32"); err != nil {
		t.Fatal(err)
	}
	for addr, want := range map[string]bool{
		"203.0.113.1":         true,
		"::ffff:203.0.113.1":  true, // a dual-stack listener's view of an IPv4 client
		"203.0.114.1":         false,
		"2001:db8:ffff::1":    true,
		"2001:db9::1":         false,
		"::ffff:198.51.100.1": false,
		"::203.0.113.1":       false, // IPv4-compatible, a different address
	} {
		if got := l.Contains(netip.MustParseAddr(addr)); got != want {
			t.Errorf("%s in the list: %v, want %v", addr, got, want)
		}
	}
	if Allowed(nil).Contains(netip.MustParseAddr("203.0.113.1")) {
		t.Error("an empty list contains nothing (the gateway skips it: any address)")
	}
}

func TestAKeysNarrowingIsValidatedWithTheFile(t *testing.T) {
	t.Parallel()
	key := func(n Narrowing) *File {
		return &File{Keys: []Key{{ID: "acme", Fingerprint: Fingerprint("pk_x"), RatePerSecond: 1, Grants: grants(), Narrowing: n}}}
	}
	for _, c := range []struct {
		n    Narrowing
		want string
	}{
		{Narrowing{Scope: "admin"}, `scope "admin": want read or write`},
		{Narrowing{AllowedIPs: []string{"203.0.113.9/24"}}, `"203.0.113.9/24" is not written as "203.0.113.0/24"`},
		{Narrowing{AllowedIPs: []string{"nowhere"}}, `"nowhere" is not an address or a CIDR range`},
		{Narrowing{AllowedIPs: strings.Split(strings.Repeat("10.0.0.1/32,", 65)[:12*65-1], ",")}, "at most 64 ranges"},
	} {
		err := key(c.n).Validate()
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%+v: %v, want %q", c.n, err, c.want)
		}
	}
	at := time.Now()
	if err := key(Narrowing{Scope: "read", AllowedIPs: []string{"203.0.113.0/24"}, ExpiresAt: &at}).Validate(); err != nil {
		t.Error(err)
	}
}

func TestExpiryIsTheKeysEnd(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)
	at := func(d time.Duration) *time.Time { t := now.Add(d); return &t }
	f := &File{}
	for i, end := range []*time.Time{nil, at(-time.Second), at(0), at(time.Second), at(ExpiringWithin), at(ExpiringWithin + time.Second)} {
		f.Keys = append(f.Keys, Key{ID: "k" + string(rune('a'+i)), Fingerprint: Fingerprint("pk_" + string(rune('a'+i))), RatePerSecond: 1, Grants: grants(), Narrowing: Narrowing{ExpiresAt: end}})
	}
	set := NewSet(f)
	soon, ended := set.Expiring(now)
	if soon != 2 || ended != 2 {
		t.Errorf("expiring soon %d, ended %d; want 2 and 2 (an end at now has come)", soon, ended)
	}
	e, _ := set.Lookup("pk_c") // ends at now
	if !e.Expired(now) || e.Expired(now.Add(-time.Nanosecond)) {
		t.Error("a key ends at its expiresAt, not before")
	}
}

func grants() partner.Grants {
	return partner.Grants{Products: []string{partner.ProductBank}, MaxExecutionUSD: "1000"}
}
