package redisclient

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"

	"github.com/partnerpay/api/testkit/redistest"
)

func TestNewTakesOneOfTheTwoURLs(t *testing.T) {
	t.Parallel()
	c := Config{URL: "redis://127.0.0.1:1/0", ClusterURL: "redis://127.0.0.1:2?addr=127.0.0.1:3"}
	if _, _, err := c.New(Tuning{}); err == nil {
		t.Error("both REDIS_URL and REDIS_CLUSTER_URL were accepted")
	}
	c.URL = ""
	rdb, desc, err := c.New(Tuning{})
	if err != nil || desc != "cluster redis://127.0.0.1:2?addr=127.0.0.1:3" {
		t.Fatalf("%s %v", desc, err)
	}
	if _, ok := rdb.(*redis.ClusterClient); !ok {
		t.Errorf("REDIS_CLUSTER_URL made a %T", rdb)
	}
	rdb.Close()
	rdb, desc, err = Config{URL: "redis://:secret@127.0.0.1:1/0"}.New(Tuning{})
	if err != nil || strings.Contains(desc, "secret") {
		t.Fatalf("%s %v: the password must not be shown", desc, err)
	}
	rdb.Close()
}

// TestRedisMetricsSayWhetherItAnswers: at each scrape the collector asks
// Redis; a stopped Redis reads 0, and the pool's counters are there.
func TestRedisMetricsSayWhetherItAnswers(t *testing.T) {
	t.Parallel()
	rs := redistest.Start(t)
	rdb := redis.NewClient(&redis.Options{Addr: rs.Addr, MaxRetries: -1})
	defer rdb.Close()
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(newCollector(rdb, 200*time.Millisecond))
	up := func() string {
		t.Helper()
		mfs, err := reg.Gather()
		if err != nil {
			t.Fatal(err)
		}
		var names []string
		value := ""
		for _, mf := range mfs {
			names = append(names, mf.GetName())
			if mf.GetName() == "partnerapi_redis_up" {
				value = fmt.Sprint(mf.GetMetric()[0].GetGauge().GetValue())
			}
		}
		if len(names) != 5 {
			t.Errorf("series %v, want up, connections and the three pool counters", names)
		}
		return value
	}
	if v := up(); v != "1" {
		t.Errorf("partnerapi_redis_up = %s with Redis running, want 1", v)
	}
	rs.Stop()
	if v := up(); v != "0" {
		t.Errorf("partnerapi_redis_up = %s with Redis stopped, want 0", v)
	}
}
