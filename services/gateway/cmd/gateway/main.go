// Command gateway is the partner API's edge, and the operator's key tool:
//
//	gateway                 serve (configured by environment variables)
//	gateway keys …          issue, rotate, revoke and list partner keys
//	gateway healthcheck     exit 0 if the gateway on GATEWAY_ADDR is healthy
package main

import (
	"context"
	"fmt"
	"io"
	"net/url"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/go-redis/redis_rate/v10"
	"github.com/redis/go-redis/v9"

	"github.com/partnerpay/api/pkg/environment"
	"github.com/partnerpay/api/pkg/obs"
	"github.com/partnerpay/api/pkg/serve"
	"github.com/partnerpay/api/services/gateway/internal/apidocs"
	"github.com/partnerpay/api/services/gateway/internal/apikey"
	"github.com/partnerpay/api/services/gateway/internal/edge"
	"github.com/partnerpay/api/services/gateway/internal/keycmd"
	"github.com/partnerpay/api/services/gateway/internal/ratelimit"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, os.Args[1:], os.Getenv, os.Stdout, os.Stderr); err != nil {
		fmt.Fprintln(os.Stderr, "gateway:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	if len(args) > 0 {
		switch args[0] {
		case "keys":
			return keycmd.Run(args[1:], getenv, stdout, stderr)
		case "healthcheck":
			return serve.Healthcheck(serve.Env(getenv, "GATEWAY_ADDR", defaultAddr))
		default:
			return fmt.Errorf("unknown command %q (want keys or healthcheck, or nothing to serve)", args[0])
		}
	}
	cfg, err := loadConfig(getenv)
	if err != nil {
		return err
	}
	log := serve.Logger(stderr, "gateway")
	log.Info("starting", "config", cfg.masked())

	kit, err := obs.NewKit(ctx, "gateway", cfg.env, getenv)
	if err != nil {
		return err
	}
	defer kit.Shutdown(context.Background())
	metrics := edge.NewMetrics(kit.Registry)

	keys, err := apikey.NewStore(cfg.keysFile, log)
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
	limiter := ratelimit.New(redis_rate.NewLimiter(rdb),
		ratelimit.Options{Timeout: cfg.redisTimeout}, log, metrics)

	docs, err := apidocs.New()
	if err != nil {
		return err
	}
	gw, err := edge.New(edge.Config{
		Docs:          docs,
		Env:           cfg.env,
		Keys:          keys,
		Limiter:       limiter,
		Upstreams:     cfg.upstreams,
		Transport:     kit.Tracing.Transport(edge.NewTransport()),
		InternalToken: cfg.internalToken,
		Log:           log,
		Metrics:       metrics,
	})
	if err != nil {
		return err
	}
	return serve.Run(ctx, log, 10*time.Second,
		serve.NewServer(cfg.addr, kit.Serve(gw), log),
		serve.NewServer(cfg.adminAddr, kit.Admin(), log),
	)
}

const defaultAddr = "127.0.0.1:8080"

type config struct {
	env           environment.Name
	addr          string
	adminAddr     string
	keysFile      string
	redisURL      string
	redisTimeout  time.Duration
	keysReload    time.Duration
	internalToken string
	upstreams     map[string]*url.URL
}

func loadConfig(getenv func(string) string) (config, error) {
	env, err := environment.FromEnv(getenv)
	if err != nil {
		return config{}, err
	}
	c := config{
		env:           env,
		addr:          serve.Env(getenv, "GATEWAY_ADDR", defaultAddr),
		adminAddr:     serve.Env(getenv, "GATEWAY_ADMIN_ADDR", "127.0.0.1:9180"),
		keysFile:      serve.Env(getenv, "GATEWAY_KEYS_FILE", ".local/keys.json"),
		redisURL:      serve.Env(getenv, "REDIS_URL", "redis://127.0.0.1:6379/0"),
		internalToken: getenv("INTERNAL_TOKEN"),
		upstreams:     map[string]*url.URL{},
	}
	if len(c.internalToken) < 16 {
		return config{}, fmt.Errorf("INTERNAL_TOKEN must be set to a shared secret of at least 16 characters")
	}
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
		v := up.env
		raw := serve.Env(getenv, v, up.def)
		u, err := url.Parse(raw)
		if err != nil || u.Scheme == "" || u.Host == "" {
			return config{}, fmt.Errorf("%s: %q is not an absolute URL", v, raw)
		}
		c.upstreams[name] = u
	}
	return c, nil
}

// masked is the config as it may be logged: secrets replaced.
func (c config) masked() map[string]any {
	ups := map[string]string{}
	for k, u := range c.upstreams {
		ups[k] = u.String()
	}
	return map[string]any{
		"environment": c.env, "addr": c.addr, "admin_addr": c.adminAddr, "keys_file": c.keysFile,
		"redis_url": redactURL(c.redisURL), "redis_timeout": c.redisTimeout.String(),
		"keys_reload": c.keysReload.String(), "internal_token": "[set]", "upstreams": ups,
	}
}

func redactURL(raw string) string {
	u, err := url.Parse(raw)
	if err != nil {
		return "[unparseable]"
	}
	return u.Redacted()
}
