package keycmd

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/partnerpay/api/services/gateway/internal/apikey"
)

func run(t *testing.T, args ...string) (stdout string, err error) {
	t.Helper()
	var out, errb bytes.Buffer
	err = Run(args, Config{}, &out, &errb)
	return out.String(), err
}

func TestIssuePrintsTheKeyOnceAndStoresItsFingerprint(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "keys.json")
	out, err := run(t, "issue", "--file", path, "--id", "acme", "--products", "bank,fiat", "--source-chains", "84532",
		"--destination-chains", "84532,11155111", "--tokens", "84532:0x036CbD53842c5426634e7929541eC2318f3dCF7e", "--rate", "7", "--max-execution-usd", "5000")
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSuffix(out, "\n"), "\n")
	if len(lines) != 1 || !apikey.WellFormed(lines[0]) {
		t.Fatalf("stdout must be the key alone on one line, got %q", out)
	}
	key := lines[0]
	raw, _ := os.ReadFile(path)
	if strings.Contains(string(raw), key) {
		t.Fatal("the file holds the key")
	}
	var f map[string]any
	if err := json.Unmarshal(raw, &f); err != nil {
		t.Fatal(err)
	}
	want := `{"keys":[{"chains":{"destination":[84532,11155111],"source":[84532]},"fingerprint":"` + apikey.Fingerprint(key) +
		`","id":"acme","maxExecutionUsd":"5000","products":["bank","fiat"],"ratePerSecond":7,"tokens":{"84532":["0x036CbD53842c5426634e7929541eC2318f3dCF7e"]}}]}`
	if got, _ := json.Marshal(f); string(got) != want {
		t.Errorf("file\n got %s\nwant %s", got, want)
	}
}

func TestIssueDefaults(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "keys.json")
	if _, err := run(t, "issue", "--file", path, "--id", "acme", "--products", "bank,fiat", "--source-chains", "84532,84532,1"); err != nil {
		t.Fatal(err)
	}
	f, _ := apikey.Load(path)
	k, _ := f.Find("acme")
	if !slices.Equal(k.Chains.Destination, []int64{84532, 1}) || !slices.Equal(k.Chains.Source, []int64{84532, 1}) {
		t.Errorf("destination chains default to the source chains: %+v", k.Chains)
	}
	// Sandbox (no money upstream configured): the testnet's tokens, each once;
	// chain 1 is not in the sandbox catalogue.
	want := map[string][]string{"84532": {"0x036CbD53842c5426634e7929541eC2318f3dCF7e", "0x808456652fdb597867f38412077A9182bf77359F"}}
	if len(k.Tokens) != 1 || !slices.Equal(k.Tokens["84532"], want["84532"]) || k.RatePerSecond != 10 || k.MaxExecutionUSD != "25000" {
		t.Errorf("defaults: %+v", k)
	}
	if _, err := run(t, "issue", "--file", path, "--id", "bare", "--products", "fiat", "--source-chains", "84532", "--destination-chains", "", "--tokens", ""); err != nil {
		t.Fatal(err)
	}
	f, _ = apikey.Load(path)
	k, _ = f.Find("bare")
	if len(k.Chains.Destination) != 0 || len(k.Tokens) != 0 {
		t.Errorf("explicitly empty flags mean none: %+v", k)
	}
}

func TestCommandsRefuseMistakes(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "keys.json")
	if _, err := run(t, "issue", "--file", path, "--id", "acme", "--products", "bank", "--source-chains", "84532"); err != nil {
		t.Fatal(err)
	}
	before, _ := os.ReadFile(path)
	bad := [][]string{
		{"issue", "--file", path, "--id", "acme", "--products", "bank"},                            // id exists
		{"issue", "--file", path, "--id", "b", "--products", ""},                                   // no products
		{"issue", "--file", path, "--id", "b", "--products", "cards"},                              // unknown product
		{"issue", "--file", path, "--id", "b", "--products", "bank", "--source-chains", "base"},    // bad chain
		{"issue", "--file", path, "--id", "b", "--products", "bank", "--tokens", "84532:0xnothex"}, // bad token
		{"issue", "--file", path, "--id", "B A D", "--products", "bank"},                           // bad id
		{"issue", "--file", path, "--id", "b", "--products", "bank", "--rate", "0"},                // bad rate
		{"rotate", "--file", path, "--id", "nobody"},
		{"revoke", "--file", path, "--id", "nobody"},
		{"rotate", "--file", path},
		{"issue", "--id", "x", "--products", "bank"}, // no file
		{"frobnicate", "--file", path},
	}
	for _, args := range bad {
		if out, err := run(t, args...); err == nil || out != "" {
			t.Errorf("%v: err %v, stdout %q; want an error and no key", args, err, out)
		}
	}
	after, _ := os.ReadFile(path)
	if !bytes.Equal(before, after) {
		t.Error("a refused command changed the file")
	}
}

func TestRotateKeepsGrantsAndRevokeRemoves(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "keys.json")
	first, _ := run(t, "issue", "--file", path, "--id", "acme", "--products", "bank", "--source-chains", "84532", "--rate", "3")
	second, err := run(t, "rotate", "--file", path, "--id", "acme")
	if err != nil || second == first {
		t.Fatalf("rotate: %q, %v", second, err)
	}
	f, _ := apikey.Load(path)
	k, _ := f.Find("acme")
	if k.Fingerprint != apikey.Fingerprint(strings.TrimSpace(second)) || k.RatePerSecond != 3 || k.Products[0] != "bank" {
		t.Errorf("after rotate: %+v", k)
	}
	if _, err := run(t, "revoke", "--file", path, "--id", "acme"); err != nil {
		t.Fatal(err)
	}
	f, _ = apikey.Load(path)
	if len(f.Keys) != 0 {
		t.Errorf("after revoke: %+v", f.Keys)
	}
	out, err := run(t, "list", "--file", path)
	if err != nil || !strings.HasPrefix(out, "ID") || strings.Count(out, "\n") != 1 {
		t.Errorf("list of an empty file: %q, %v", out, err)
	}
}

func TestConcurrentIssuesLoseNothing(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "keys.json")
	var wg sync.WaitGroup
	for i := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if _, err := run(t, "issue", "--file", path, "--id", "k"+string(rune('a'+i)), "--products", "bank"); err != nil {
				t.Error(err)
			}
		}()
	}
	wg.Wait()
	f, err := apikey.Load(path)
	if err != nil || len(f.Keys) != 8 {
		t.Fatalf("%d keys after 8 concurrent issues, %v", len(f.Keys), err)
	}
}
