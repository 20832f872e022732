package pgtest

import (
	"cmp"
	"errors"
	"fmt"
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
// from clients clients (each at least twice: a client's first is not
// timed, see latencies), in the protocol mode given (simple, prepared),
// and returns what it measured: the floor a benchmark of ours is set
// beside.
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
		"-t", strconv.Itoa(max(2, n/clients)), "-f", file, "-l", "--log-prefix", filepath.Join(dir, "log"), url)
	cmd.Dir = dir
	start := time.Now()
	if out, err := cmd.CombinedOutput(); err != nil {
		tb.Fatalf("pgbench: %v\n%s", err, out)
	}
	elapsed := time.Since(start)
	logs, _ := filepath.Glob(filepath.Join(dir, "log*"))
	var data [][]byte
	for _, f := range logs {
		b, err := os.ReadFile(f)
		if err != nil {
			tb.Fatal(err)
		}
		data = append(data, b)
	}
	lat, err := latencies(data)
	if err != nil {
		tb.Fatal(err)
	}
	slices.Sort(lat)
	return Bench{P50: lat[len(lat)/2], P99: lat[len(lat)*99/100], Rate: float64(len(lat)) / elapsed.Seconds()}
}

// latencies are the transactions' times in pgbench's per-transaction logs
// (one line a transaction: client_id transaction_no time script_no
// time_epoch time_us), taken from when each client's transactions ended:
// a transaction's time is its end less the end of the client's one
// before (a client sends its next transaction as soon as one ends; each
// client's first is not counted). The logged time itself is not used:
// pgbench (15) logged 0 µs for most sub-millisecond transactions here,
// 247 of 300 for a lookup whose mean was 0.33 ms. A log whose ends do not
// move, or that cannot be read, is refused: a floor must not read zero.
func latencies(logs [][]byte) ([]time.Duration, error) {
	type end struct{ n, us int64 }
	ends := map[string][]end{}
	for _, data := range logs {
		for _, line := range strings.Split(strings.TrimSpace(string(data)), "\n") {
			f := strings.Fields(line)
			if len(f) == 0 {
				continue
			}
			if len(f) < 6 {
				return nil, fmt.Errorf("pgbench log: %q is not a transaction's line", line)
			}
			n, err1 := strconv.ParseInt(f[1], 10, 64)
			sec, err2 := strconv.ParseInt(f[4], 10, 64)
			us, err3 := strconv.ParseInt(f[5], 10, 64)
			if err := errors.Join(err1, err2, err3); err != nil {
				return nil, fmt.Errorf("pgbench log: %q: %w", line, err)
			}
			ends[f[0]] = append(ends[f[0]], end{n, sec*1_000_000 + us})
		}
	}
	var lat []time.Duration
	for client, e := range ends {
		slices.SortFunc(e, func(a, b end) int { return cmp.Compare(a.n, b.n) })
		for i := 1; i < len(e); i++ {
			d := e[i].us - e[i-1].us
			if d <= 0 {
				return nil, fmt.Errorf("pgbench log: client %s's transaction %d ended %d µs after the one before: the log's clock does not move",
					client, e[i].n, d)
			}
			lat = append(lat, time.Duration(d)*time.Microsecond)
		}
	}
	if len(lat) == 0 {
		return nil, errors.New("pgbench logged no transaction after a client's first: run more than one a client")
	}
	return lat, nil
}
