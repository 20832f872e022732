package redisclient

import (
	"context"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"

	"github.com/partnerpay/api/pkg/obs"
)

// collector reports, at each scrape, whether Redis answers and the
// state of the client's connection pool: what an SRE reads when quotes or
// rate limiting slow down. Nothing is measured on the request path.
type collector struct {
	rdb                               redis.UniversalClient
	timeout                           time.Duration
	up, conns, hits, misses, timeouts *prometheus.Desc
}

func newCollector(rdb redis.UniversalClient, timeout time.Duration) *collector {
	d := func(name, help string, labels ...string) *prometheus.Desc {
		return prometheus.NewDesc(obs.Namespace+"_redis_"+name, help, labels, nil)
	}
	if timeout <= 0 {
		timeout = time.Second
	}
	return &collector{
		rdb: rdb, timeout: timeout,
		up:       d("up", "1 when Redis (every master of a Cluster) answers a PING at scrape time, 0 otherwise."),
		conns:    d("connections", "Connections of the client's pool, by state (idle, in use).", "state"),
		hits:     d("pool_hits_total", "Commands that found an idle connection in the pool."),
		misses:   d("pool_misses_total", "Commands that had to open a connection."),
		timeouts: d("pool_timeouts_total", "Commands that waited for a connection in vain: the pool was exhausted."),
	}
}

func (c *collector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{c.up, c.conns, c.hits, c.misses, c.timeouts} {
		ch <- d
	}
}

func (c *collector) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), c.timeout)
	defer cancel()
	up := 0.0
	var err error
	if cc, ok := c.rdb.(*redis.ClusterClient); ok {
		err = cc.ForEachMaster(ctx, func(ctx context.Context, m *redis.Client) error { return m.Ping(ctx).Err() })
	} else {
		err = c.rdb.Ping(ctx).Err()
	}
	if err == nil {
		up = 1
	}
	ch <- prometheus.MustNewConstMetric(c.up, prometheus.GaugeValue, up)
	st := c.rdb.PoolStats()
	ch <- prometheus.MustNewConstMetric(c.conns, prometheus.GaugeValue, float64(st.IdleConns), "idle")
	ch <- prometheus.MustNewConstMetric(c.conns, prometheus.GaugeValue, float64(max(int64(st.TotalConns)-int64(st.IdleConns), 0)), "in_use")
	ch <- prometheus.MustNewConstMetric(c.hits, prometheus.CounterValue, float64(st.Hits))
	ch <- prometheus.MustNewConstMetric(c.misses, prometheus.CounterValue, float64(st.Misses))
	ch <- prometheus.MustNewConstMetric(c.timeouts, prometheus.CounterValue, float64(st.Timeouts))
}
