package chain

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/partnerpay/api/pkg/config"
	"github.com/partnerpay/api/pkg/environment"
	"github.com/partnerpay/api/testkit/chaintest"
)

// A chain's node is a money upstream (DESIGN §10): the boot checks its own
// eth_chainId. A node of another chain, or a testnet in production, stops
// the boot; the sandbox's node of its own chain is watched.
func TestTheBootChecksEachNodeIsItsChain(t *testing.T) {
	t.Parallel()
	c := servedChain(t)
	ctx, log := context.Background(), slog.New(slog.DiscardHandler)
	for _, tt := range []struct {
		name string
		cfg  Config
		env  environment.Name
		want string
	}{
		{"its own chain", Config{BaseSepolia: c.URL}, environment.Sandbox, ""},
		{"another chain's node", Config{EthereumSepolia: c.URL}, environment.Sandbox, "CHAIN_RPC_URL_11155111 reaches chain 84532, not 11155111"},
		{"a testnet in production", Config{BaseSepolia: c.URL}, environment.Production, "chain 84532 is not in the production catalogue"},
	} {
		nodes, err := Dial(ctx, tt.cfg, tt.env, time.Second, log)
		switch {
		case tt.want == "" && (err != nil || nodes[84532] == nil || nodes[84532].Confirmations != 2):
			t.Errorf("%s: %v %+v", tt.name, err, nodes)
		case tt.want != "" && (err == nil || !strings.Contains(err.Error(), tt.want)):
			t.Errorf("%s: %v, want %q", tt.name, err, tt.want)
		}
		Close(nodes)
	}
}

// Only the public side of the deposit wallet is taken.
func TestAnExtendedPrivateKeyIsRefused(t *testing.T) {
	t.Parallel()
	keys, a := testWallet(t)
	for i := range int64(3) {
		got, err := a.At(i)
		want, _ := keys.Address(uint32(i))
		if err != nil || got != want.Hex() {
			t.Errorf("address %d: %s %v, want %s (the seed's)", i, got, err, want.Hex())
		}
	}
	if _, err := NewAddresses("not a key"); err == nil {
		t.Error("a malformed key was taken")
	}
	if _, err := NewAddresses(keys.XPrv()); err != ErrPrivateKey {
		t.Errorf("an extended private key: %v, want ErrPrivateKey", err)
	}
}

