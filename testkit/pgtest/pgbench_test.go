package pgtest

import (
	"strings"
	"testing"
	"time"
)

// A transaction's time is read from when each client's transactions
// ended, not from the time pgbench logged (0 µs for most short ones), and
// a log whose ends do not move, or that is not pgbench's, is refused.
func TestPgbenchLatenciesComeFromWhenTransactionsEnded(t *testing.T) {
	t.Parallel()
	// Two clients; the logged times are zeros, as pgbench 15 wrote them.
	logs := [][]byte{
		[]byte("0 0 0 0 1764460800 000100\n0 1 0 0 1764460800 000430\n0 2 0 0 1764460800 000760\n"),
		[]byte("1 1 0 0 1764460800 000900\n1 0 0 0 1764460800 000500\n"),
	}
	got, err := latencies(logs)
	if err != nil {
		t.Fatal(err)
	}
	want := map[time.Duration]int{330 * time.Microsecond: 2, 400 * time.Microsecond: 1}
	for _, d := range got {
		want[d]--
	}
	for d, n := range want {
		if n != 0 {
			t.Errorf("latencies %v: want 330 µs twice and 400 µs once (%v off by %d)", got, d, n)
		}
	}
	for name, log := range map[string]string{
		"a log of zeros":               "0 0 0 0 0 0\n0 1 0 0 0 0\n0 2 0 0 0 0\n",
		"ends that do not move":        "0 0 0 0 1764460800 000100\n0 1 0 0 1764460800 000100\n",
		"ends that go back":            "0 0 0 0 1764460800 000500\n0 1 0 0 1764460800 000100\n",
		"not pgbench's":                "latency average = 0.330 ms\n",
		"a field that is not a number": "0 0 0 0 1764460800 x\n0 1 0 0 1764460800 000100\n",
		"one transaction a client":     "0 0 330 0 1764460800 000100\n1 0 330 0 1764460800 000200\n",
	} {
		if lat, err := latencies([][]byte{[]byte(log)}); err == nil {
			t.Errorf("%s: latencies %v, want it refused", name, lat)
		} else if !strings.Contains(err.Error(), "pgbench") {
			t.Errorf("%s: %v, want the error to name pgbench's log", name, err)
		}
	}
}
