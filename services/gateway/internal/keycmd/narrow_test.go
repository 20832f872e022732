package keycmd

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/partnerpay/api/services/gateway/internal/apikey"
)

func TestNarrowChangesAKeyInPlace(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "keys.json")
	key, err := run(t, "issue", "--file", path, "--id", "dash", "--products", "bank", "--source-chains", "84532", "--scope", "read")
	if err != nil {
		t.Fatal(err)
	}
	load := func() *apikey.Key {
		t.Helper()
		f, err := apikey.Load(path)
		if err != nil {
			t.Fatal(err)
		}
		k, _ := f.Find("dash")
		return k
	}
	if k := load(); k.Scope != "read" || k.AllowedIPs != nil || k.ExpiresAt != nil {
		t.Fatalf("issued with --scope read: %+v", k.Narrowing)
	}
	end := time.Now().Add(3*24*time.Hour + time.Hour).UTC().Truncate(time.Second)
	out, err := run(t, "narrow", "--file", path, "--id", "dash", "--allowed-ips", "203.0.113.9/24, 2001:db8::1,::ffff:198.51.100.7", "--expires-at", end.Format(time.RFC3339))
	if err != nil || out != "" {
		t.Fatalf("narrow: %q, %v (it makes no key, so prints none)", out, err)
	}
	k := load()
	if k.Scope != "read" || strings.Join(k.AllowedIPs, " ") != "203.0.113.0/24 2001:db8::1/128 198.51.100.7/32" || k.ExpiresAt == nil || !k.ExpiresAt.Equal(end) {
		t.Fatalf("after narrow: %+v (scope kept, ranges canonical, the end set)", k.Narrowing)
	}
	if k.Fingerprint != apikey.Fingerprint(strings.TrimSpace(key)) {
		t.Fatal("narrow changed the key")
	}

	listed, err := run(t, "list", "--file", path)
	if err != nil {
		t.Fatal(err)
	}
	if !regexp.MustCompile(`dash .* read +203\.0\.113\.0/24,2001:db8::1/128,198\.51\.100\.7/32 +` + regexp.QuoteMeta(end.Format(time.RFC3339)) + ` \(expires in 3 days\)`).MatchString(listed) {
		t.Errorf("list does not mark the key expiring within 14 days:\n%s", listed)
	}

	// A rotation keeps the narrowing, as it keeps the grants.
	if _, err := run(t, "rotate", "--file", path, "--id", "dash"); err != nil {
		t.Fatal(err)
	}
	if k := load(); k.Scope != "read" || len(k.AllowedIPs) != 3 || k.ExpiresAt == nil {
		t.Errorf("after rotate: %+v", k.Narrowing)
	}

	// any and never take a narrowing back; write widens the scope.
	if _, err := run(t, "narrow", "--file", path, "--id", "dash", "--allowed-ips", "any", "--expires-at", "never", "--scope", "write"); err != nil {
		t.Fatal(err)
	}
	if k := load(); k.EffectiveScope() != "write" || k.AllowedIPs != nil || k.ExpiresAt != nil {
		t.Errorf("widened: %+v", k.Narrowing)
	}
	if listed, _ := run(t, "list", "--file", path); !regexp.MustCompile(`dash .* write +any +never +sha256:`).MatchString(listed) {
		t.Errorf("list of a widened key:\n%s", listed)
	}
}

func TestNarrowRefusesMistakesAndChangesNothing(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "keys.json")
	if _, err := run(t, "issue", "--file", path, "--id", "acme", "--products", "bank", "--source-chains", "84532"); err != nil {
		t.Fatal(err)
	}
	before, _ := os.ReadFile(path)
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--id", "acme"}, "give at least one of --scope, --allowed-ips, --expires-at"},
		{[]string{"--scope", "read"}, "--id is required"},
		{[]string{"--id", "nobody", "--scope", "read"}, `no key with id "nobody"`},
		{[]string{"--id", "acme", "--scope", "admin"}, `--scope: "admin" is not read or write`},
		{[]string{"--id", "acme", "--allowed-ips", "10.0.0.0/33"}, `--allowed-ips: "10.0.0.0/33" is not an address or a CIDR range`},
		{[]string{"--id", "acme", "--expires-at", "2027-01-31"}, `--expires-at: "2027-01-31" is not an RFC 3339 time`},
		{[]string{"--id", "acme", "--expires-at", "2020-01-31T00:00:00Z"}, "has passed; to end a key now, revoke it"},
	} {
		_, err := run(t, append([]string{"narrow", "--file", path}, c.args...)...)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("narrow %v: %v, want %q", c.args, err, c.want)
		}
	}
	if after, _ := os.ReadFile(path); string(after) != string(before) {
		t.Errorf("a refused narrow changed the file:\n%s", after)
	}
	// issue refuses the same mistakes, and writes no key.
	if out, err := run(t, "issue", "--file", path, "--id", "other", "--products", "bank", "--source-chains", "84532", "--allowed-ips", "nowhere"); err == nil || out != "" {
		t.Errorf("issue with a bad range: %q, %v", out, err)
	}
	if after, _ := os.ReadFile(path); string(after) != string(before) {
		t.Errorf("a refused issue changed the file:\n%s", after)
	}
}
