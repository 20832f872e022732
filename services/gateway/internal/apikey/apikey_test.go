package apikey

import (
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/partnerpay/api/pkg/partner"
)

func TestGenerateAndFingerprint(t *testing.T) {
	t.Parallel()
	seen := map[string]bool{}
	for range 100 {
		k, err := Generate()
		if err != nil {
			t.Fatal(err)
		}
		if !regexp.MustCompile(`^pk_[A-Za-z0-9_-]{43}$`).MatchString(k) || !WellFormed(k) {
			t.Fatalf("key %q is not pk_ + 43 base64url characters", k)
		}
		if seen[k] {
			t.Fatal("duplicate key")
		}
		seen[k] = true
	}
	// SHA-256 of the whole key, prefix included (echo -n pk_abc | sha256sum).
	if got := Fingerprint("pk_abc"); got != "sha256:"+sha256Hex("pk_abc") {
		t.Fatalf("fingerprint %q", got)
	}
	if Fingerprint("pk_a") == Fingerprint("pk_b") {
		t.Fatal("fingerprints collide")
	}
}

func TestFromAuthorization(t *testing.T) {
	t.Parallel()
	key := "pk_" + strings.Repeat("a", 43)
	tests := []struct {
		header string
		ok     bool
	}{
		{"Bearer " + key, true},
		{"bearer " + key, true},
		{"BEARER " + key, true},
		{key, false},
		{"Basic " + key, false},
		{"Bearer  " + key, false},
		{"Bearer " + key + " ", false},
		{"Bearer pk_" + strings.Repeat("a", 42), false},
		{"Bearer sk_" + strings.Repeat("a", 43), false},
		{"Bearer pk_" + strings.Repeat("a", 42) + "=", false},
		{"Bearer pk_" + strings.Repeat("a", 42) + "+", false},
		{"Bearer ", false},
		{"", false},
	}
	for _, tt := range tests {
		if _, ok := FromAuthorization(tt.header); ok != tt.ok {
			t.Errorf("FromAuthorization(%q) ok = %v, want %v", tt.header, ok, tt.ok)
		}
	}
}

func validKey(id string) Key {
	return Key{ID: id, Fingerprint: Fingerprint("pk_" + id), RatePerSecond: 10,
		Grants: partner.Grants{Products: []string{"bank"}, MaxExecutionUSD: "25000"}}
}

func TestParseRefusesBadFiles(t *testing.T) {
	t.Parallel()
	dup := validKey("a")
	dupFP := validKey("b")
	dupFP.Fingerprint = dup.Fingerprint
	tests := map[string]string{
		"not json":              `{"keys":[`,
		"unknown field":         `{"keys":[],"extra":1}`,
		"unknown key field":     `{"keys":[{"id":"a","fingerprint":"` + dup.Fingerprint + `","ratePerSecond":1,"maxExecutionUsd":"1","product":["bank"]}]}`,
		"bad fingerprint":       `{"keys":[{"id":"a","fingerprint":"md5:abc","ratePerSecond":1,"maxExecutionUsd":"1"}]}`,
		"zero rate":             `{"keys":[{"id":"a","fingerprint":"` + dup.Fingerprint + `","ratePerSecond":0,"maxExecutionUsd":"1"}]}`,
		"unknown product":       `{"keys":[{"id":"a","fingerprint":"` + dup.Fingerprint + `","ratePerSecond":1,"maxExecutionUsd":"1","products":["cards"]}]}`,
		"bad id":                `{"keys":[{"id":"Has Space","fingerprint":"` + dup.Fingerprint + `","ratePerSecond":1,"maxExecutionUsd":"1"}]}`,
		"negative chain":        `{"keys":[{"id":"a","fingerprint":"` + dup.Fingerprint + `","ratePerSecond":1,"maxExecutionUsd":"1","chains":{"source":[-1]}}]}`,
		"non-numeric token":     `{"keys":[{"id":"a","fingerprint":"` + dup.Fingerprint + `","ratePerSecond":1,"maxExecutionUsd":"1","tokens":{"base":["0x1"]}}]}`,
		"bad ceiling":           `{"keys":[{"id":"a","fingerprint":"` + dup.Fingerprint + `","ratePerSecond":1,"maxExecutionUsd":"lots"}]}`,
		"duplicate id":          `{"keys":[{"id":"a","fingerprint":"` + dup.Fingerprint + `","ratePerSecond":1,"maxExecutionUsd":"1"},{"id":"a","fingerprint":"` + Fingerprint("x") + `","ratePerSecond":1,"maxExecutionUsd":"1"}]}`,
		"duplicate fingerprint": `{"keys":[{"id":"a","fingerprint":"` + dup.Fingerprint + `","ratePerSecond":1,"maxExecutionUsd":"1"},{"id":"b","fingerprint":"` + dupFP.Fingerprint + `","ratePerSecond":1,"maxExecutionUsd":"1"}]}`,
	}
	for name, content := range tests {
		if _, err := Parse([]byte(content)); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
}

func TestSaveIsAtomicAndPrivate(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "keys.json")
	f := &File{Keys: []Key{validKey("a"), validKey("b")}}
	if err := f.Save(path); err != nil {
		t.Fatal(err)
	}
	fi, err := os.Stat(path)
	if err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("mode %v, %v", fi.Mode(), err)
	}
	got, err := Load(path)
	if err != nil || len(got.Keys) != 2 || got.Keys[1].ID != "b" {
		t.Fatalf("round trip: %+v, %v", got, err)
	}
	entries, _ := os.ReadDir(filepath.Dir(path))
	if len(entries) != 1 {
		t.Errorf("temporary files left behind: %v", entries)
	}
}

func TestStoreReload(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "keys.json")
	log := slog.New(slog.DiscardHandler)
	s, err := NewStore(path, log)
	if err != nil || s.Current().Len() != 0 {
		t.Fatalf("missing file: %v, %d keys", err, s.Current().Len())
	}
	var loads, failures int
	s.OnLoad = func(*Set) { loads++ }
	s.OnLoadFailed = func() { failures++ }

	if err := (&File{Keys: []Key{validKey("a")}}).Save(path); err != nil {
		t.Fatal(err)
	}
	s.Reload()
	if _, ok := s.Current().Lookup("pk_a"); !ok || loads != 1 {
		t.Fatalf("new file not loaded (loads %d)", loads)
	}
	s.Reload() // unchanged: not re-read
	if loads != 1 {
		t.Errorf("an unchanged file was re-read")
	}
	if err := os.WriteFile(path, []byte("{broken"), 0o600); err != nil {
		t.Fatal(err)
	}
	s.Reload()
	if _, ok := s.Current().Lookup("pk_a"); !ok || failures != 1 {
		t.Fatalf("a broken file must keep the last good set (failures %d)", failures)
	}
	if err := os.Remove(path); err != nil {
		t.Fatal(err)
	}
	s.Reload()
	if _, ok := s.Current().Lookup("pk_a"); !ok || failures != 2 {
		t.Fatalf("a vanished file must keep the last good set (failures %d)", failures)
	}
	if _, err := os.Stat(path); err == nil {
		t.Fatal("unexpected file")
	}
	if err := os.WriteFile(path, []byte("{broken"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := NewStore(path, log); err == nil {
		t.Error("a broken file at boot must stop the boot")
	}
}

func sha256Hex(s string) string {
	out, err := exec.Command("sh", "-c", "printf %s '"+s+"' | sha256sum").Output()
	if err != nil {
		panic(err)
	}
	return strings.Fields(string(out))[0]
}