// The signer's sweep keys are the private side of the service's deposit
// addresses: each address's key is the one the seed gives it, and a key of
// another wallet, or a public one, is refused at boot.
func TestSweepKeysAreThePrivateSideOfTheAddresses(t *testing.T) {
	t.Parallel()
	keys, err := chaintest.NewDepositKeys([]byte("a seed of thirty-two bytes or so, for a test"))
	if err != nil {
		t.Fatal(err)
	}
	addresses, err := NewAddresses(keys.XPub())
	if err != nil {
		t.Fatal(err)
	}
	sweep, err := NewSweepKeys(keys.XPrv(), addresses)
	if err != nil {
		t.Fatal(err)
	}
	for _, i := range []int64{0, 7, 4096} {
		k, err := sweep.Key(i)
		want, _ := keys.Key(uint32(i))
		if err != nil || !k.Equal(want) {
			t.Errorf("the key of index %d is not the seed's (%v)", i, err)
		}
	}
	other, err := chaintest.NewDepositKeys([]byte("another seed, of another wallet, 32+ bytes"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := NewSweepKeys(other.XPrv(), addresses); err == nil || strings.Contains(err.Error(), other.XPrv()) {
		t.Errorf("another wallet's private key: %v, want refused (and the key in no error)", err)
	}
	if _, err := NewSweepKeys(keys.XPub(), addresses); err == nil {
		t.Error("a public key taken as DEPOSIT_XPRV")
	}
}

// A treasury key that is not one is refused without being repeated: the
// key is in no error (nor log: the boot prints the error).
func TestABadTreasuryKeyIsNotRepeated(t *testing.T) {
	t.Parallel()
	bad := "0x" + strings.Repeat("5de4111afa1a4b94", 4)[:63] + "z"
	_, err := NewSigner(nil, bad, nil, nil, SignerOptions{}, nil, nil, nil)
	if err == nil || strings.Contains(err.Error(), bad[2:20]) {
		t.Errorf("a malformed treasury key: %v, want refused without the key", err)
	}
}

// The boot says what this deployment does not do (DESIGN §10): the chains
// without a node (their deposits are not seen), refunds without a treasury
// key (not sent), deposits without DEPOSIT_XPRV (not swept); and with
// neither missing, it says nothing of the kind.
func TestTheBootSaysWhatItDoesNotDo(t *testing.T) {
	t.Parallel()
	c := servedChain(t)
	keys, err := chaintest.NewDepositKeys([]byte("a seed of thirty-two bytes or so, for a test"))
	if err != nil {
		t.Fatal(err)
	}
	addresses, err := NewAddresses(keys.XPub())
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	// lines are the log's lines, each as "LEVEL msg key=value …" of the
	// attributes named.
	boot := func(cfg Config, attrs ...string) (signers int, lines []string) {
		t.Helper()
		var buf bytes.Buffer
		log := slog.New(slog.NewJSONHandler(&buf, nil))
		nodes, err := Dial(ctx, cfg, environment.Sandbox, time.Second, log)
		if err != nil {
			t.Fatal(err)
		}
		defer Close(nodes)
		s, err := Signers(cfg, nodes, addresses, nil, time.Now, log, prometheus.NewRegistry())
		if err != nil {
			t.Fatal(err)
		}
		for _, l := range strings.Split(strings.TrimSpace(buf.String()), "\n") {
			var m map[string]any
			if err := json.Unmarshal([]byte(l), &m); err != nil {
				t.Fatalf("a log line that is not JSON: %q", l)
			}
			line := fmt.Sprint(m["level"], " ", m["msg"])
			for _, a := range attrs {
				if v, ok := m[a]; ok {
					line += fmt.Sprint(" ", a, "=", v)
				}
			}
			lines = append(lines, line)
		}
		return len(s), lines
	}
	treasury := Config{BaseSepolia: c.URL, TreasuryKey: config.Secret(chaintest.Treasury.KeyHex())}
	whole := treasury
	whole.DepositXPrv = config.Secret(keys.XPrv())
	for _, tt := range []struct {
		name    string
		cfg     Config
		signers int
		want    []string
	}{
		{"a node, no treasury key", Config{BaseSepolia: c.URL}, 0, []string{
			"WARN chains without CHAIN_RPC_URL_<id>: their deposits are not seen chains=11155111 (Ethereum Sepolia)",
			"INFO chains watched=84532 (Base Sepolia), 2 confirmations",
			"WARN no TREASURY_KEY: refunds are not sent, and stay pending until the service has one",
		}},
		{"a treasury key, no DEPOSIT_XPRV", treasury, 1, []string{
			"WARN chains without CHAIN_RPC_URL_<id>: their deposits are not seen chains=11155111 (Ethereum Sepolia)",
			"INFO chains watched=84532 (Base Sepolia), 2 confirmations",
			"WARN no DEPOSIT_XPRV: deposits are not swept to the treasury, which pays the refunds from what it holds",
		}},
		{"both", whole, 1, []string{
			"WARN chains without CHAIN_RPC_URL_<id>: their deposits are not seen chains=11155111 (Ethereum Sepolia)",
			"INFO chains watched=84532 (Base Sepolia), 2 confirmations",
		}},
		{"no node at all", Config{TreasuryKey: treasury.TreasuryKey}, 0, []string{
			"WARN chains without CHAIN_RPC_URL_<id>: their deposits are not seen chains=11155111 (Ethereum Sepolia); 84532 (Base Sepolia)",
		}},
	} {
		signers, lines := boot(tt.cfg, "chains", "watched")
		if signers != tt.signers || !slices.Equal(lines, tt.want) {
			t.Errorf("%s: %d signers, the log:\n%s\nwant %d signers, the log:\n%s", tt.name, signers, strings.Join(lines, "\n"),
				tt.signers, strings.Join(tt.want, "\n"))
		}
	}
}

// servedChain is a local Base Sepolia served over JSON-RPC on a free port,
// mined only when the test says.
func servedChain(t *testing.T) *chaintest.Chain {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	c, err := chaintest.Start(chaintest.Options{ChainID: 84532, Addr: addr, Manual: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// A node that stalls fails the call after callWait's bound instead of
// holding the worker's round: the next round asks again.
func TestACallToANodeThatStallsFails(t *testing.T) {
	t.Parallel()
	release := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-release:
		case <-r.Context().Done():
		case <-time.After(30 * time.Second):
		}
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"jsonrpc":"2.0","id":1,"result":"0x1"}`))
	}))
	defer srv.Close()
	defer close(release)
	c, err := dialNode(context.Background(), srv.URL, 50*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_, err = c.BlockNumber(context.Background())
	var ne net.Error
	if !errors.As(err, &ne) || !ne.Timeout() {
		t.Fatalf("eth_blockNumber to a stalled node: %v, want a timeout", err)
	}
}
