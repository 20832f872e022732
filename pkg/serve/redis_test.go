package serve

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"

	"github.com/partnerpay/api/pkg/redistest"
)

func TestNewRedisTakesOneOfTheTwoURLs(t *testing.T) {
	env := map[string]string{"REDIS_URL": "redis://127.0.0.1:1/0", "REDIS_CLUSTER_URL": "redis://127.0.0.1:2?addr=127.0.0.1:3"}
	if _, _, err := NewRedis(func(k string) string { return env[k] }, RedisTuning{}); err == nil {
		t.Error("both REDIS_URL and REDIS_CLUSTER_URL were accepted")
	}
	delete(env, "REDIS_URL")
	rdb, desc, err := NewRedis(func(k string) string { return env[k] }, RedisTuning{})
	if err != nil || desc != "cluster redis://127.0.0.1:2?addr=127.0.0.1:3" {
		t.Fatalf("%s %v", desc, err)
	}
	if _, ok := rdb.(*redis.ClusterClient); !ok {
		t.Errorf("REDIS_CLUSTER_URL made a %T", rdb)
	}
	rdb.Close()
	env = map[string]string{"REDIS_URL": "redis://:secret@127.0.0.1:1/0"}
	rdb, desc, err = NewRedis(func(k string) string { return env[k] }, RedisTuning{})
	if err != nil || strings.Contains(desc, "secret") {
		t.Fatalf("%s %v: the password must not be shown", desc, err)
	}
	rdb.Close()
}

// TestRedisMetricsSayWhetherItAnswers: at each scrape the collector asks
// Redis; a stopped Redis reads 0, and the pool's counters are there.
func TestRedisMetricsSayWhetherItAnswers(t *testing.T) {
	rs := redistest.Start(t)
	rdb := redis.NewClient(&redis.Options{Addr: rs.Addr, MaxRetries: -1})
	defer rdb.Close()
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(newRedisCollector(rdb, 200*time.Millisecond))
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
