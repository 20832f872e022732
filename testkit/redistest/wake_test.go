package redistest

import (
	"bufio"
	"net"
	"slices"
	"testing"
	"time"
)

// BenchmarkAnIdleRedisAnswers measures the machine, not our code: the p50 of
// a PING to a redis-server that was busy a moment ago (back to back), and to
// one left idle for a while first, as an execution leaves Redis idle for the
// millisecond its commit takes. On a VM whose idle vCPUs halt, waking the
// server costs more than the round trip itself (2-core Firecracker VM,
// 2026-11-30: 16 µs back to back, 104 µs after 1 ms idle, 129 µs after
// 3 ms):
//
//	cd testkit && go test -run '^$' -bench AnIdleRedis -benchtime 1x ./redistest/
func BenchmarkAnIdleRedisAnswers(b *testing.B) {
	s := Start(b)
	c, err := net.Dial("tcp", s.Addr)
	if err != nil {
		b.Fatal(err)
	}
	defer c.Close()
	r := bufio.NewReader(c)
	ping := func() time.Duration {
		t0 := time.Now()
		if _, err := c.Write([]byte("*1\r\n$4\r\nPING\r\n")); err != nil {
			b.Fatal(err)
		}
		if line, err := r.ReadString('\n'); err != nil || line != "+PONG\r\n" {
			b.Fatalf("PING: %q %v", line, err)
		}
		return time.Since(t0)
	}
	for b.Loop() {
		for _, idle := range []time.Duration{0, time.Millisecond, 3 * time.Millisecond} {
			took := make([]time.Duration, 1000)
			for i := range took {
				if idle > 0 {
					time.Sleep(idle)
				}
				took[i] = ping()
			}
			slices.Sort(took)
			b.ReportMetric(float64(took[len(took)/2].Nanoseconds())/1e3, "µs-p50-idle-"+idle.String())
		}
	}
}
