package redisclient

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"slices"
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

// go-redis' dial failures while Redis is down (several a second) are one
// line a minute, saying how many more came since; another message is not
// held back by them.
func TestGoRedisMessagesAreThrottled(t *testing.T) {
	t.Parallel()
	var buf bytes.Buffer
	now := time.Date(2026, 11, 27, 12, 0, 0, 0, time.UTC)
	l := newRedisLogger(slog.New(slog.NewJSONHandler(&buf, nil)), func() time.Time { return now })
	const dial = "redis: %s: dial tcp %s: connect: connection refused"
	for i := 0; i < 100; i++ {
		l.Printf(context.Background(), dial, "pool", "10.0.0.7:6379")
		now = now.Add(100 * time.Millisecond)
	}
	l.Printf(context.Background(), "cluster: %s failed over", "node-2")
	now = now.Add(51 * time.Second) // a minute after the first line
	l.Printf(context.Background(), dial, "pool", "10.0.0.7:6379")
	var got []string
	for _, line := range strings.Split(strings.TrimSpace(buf.String()), "\n") {
		var m struct {
			Msg  string `json:"msg"`
			More int    `json:"more_since_last_line"`
		}
		if err := json.Unmarshal([]byte(line), &m); err != nil {
			t.Fatalf("%v: %s", err, line)
		}
		got = append(got, fmt.Sprintf("%s (%d more)", m.Msg, m.More))
	}
	want := []string{
		"redis client: redis: pool: dial tcp 10.0.0.7:6379: connect: connection refused (0 more)",
		"redis client: cluster: node-2 failed over (0 more)",
		"redis client: redis: pool: dial tcp 10.0.0.7:6379: connect: connection refused (99 more)",
	}
	if !slices.Equal(got, want) {
		t.Errorf("lines:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}
