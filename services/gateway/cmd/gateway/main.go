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
	"github.com/redis/go-redis/v9"

	"github.com/partnerpay/api/pkg/serve"
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
	serve.Main(serve.Binary{Name: "gateway", Addr: "127.0.0.1:8080", AdminAddr: "127.0.0.1:9180", Internal: true}, run)
}

func run(ctx context.Context, s *serve.Setup) error {
	cfg, err := loadConfig(s.Getenv)
	if err != nil {
		return err
	}
	s.Log.Info("starting", "environment", s.Env, "addr", s.Addr, "admin_addr", s.AdminAddr, "config", cfg.masked())
	metrics := edge.NewMetrics(s.Kit.Registry)

	keys, err := apikey.NewStore(cfg.keysFile, s.Log)
	if err != nil {
		return err
	}
	keys.OnLoad = metrics.KeysLoaded
	keys.OnLoadFailed = metrics.KeysReloadFailed
	go keys.Watch(ctx, cfg.keysReload)

	ropts, err := redis.ParseURL(cfg.redisURL)
	if err != nil {
		return fmt.Errorf("REDIS_URL: %w", err)
	}
	// Fail fast: the limiter has its own deadline and a fallback, so a slow
	// Redis must cost a request milliseconds, not the client's default seconds.
	ropts.DialTimeout = 200 * time.Millisecond
	ropts.ReadTimeout = cfg.redisTimeout
	ropts.WriteTimeout = cfg.redisTimeout
	ropts.ContextTimeoutEnabled = true
	ropts.MaxRetries = -1
	ropts.PoolSize = 64
	rdb := redis.NewClient(ropts)
	defer rdb.Close()
	limiter := ratelimit.New(redis_rate.NewLimiter(rdb), ratelimit.Options{Timeout: cfg.redisTimeout}, s.Log, metrics)

	docs, err := apidocs.New()
	if err != nil {
		return err
	}
	gw, err := edge.New(edge.Config{
		Env:           s.Env,
		Keys:          keys,
		Limiter:       limiter,
		Upstreams:     cfg.upstreams,
		Transport:     s.Kit.Tracing.Transport(edge.NewTransport()),
		InternalToken: s.InternalToken,
		Docs:          docs,
		Log:           s.Log,
		Metrics:       metrics,
	})
	if err != nil {
		return err
	}
	return s.Serve(ctx, gw)
}

type config struct {
	keysFile     string
	redisURL     string
	redisTimeout time.Duration
	keysReload   time.Duration
	upstreams    map[string]*url.URL
}

func loadConfig(getenv func(string) string) (config, error) {
	c := config{
		keysFile:  serve.Env(getenv, "GATEWAY_KEYS_FILE", ".local/keys.json"),
		redisURL:  serve.Env(getenv, "REDIS_URL", "redis://127.0.0.1:6379/0"),
		upstreams: map[string]*url.URL{},
	}
	var err error
	if c.redisTimeout, err = serve.EnvDuration(getenv, "RATE_LIMIT_REDIS_TIMEOUT", 50*time.Millisecond); err != nil {
		return config{}, err
	}
	if c.keysReload, err = serve.EnvDuration(getenv, "KEYS_RELOAD_INTERVAL", 250*time.Millisecond); err != nil {
		return config{}, err
	}
	for name, up := range map[string]struct{ env, def string }{
		edge.UpstreamPayout:  {"PAYOUT_URL", "http://127.0.0.1:8081"},
		edge.UpstreamFiat:    {"FIAT_URL", "http://127.0.0.1:8082"},
		edge.UpstreamConsent: {"CONSENT_URL", "http://127.0.0.1:8083"},
	} {
		raw := serve.Env(getenv, up.env, up.def)
		u, err := url.Parse(raw)
		if err != nil || u.Scheme == "" || u.Host == "" {
			return config{}, fmt.Errorf("%s: %q is not an absolute URL", up.env, raw)
		}
		c.upstreams[name] = u
	}
	return c, nil
}

// masked is the config as it may be logged: no secret in it.
func (c config) masked() map[string]any {
	ups := map[string]string{}
	for k, u := range c.upstreams {
		ups[k] = u.String()
	}
	redisURL := "[unparseable]"
	if u, err := url.Parse(c.redisURL); err == nil {
		redisURL = u.Redacted()
	}
	return map[string]any{
		"keys_file": c.keysFile, "redis_url": redisURL, "redis_timeout": c.redisTimeout.String(),
		"keys_reload": c.keysReload.String(), "internal_token": "[set]", "upstreams": ups,
	}
}
