// Command gateway is the partner API's edge, and the operator's key tool:
//
//	gateway                 serve (configured by environment variables)
//	gateway keys …          issue, rotate, revoke and list partner keys
//	gateway healthcheck     exit 0 if the gateway on GATEWAY_ADDR is healthy
package main

import (
	"context"
	"fmt"
	"net/url"
	"os"
	"time"

	"github.com/go-redis/redis_rate/v10"

	"github.com/partnerpay/api/pkg/serve"
	"github.com/partnerpay/api/pkg/upstream"
	"github.com/partnerpay/api/services/gateway/internal/apidocs"
	"github.com/partnerpay/api/services/gateway/internal/apikey"
	"github.com/partnerpay/api/services/gateway/internal/edge"
	"github.com/partnerpay/api/services/gateway/internal/keycmd"
	"github.com/partnerpay/api/services/gateway/internal/ratelimit"
)

func main() {
	if len(os.Args) > 1 && os.Args[1] == "keys" {
		if err := keycmd.Run(os.Args[2:], os.Getenv, os.Stdout, os.Stderr); err != nil {
			fmt.Fprintln(os.Stderr, "gateway:", err)
			os.Exit(1)
		}
		return
	}
	serve.Main("gateway", run)
}

type settings struct {
	KeysFile     string        `env:"GATEWAY_KEYS_FILE" default:".local/keys.json"`
	RedisTimeout time.Duration `env:"RATE_LIMIT_REDIS_TIMEOUT" default:"50ms"`
	KeysReload   time.Duration `env:"KEYS_RELOAD_INTERVAL" default:"250ms"`
	Replicas     int           `env:"GATEWAY_REPLICAS" default:"1"`
	PayoutURL    string        `env:"PAYOUT_URL" default:"http://127.0.0.1:8081" url:"absolute"`
	FiatURL      string        `env:"FIAT_URL" default:"http://127.0.0.1:8082" url:"absolute"`
	ConsentURL   string        `env:"CONSENT_URL" default:"http://127.0.0.1:8083" url:"absolute"`
	OrdersURL    string        `env:"ORDERS_URL" default:"http://127.0.0.1:8084" url:"absolute"`
	// The PEM bundle that signs the services' certificates, for https://
	// upstream URLs (the system's pool when unset).
	UpstreamCAFile string `env:"UPSTREAM_CA_FILE" optional:"true"`
}

func (c settings) upstreams() map[string]*url.URL {
	out := map[string]*url.URL{}
	for name, raw := range map[string]string{edge.UpstreamPayout: c.PayoutURL, edge.UpstreamFiat: c.FiatURL, edge.UpstreamConsent: c.ConsentURL, edge.UpstreamOrders: c.OrdersURL} {
		out[name], _ = url.Parse(raw) // config.Load checked it
	}
	return out
}

func run(ctx context.Context, s *serve.Setup) error {
	var cfg settings
	if err := s.Config(&cfg); err != nil {
		return err
	}
	metrics := edge.NewMetrics(s.Kit.Registry)

	keys, err := apikey.NewStore(cfg.KeysFile, s.Log)
	if err != nil {
		return err
	}
	keys.OnLoad = metrics.KeysLoaded
	keys.OnLoadFailed = metrics.KeysReloadFailed
	go keys.Watch(ctx, cfg.KeysReload)

	// Fail fast: the limiter has its own deadline and a fallback, so a slow
	// Redis must cost a request milliseconds, not the client's default seconds.
	rdb, err := s.Redis(ctx, serve.RedisTuning{DialTimeout: 200 * time.Millisecond, Timeout: cfg.RedisTimeout, PoolSize: 64, FailFast: true})
	if err != nil {
		return err
	}
	defer rdb.Close()
	limiter := ratelimit.New(redis_rate.NewLimiter(rdb), ratelimit.Options{
		Timeout:  cfg.RedisTimeout,
		Replicas: cfg.Replicas,
		Probe:    func(ctx context.Context) error { return rdb.Ping(ctx).Err() },
	}, s.Log, metrics)

	upstreams := cfg.upstreams()
	transport, err := upstream.Transport(upstream.Options{
		CAFile:        cfg.UpstreamCAFile,
		HeaderTimeout: edge.LongestTimeout + 5*time.Second,
		Dialed:        metrics.UpstreamDialed(upstreams),
	})
	if err != nil {
		return err
	}
	gw, err := edge.New(edge.Config{
		Env:           s.Env,
		Keys:          keys,
		Limiter:       limiter,
		Upstreams:     upstreams,
		Transport:     s.Kit.Tracing.Transport(transport),
		InternalToken: s.InternalToken,
		Docs:          apidocs.New(),
		Log:           s.Log,
		Metrics:       metrics,
	})
	if err != nil {
		return err
	}
	defer gw.Close()
	return s.Serve(ctx, gw)
}
