package format

import "testing"

func TestChecksummed(t *testing.T) {
	t.Parallel()
	// EIP-55's own examples, and the all-lower and all-upper forms of one.
	for in, want := range map[string]string{
		"0x5aAeb6053F3E94C9b9A09f33669435E7Ef1BeAed": "0x5aAeb6053F3E94C9b9A09f33669435E7Ef1BeAed",
		"0xfB6916095ca1df60bB79Ce92cE3Ea74c37c5d359": "0xfB6916095ca1df60bB79Ce92cE3Ea74c37c5d359",
		"0xdbF03B407c01E7cD3CBea99509d93f8DDDC8C6FB": "0xdbF03B407c01E7cD3CBea99509d93f8DDDC8C6FB",
		"0xD1220A0cf47c7B9Be7A2E6BA89F429762e7b9aDb": "0xD1220A0cf47c7B9Be7A2E6BA89F429762e7b9aDb",
		"0x5aaeb6053f3e94c9b9a09f33669435e7ef1beaed": "0x5aAeb6053F3E94C9b9A09f33669435E7Ef1BeAed",
		"0x5AAEB6053F3E94C9B9A09F33669435E7EF1BEAED": "0x5aAeb6053F3E94C9b9A09f33669435E7Ef1BeAed",
	} {
		if got, ok := Checksummed(in); !ok || got != want {
			t.Errorf("Checksummed(%s) = %s, %v; want %s", in, got, ok, want)
		}
	}
	for _, a := range []string{
		"0x5AAeb6053F3E94C9b9A09f33669435E7Ef1BeAed", // one letter's case flipped
		"0x5aAeb6053F3E94C9b9A09f33669435E7Ef1BeAe",  // 39 digits
		"5aAeb6053F3E94C9b9A09f33669435E7Ef1BeAed00",
		"0x5aAeb6053F3E94C9b9A09f33669435E7Ef1BeAeg",
		"0X5aAeb6053F3E94C9b9A09f33669435E7Ef1BeAed",
		"",
	} {
		if _, ok := Checksummed(a); ok {
			t.Errorf("%s accepted", a)
		}
	}
}
