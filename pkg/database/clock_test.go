package database_test

import (
	"context"
	"math"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/partnerpay/api/pkg/database"
	"github.com/partnerpay/api/testkit/pgtest"
)

// The operators' gauge of the database clock's offset follows a clock
// that moves while the service runs: a process whose clock is right reads
// about 0; once the clocks part by 90 s (here this process's moves, which
// is the same offset as PostgreSQL's moving the other way), the gauge
// reads the new offset at the next measurement, with nobody asking.
func TestTheClockGaugeFollowsTheDatabasesClock(t *testing.T) {
	t.Parallel()
	var skew atomic.Int64
	db, err := database.Open(context.Background(), pgtest.URL(t), database.Options{Wait: 10 * time.Second,
		ClockEvery: 50 * time.Millisecond, Clock: func() time.Time { return time.Now().Add(time.Duration(skew.Load())) }})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(db.Close)
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(database.NewCollector(db))
	gauge := func() float64 {
		mfs, err := reg.Gather()
		if err != nil {
			t.Fatal(err)
		}
		for _, mf := range mfs {
			if mf.GetName() == "partnerapi_db_clock_offset_seconds" {
				return mf.GetMetric()[0].GetGauge().GetValue()
			}
		}
		t.Fatal("no partnerapi_db_clock_offset_seconds")
		return 0
	}
	if g := gauge(); math.Abs(g) > 1 {
		t.Fatalf("clocks that agree: the gauge reads %.3fs", g)
	}
	skew.Store(int64(90 * time.Second))
	deadline := time.Now().Add(30 * time.Second)
	for g := gauge(); math.Abs(g+90) > 1; g = gauge() {
		if time.Now().After(deadline) {
			t.Fatalf("90 s apart: the gauge still reads %.3fs after 30 s, want about -90", g)
		}
		time.Sleep(20 * time.Millisecond)
	}
	if n, err := testutil.GatherAndCount(reg, "partnerapi_db_clock_offset_seconds"); err != nil || n != 1 {
		t.Errorf("the gauge is %d series (%v), want one", n, err)
	}
}
