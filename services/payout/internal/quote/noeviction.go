package quote

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/partnerpay/api/pkg/environment"
)

// CheckNoEviction is the book's rule for its Redis: its tombstones must
// never be evicted (an evicted one would let an expired quote id answer 404
// instead of 410), so Redis must run with maxmemory-policy noeviction. It
// asks every Redis node behind rdb for its eviction
// policy. Anything but noeviction is refused in production and a warning
// in sandbox; where a managed Redis forbids CONFIG, it says the policy
// could not be verified. It waits up to 10 s for Redis to answer at all.
func CheckNoEviction(ctx context.Context, rdb redis.UniversalClient, env environment.Name, log *slog.Logger) error {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	var problems []string
	var mu sync.Mutex
	check := func(ctx context.Context, c *redis.Client) error {
		var err error
		for {
			if err = c.Ping(ctx).Err(); err == nil || ctx.Err() != nil {
				break
			}
			time.Sleep(100 * time.Millisecond)
		}
		if err != nil {
			return fmt.Errorf("redis %s does not answer: %w", c.Options().Addr, err)
		}
		policy, err := c.ConfigGet(ctx, "maxmemory-policy").Result()
		if err != nil {
			log.Warn("redis eviction policy could not be verified: CONFIG GET is not allowed", "addr", c.Options().Addr, "err", err)
			return nil
		}
		if p := policy["maxmemory-policy"]; p != "noeviction" {
			mu.Lock()
			problems = append(problems, c.Options().Addr+": maxmemory-policy is "+p)
			mu.Unlock()
		}
		return nil
	}
	var err error
	switch c := rdb.(type) {
	case *redis.ClusterClient:
		err = c.ForEachMaster(ctx, check)
	case *redis.Client:
		err = check(ctx, c)
	}
	if err != nil {
		if env == environment.Production {
			return err
		}
		log.Warn("redis is not reachable yet; quotes will fail until it is", "err", err)
		return nil
	}
	if len(problems) == 0 {
		return nil
	}
	msg := "redis may evict quote tombstones (" + strings.Join(problems, "; ") + "): an expired quote id would answer 404 instead of 410; run it with --maxmemory-policy noeviction"
	if env == environment.Production {
		return errors.New(msg)
	}
	log.Warn(msg)
	return nil
}
