package format

import (
	"encoding/hex"
	"strings"

	"golang.org/x/crypto/sha3"

	"github.com/partnerpay/api/pkg/envelope"
)

// EVMAddress checks an EVM address field: 0x and 40 hex digits. A mixed-case
// address carries an EIP-55 checksum, which must hold: it is what catches a
// mistyped character before money is sent to it. It returns the address in
// its checksummed form.
func EVMAddress(field, addr string) (string, error) {
	if addr == "" {
		return "", envelope.InvalidRequest(field + " is required: an EVM address, 0x followed by 40 hex digits.")
	}
	sum, ok := Checksummed(addr)
	if !ok {
		return "", envelope.InvalidRequest(field + " must be 0x followed by 40 hex digits, with a valid EIP-55 checksum if it is mixed-case.")
	}
	return sum, nil
}

// Checksummed returns addr in EIP-55 form; ok is false when addr is not 0x
// and 40 hex digits, or is mixed-case with a wrong checksum.
func Checksummed(addr string) (string, bool) {
	if len(addr) != 42 || !strings.HasPrefix(addr, "0x") {
		return "", false
	}
	hexPart := addr[2:]
	if _, err := hex.DecodeString(hexPart); err != nil {
		return "", false
	}
	lower := strings.ToLower(hexPart)
	h := sha3.NewLegacyKeccak256() // EIP-55 hashes with Keccak-256, not NIST SHA3-256
	h.Write([]byte(lower))
	digest := h.Sum(nil)
	out := []byte("0x" + lower)
	for i := 0; i < 40; i++ {
		nibble := digest[i/2]
		if i%2 == 0 {
			nibble >>= 4
		}
		if c := out[2+i]; c >= 'a' && nibble&0xf >= 8 {
			out[2+i] = c - 'a' + 'A'
		}
	}
	sum := string(out)
	mixed := hexPart != lower && hexPart != strings.ToUpper(hexPart)
	if mixed && sum[2:] != hexPart {
		return "", false
	}
	return sum, true
}
