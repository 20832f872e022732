package chaintest

import (
	"bufio"
	"context"
	"fmt"
	"math/big"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"

	"github.com/ethereum/go-ethereum/common"
)

// A chain kept in a directory goes on where it stopped: the blocks it had
// (same numbers, same hashes), the balances they made, and new blocks on
// top, as the database that recorded them expects after make run starts
// again.
func TestAKeptChainGoesOnWhereItStopped(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dir := t.TempDir()
	first, err := Start(Options{ChainID: 84532, Dir: dir, Manual: true})
	if err != nil {
		t.Fatal(err)
	}
	usdc, to := first.Tokens["USDC"], common.HexToAddress("0x00000000000000000000000000000000000000a1")
	if _, err := first.Transfer(ctx, Partner, usdc, to, big.NewInt(5_000_000)); err != nil {
		t.Fatal(err)
	}
	mined := first.Commit()
	block, err := first.Client().BlockByHash(ctx, mined)
	if err != nil || block.Transactions().Len() != 1 {
		t.Fatalf("the transfer's block: %v %v", block, err)
	}
	if err := first.Close(); err != nil {
		t.Fatal(err)
	}

	again, err := Start(Options{ChainID: 84532, Dir: dir, Manual: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { again.Close() })
	c := again.Client()
	h, err := c.HeaderByNumber(ctx, block.Number())
	if err != nil || h.Hash() != mined {
		t.Fatalf("block %d after the restart: %v %v, want %s", block.Number(), h, err, mined.Hex())
	}
	if got := balanceOf(t, c, usdc, to); got.Int64() != 5_000_000 {
		t.Fatalf("the recipient holds %s after the restart, want 5000000", got)
	}
	next := again.Commit()
	nh, err := c.HeaderByHash(ctx, next)
	if err != nil || nh.Number.Cmp(block.Number()) <= 0 {
		t.Fatalf("a block after the restart: %v %v, want one after %d", nh, err, block.Number())
	}
}

// A process killed outright (make run's launcher, kill -9) loses no block
// it announced: each is written through as it is sealed.
func TestAKilledKeptChainLosesNoBlockItAnnounced(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	cmd := exec.Command(os.Args[0], "-test.run=^TestKeptChainHelper$")
	cmd.Env = append(os.Environ(), "CHAINTEST_KEPT_DIR="+dir)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	var announced string
	lines := bufio.NewScanner(out)
	for lines.Scan() {
		if h, ok := strings.CutPrefix(lines.Text(), "sealed "); ok {
			announced = h
			break
		}
	}
	if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	_ = cmd.Wait()
	if announced == "" {
		t.Fatal("the helper announced no block")
	}
	f := strings.Fields(announced) // number, hash
	ctx := context.Background()
	again, err := Start(Options{ChainID: 84532, Dir: dir, Manual: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { again.Close() })
	n, _ := new(big.Int).SetString(f[0], 10)
	h, err := again.Client().HeaderByNumber(ctx, n)
	if err != nil || h.Hash().Hex() != f[1] {
		t.Fatalf("block %s after the kill: %v %v, want %s", f[0], h, err, f[1])
	}
	if got := balanceOf(t, again.Client(), again.Tokens["USDC"], common.HexToAddress("0x00000000000000000000000000000000000000b2")); got.Int64() != 7_000_000 {
		t.Fatalf("the recipient holds %s after the kill, want 7000000", got)
	}
}

// TestKeptChainHelper is TestAKilledKeptChainLosesNoBlockItAnnounced's
// process to kill: it seals a transfer's block on a kept chain, says so,
// and waits. Run alone, it does nothing. Not parallel: it is the whole
// of its process's work, and nothing runs beside it there.
func TestKeptChainHelper(t *testing.T) {
	dir := os.Getenv("CHAINTEST_KEPT_DIR")
	if dir == "" {
		return
	}
	ctx := context.Background()
	c, err := Start(Options{ChainID: 84532, Dir: dir, Manual: true})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Transfer(ctx, Partner, c.Tokens["USDC"], common.HexToAddress("0x00000000000000000000000000000000000000b2"), big.NewInt(7_000_000)); err != nil {
		t.Fatal(err)
	}
	hash := c.Commit()
	h, err := c.Client().HeaderByHash(ctx, hash)
	if err != nil {
		t.Fatal(err)
	}
	fmt.Printf("sealed %d %s\n", h.Number, hash.Hex())
	select {} // until killed
}

// A directory kept by another genesis (the token rebuilt, another chain)
// is refused with what to do, not opened.
func TestAKeptChainOfAnotherGenesisIsRefusedSayingWhatToDo(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	c, err := Start(Options{ChainID: 84532, Dir: dir, Manual: true})
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := Start(Options{ChainID: 11155111, Dir: dir, Manual: true}); err == nil || !strings.Contains(err.Error(), "remove "+dir+" to start it again") {
		t.Fatalf("%v, want the genesis mismatch and what to do", err)
	}
}
