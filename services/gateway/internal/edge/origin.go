package edge

import (
	"net/http"
	"net/netip"
	"strings"

	"github.com/partnerpay/api/services/gateway/internal/apikey"
)

// maxHops bounds the X-Forwarded-For walk: no chain of proxies an operator
// runs is longer, and a client's padding is not worth reading.
const maxHops = 32

// origin is the address a call comes from, as a key's allow-list judges
// it (DESIGN §2): the connection's peer; or, when that peer is one of the
// proxies the operator trusts, the last X-Forwarded-For hop those proxies
// did not add. The walk goes from the right, where each trusted proxy
// appended the address it saw, and stops at the first address no trusted
// proxy has: whatever stands left of it was written by the client and
// decides nothing. ok is false when the hops the walk must read are not
// addresses (a call whose origin is unknown is allowed by no list).
func origin(r *http.Request, trusted apikey.Allowed) (addr netip.Addr, ok bool) {
	peer, err := netip.ParseAddrPort(r.RemoteAddr)
	if err != nil {
		return netip.Addr{}, false
	}
	addr = peer.Addr().Unmap()
	if !trusted.Contains(addr) {
		return addr, true
	}
	headers := r.Header.Values("X-Forwarded-For")
	hops := 0
	for i := len(headers) - 1; i >= 0; i-- {
		list := headers[i]
		for list != "" {
			var hop string
			if j := strings.LastIndexByte(list, ','); j >= 0 {
				list, hop = list[:j], list[j+1:]
			} else {
				list, hop = "", list
			}
			if hops++; hops > maxHops {
				return netip.Addr{}, false
			}
			if addr, ok = parseHop(hop); !ok {
				return netip.Addr{}, false
			}
			if !trusted.Contains(addr) {
				return addr, true
			}
		}
	}
	return addr, true // every hop is a trusted proxy: the first of them called
}

// parseHop reads one X-Forwarded-For entry: an address, or an address and
// a port as some proxies write it (203.0.113.7:4711, [2001:db8::1]:4711).
func parseHop(s string) (netip.Addr, bool) {
	s = strings.TrimSpace(s)
	if a, err := netip.ParseAddr(s); err == nil && a.Zone() == "" {
		return a.Unmap(), true
	}
	if ap, err := netip.ParseAddrPort(s); err == nil && ap.Addr().Zone() == "" {
		return ap.Addr().Unmap(), true
	}
	return netip.Addr{}, false
}
