package pgtest

import (
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/partnerpay/api/testkit/pglocal"
)

// Bench is what pgbench measured: its transactions' p50 and p99 latency,
// and their rate (a second).
type Bench struct {
	P50, P99 time.Duration
	Rate     float64
}

// Pgbench runs script (pgbench's script language) n times in all on url
// from clients clients, in the protocol mode given (simple, prepared), and
// returns what it measured: the floor a benchmark of ours is set beside.
func Pgbench(tb testing.TB, url string, n, clients int, mode, script string) Bench {
	tb.Helper()
	bin, err := pglocal.Bin()
	if err != nil {
		tb.Fatal(err)
	}
	dir := tb.TempDir()
	file := filepath.Join(dir, "script.sql")
	if err := os.WriteFile(file, []byte(script), 0o644); err != nil {
		tb.Fatal(err)
	}
	cmd := exec.Command(filepath.Join(bin, "pgbench"), "-n", "-M", mode, "-c", strconv.Itoa(clients), "-j", strconv.Itoa(min(2, clients)),
		"-t", strconv.Itoa(max(1, n/clients)), "-f", file, "-l", "--log-prefix", filepath.Join(dir, "log"), url)
	cmd.Dir = dir
	start := time.Now()
	if out, err := cmd.CombinedOutput(); err != nil {
		tb.Fatalf("pgbench: %v\n%s", err, out)
	}
	elapsed := time.Since(start)
	logs, _ := filepath.Glob(filepath.Join(dir, "log*"))
	var lat []time.Duration
	for _, f := range logs {
		data, err := os.ReadFile(f)
		if err != nil {
			tb.Fatal(err)
		}
		for _, line := range strings.Split(strings.TrimSpace(string(data)), "\n") {
			// client_id transaction_no time(µs) script_no time_epoch time_us
			if f := strings.Fields(line); len(f) >= 3 {
				us, _ := strconv.Atoi(f[2])
				lat = append(lat, time.Duration(us)*time.Microsecond)
			}
		}
	}
	if len(lat) == 0 {
		tb.Fatal("pgbench logged no transaction")
	}
	slices.Sort(lat)
	return Bench{P50: lat[len(lat)/2], P99: lat[len(lat)*99/100], Rate: float64(len(lat)) / elapsed.Seconds()}
}
