package environment

import "testing"

func TestDerive(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name      string
		upstreams []string
		want      Name
		wantErr   bool
	}{
		{"nothing configured is sandbox", nil, Sandbox, false},
		{"empty values are not configured", []string{"", ""}, Sandbox, false},
		{"loopback is sandbox", []string{"http://127.0.0.1:8090"}, Sandbox, false},
		{"localhost is sandbox", []string{"http://localhost:8090"}, Sandbox, false},
		{"ipv6 loopback is sandbox", []string{"http://[::1]:8090"}, Sandbox, false},
		{"private address is sandbox", []string{"http://10.1.2.3"}, Sandbox, false},
		{"single-label name is sandbox", []string{"http://sandboxbank:8090"}, Sandbox, false},
		{"known sandbox host is sandbox", []string{"https://sandbox.bank-provider.com"}, Sandbox, false},
		{"known production host is production", []string{"https://api.bank-provider.com"}, Production, false},
		{"production host is case-insensitive", []string{"https://API.Bank-Provider.com."}, Production, false},
		{"one sandbox upstream makes sandbox", []string{"https://api.bank-provider.com", "http://sandboxbank:8090"}, Sandbox, false},
		{"all production upstreams make production", []string{"https://api.bank-provider.com", "https://api.payout-provider.com"}, Production, false},
		{"unknown public host stops the boot", []string{"https://bank.example.org"}, "", true},
		{"public address stops the boot", []string{"http://8.8.8.8"}, "", true},
		{"relative url stops the boot", []string{"sandboxbank:8090/x"}, "", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := Derive(tt.upstreams...)
			if (err != nil) != tt.wantErr {
				t.Fatalf("Derive(%q) error = %v, wantErr %v", tt.upstreams, err, tt.wantErr)
			}
			if got != tt.want {
				t.Errorf("Derive(%q) = %q, want %q", tt.upstreams, got, tt.want)
			}
		})
	}
}

func TestConfigDerivesFromEveryUpstream(t *testing.T) {
	t.Parallel()
	got, err := Config{BankProviderURL: "https://api.bank-provider.com", PayoutProviderURL: "http://127.0.0.1:1"}.Derive()
	if err != nil || got != Sandbox {
		t.Fatalf("Derive = %q, %v; want sandbox (payout upstream is local)", got, err)
	}
}
