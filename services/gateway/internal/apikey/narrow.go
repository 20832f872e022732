package apikey

import (
	"fmt"
	"net/netip"
	"strings"
	"time"
)

// The scopes of a key (DESIGN §2). A read key calls the GETs and the
// status and validate POSTs; a write key (the default) everything its
// products allow.
const (
	ScopeRead  = "read"
	ScopeWrite = "write"
)

// ExpiringWithin is how far ahead `keys list` and the gateway's gauge
// look for keys about to expire.
const ExpiringWithin = 14 * 24 * time.Hour

// maxAllowed caps a key's allow-list: a list is for a partner's egress
// addresses, not the internet's routing table.
const maxAllowed = 64

// Narrowing is what a key may be narrowed to, besides its grants: its
// scope, the addresses it may call from, the end of its life. The zero
// value narrows nothing.
type Narrowing struct {
	Scope      string     `json:"scope,omitempty"`
	AllowedIPs []string   `json:"allowedIps,omitempty"`
	ExpiresAt  *time.Time `json:"expiresAt,omitempty"`
}

// EffectiveScope is the key's scope, write when none is set.
func (n *Narrowing) EffectiveScope() string {
	if n.Scope == "" {
		return ScopeWrite
	}
	return n.Scope
}

func (n *Narrowing) validate() error {
	if n.Scope != "" && n.Scope != ScopeRead && n.Scope != ScopeWrite {
		return fmt.Errorf("scope %q: want %s or %s", n.Scope, ScopeRead, ScopeWrite)
	}
	if len(n.AllowedIPs) > maxAllowed {
		return fmt.Errorf("allowedIps: at most %d ranges", maxAllowed)
	}
	for _, s := range n.AllowedIPs {
		p, err := ParseRange(s)
		if err != nil {
			return fmt.Errorf("allowedIps: %w", err)
		}
		if p.String() != s {
			return fmt.Errorf("allowedIps: %q is not written as %q", s, p.String())
		}
	}
	return nil
}

// ParseRange reads an allow-list entry: a CIDR range (IPv4 or IPv6) or a
// single address, returned as its canonical masked prefix. An IPv4 range
// written as IPv4-mapped IPv6 (::ffff:203.0.113.0/120) is the IPv4 range
// it maps, so a list matches a client whatever family its address came in.
func ParseRange(s string) (netip.Prefix, error) {
	s = strings.TrimSpace(s)
	var p netip.Prefix
	if strings.Contains(s, "/") {
		var err error
		if p, err = netip.ParsePrefix(s); err != nil {
			return netip.Prefix{}, fmt.Errorf("%q is not an address or a CIDR range", s)
		}
	} else {
		a, err := netip.ParseAddr(s)
		if err != nil || a.Zone() != "" {
			return netip.Prefix{}, fmt.Errorf("%q is not an address or a CIDR range", s)
		}
		p = netip.PrefixFrom(a, a.BitLen())
	}
	if a := p.Addr(); a.Is4In6() {
		if p.Bits() < 96 {
			return netip.Prefix{}, fmt.Errorf("%q: an IPv4-mapped range needs at least 96 bits", s)
		}
		p = netip.PrefixFrom(a.Unmap(), p.Bits()-96)
	}
	return p.Masked(), nil
}

// Allowed is a parsed allow-list; nil allows every address.
type Allowed []netip.Prefix

func parseAllowed(list []string) Allowed {
	if len(list) == 0 {
		return nil
	}
	out := make(Allowed, 0, len(list))
	for _, s := range list {
		if p, err := ParseRange(s); err == nil { // Validate refused the others
			out = append(out, p)
		}
	}
	return out
}

// Contains reports whether a is in the list. An IPv4-mapped IPv6 address
// (a dual-stack listener's view of an IPv4 client) is its IPv4 address.
func (l Allowed) Contains(a netip.Addr) bool {
	a = a.Unmap()
	for _, p := range l {
		if p.Contains(a) {
			return true
		}
	}
	return false
}

// EnvDecode reads a comma-separated list of ranges (GATEWAY_TRUSTED_PROXIES).
func (l *Allowed) EnvDecode(v string) error {
	var out Allowed
	for _, s := range strings.Split(v, ",") {
		if s = strings.TrimSpace(s); s == "" {
			continue
		}
		p, err := ParseRange(s)
		if err != nil {
			return err
		}
		out = append(out, p)
	}
	*l = out
	return nil
}
