package freeport

import (
	"net"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
)

// A child process started by TestTwoProcessesHoldTwoBlocks prints its
// block and exits.
func TestMain(m *testing.M) {
	// Not parallel: the package's setup, not a test (t.Parallel does not
	// apply); it and every test share the process, and so its one block.
	if os.Getenv("FREEPORT_CHILD") == "1" {
		lo, hi, ok := Block()
		if !ok {
			os.Stdout.WriteString("none\n")
			os.Exit(0)
		}
		os.Stdout.WriteString(strconv.Itoa(lo) + "-" + strconv.Itoa(hi) + "\n")
		os.Exit(0)
	}
	os.Exit(m.Run())
}

func TestTwoProcessesHoldTwoBlocks(t *testing.T) {
	t.Parallel()
	lo, hi, ok := Block()
	if !ok {
		t.Fatalf("no block held (ephemeral range from %d)", ephemeralLow())
	}
	cmd := exec.Command(os.Args[0], "-test.run", "^$")
	cmd.Env = append(os.Environ(), "FREEPORT_CHILD=1")
	out, err := cmd.Output()
	if err != nil {
		t.Fatal(err)
	}
	mine := strconv.Itoa(lo) + "-" + strconv.Itoa(hi)
	if got := strings.TrimSpace(string(out)); got == mine || got == "none" {
		t.Fatalf("this process holds %s; the child got %s", mine, got)
	}
}

func TestPortsAreDistinctInTheBlockAndSkipAHeldOne(t *testing.T) {
	t.Parallel()
	lo, hi, ok := Block()
	if !ok {
		t.Fatalf("no block held (ephemeral range from %d)", ephemeralLow())
	}
	if low := ephemeralLow(); low != 0 && hi+busOffset >= low {
		t.Fatalf("block %d-%d: its bus ports reach the ephemeral range from %d", lo, hi, low)
	}
	// Hold the port that comes next, as another server of this process
	// would: it is passed over.
	mu.Lock()
	held := base + next
	mu.Unlock()
	ln, err := net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(held))
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	ports, err := Ports(50)
	if err != nil {
		t.Fatal(err)
	}
	seen := map[int]bool{}
	for _, p := range ports {
		if p < lo || p > hi {
			t.Fatalf("port %d outside the block %d-%d", p, lo, hi)
		}
		if p == held || seen[p] {
			t.Fatalf("port %d handed out though in use: %v", p, ports)
		}
		seen[p] = true
	}
	addrs, err := Addrs(1)
	if err != nil || !strings.HasPrefix(addrs[0], "127.0.0.1:") {
		t.Fatalf("Addrs: %v %v", addrs, err)
	}
}
