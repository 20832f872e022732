// Command gateway is the partner API's edge, and the operator's key tool:
//
//	gateway                 serve (configured by environment variables)
//	gateway keys …          issue, rotate, revoke and list partner keys
//	gateway healthcheck     exit 0 if the gateway on GATEWAY_ADDR is healthy
package main

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"os"
	"time"

	"github.com/go-redis/redis_rate/v10"

	"github.com/partnerpay/api/pkg/config"
	"github.com/partnerpay/api/pkg/redisclient"
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
		var cfg keycmd.Config
		err := config.Load(os.Getenv, &cfg)
		if err == nil {
			err = keycmd.Run(os.Args[2:], cfg, os.Stdout, os.Stderr)
		}
		if err != nil {
			fmt.Fprintln(os.Stderr, "gateway:", err)
			os.Exit(1)
		}
		return
	}
	serve.Main(binary, &settings{}, run)
}

// binary is the gateway: a stopping gateway gives the requests in flight
// more than its longest route timeout (20 s).
var binary = serve.Binary{Name: "gateway", Addr: "127.0.0.1:8080", AdminAddr: "127.0.0.1:9180", Grace: 25 * time.Second}

// settings is the gateway's configuration, loaded once (config.Load).
type settings struct {
	Serve  serve.Config
	Listen serve.Listen `env:", prefix=GATEWAY_"`
	// The services answer only calls that carry it.
	InternalToken config.Secret `env:"INTERNAL_TOKEN, required"`
	// Rate buckets.
	Redis        redisclient.Config
	KeysFile     string        `env:"GATEWAY_KEYS_FILE, default=.local/keys.json"`
	RedisTimeout time.Duration `env:"RATE_LIMIT_REDIS_TIMEOUT, default=50ms"`
	KeysReload   time.Duration `env:"KEYS_RELOAD_INTERVAL, default=250ms"`
	Replicas     int           `env:"GATEWAY_REPLICAS, default=1"`
	PayoutURL    config.URL    `env:"PAYOUT_URL, default=http://127.0.0.1:8081"`
	FiatURL      config.URL    `env:"FIAT_URL, default=http://127.0.0.1:8082"`
	ConsentURL   config.URL    `env:"CONSENT_URL, default=http://127.0.0.1:8083"`
	OrdersURL    config.URL    `env:"ORDERS_URL, default=http://127.0.0.1:8084"`
	// The proxies in front of the gateway (CIDR ranges): their
	// X-Forwarded-For hops name a call's origin for keys pinned to
	// addresses. None: the connection's address is the origin.
	TrustedProxies apikey.Allowed `env:"GATEWAY_TRUSTED_PROXIES"`
	// The PEM bundle that signs the services' certificates, for https://
	// upstream URLs (the system's pool when unset).
	UpstreamCAFile string `env:"UPSTREAM_CA_FILE"`
}

func (c *settings) Serving() *serve.Config { return &c.Serve }

// Listening is where it listens.
func (c *settings) Listening() *serve.Listen { return &c.Listen }

// Validate checks the limiter's settings.
func (c *settings) Validate() error {
	var errs []error
	if c.Replicas < 1 {
		errs = append(errs, fmt.Errorf("GATEWAY_REPLICAS: %d is not a positive integer", c.Replicas))
	}
	return errors.Join(append(errs, config.Positive("RATE_LIMIT_REDIS_TIMEOUT", c.RedisTimeout), config.Positive("KEYS_RELOAD_INTERVAL", c.KeysReload))...)
}

func (c *settings) upstreams() map[string]*url.URL {
	return map[string]*url.URL{edge.UpstreamPayout: c.PayoutURL.Parsed(), edge.UpstreamFiat: c.FiatURL.Parsed(),
		edge.UpstreamConsent: c.ConsentURL.Parsed(), edge.UpstreamOrders: c.OrdersURL.Parsed()}
}

func run(ctx context.Context, s *serve.Setup, cfg *settings) error {
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
	rdb, err := cfg.Redis.Open(redisclient.Tuning{DialTimeout: 200 * time.Millisecond, Timeout: cfg.RedisTimeout, PoolSize: 64, FailFast: true}, s.Log, s.Kit.Registry)
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
		Env:            s.Env,
		Keys:           keys,
		Limiter:        limiter,
		Upstreams:      upstreams,
		Transport:      s.Kit.Tracing.Transport(transport),
		InternalToken:  string(cfg.InternalToken),
		Docs:           apidocs.New(),
		Log:            s.Log,
		Metrics:        metrics,
		TrustedProxies: cfg.TrustedProxies,
	})
	if err != nil {
		return err
	}
	defer gw.Close()
	return s.Serve(ctx, gw)
}
