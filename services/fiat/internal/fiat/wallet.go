package fiat

import (
	"encoding/hex"
	"strings"

	"golang.org/x/crypto/sha3"
)

// ValidWallet checks an EVM address: 0x and 40 hex digits. A mixed-case
// address carries an EIP-55 checksum, which must hold: it is what catches a
// mistyped character before money is sent to it.
func ValidWallet(addr string) bool {
	if len(addr) != 42 || !strings.HasPrefix(addr, "0x") {
		return false
	}
	hexPart := addr[2:]
	if _, err := hex.DecodeString(hexPart); err != nil {
		return false
	}
	lower, upper := strings.ToLower(hexPart), strings.ToUpper(hexPart)
	if hexPart == lower || hexPart == upper {
		return true
	}
	h := sha3.NewLegacyKeccak256()
	h.Write([]byte(lower))
	sum := h.Sum(nil)
	for i := 0; i < 40; i++ {
		c := hexPart[i]
		if c >= '0' && c <= '9' {
			continue
		}
		nibble := sum[i/2]
		if i%2 == 0 {
			nibble >>= 4
		}
		wantUpper := nibble&0xf >= 8
		if wantUpper != (c >= 'A' && c <= 'F') {
			return false
		}
	}
	return true
}
