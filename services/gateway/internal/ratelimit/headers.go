package ratelimit

import (
	"math"
	"net/http"
	"strconv"
	"time"
)

// The IETF RateLimit fields (draft-ietf-httpapi-ratelimit-headers-11) and
// Retry-After, in the one place they are written. A key has one policy,
// "default": q requests per w=1 second.

// Policy is the RateLimit-Policy value of a key limited to rate per second.
func Policy(rate int) string { return `"default";q=` + strconv.Itoa(rate) + `;w=1` }

// RateLimitHeader is the RateLimit value for d: requests remaining, and
// whole seconds until the bucket is full again.
func (d Decision) RateLimitHeader() string {
	return `"default";r=` + strconv.Itoa(d.Remaining) + `;t=` + strconv.Itoa(ceilSeconds(d.ResetAfter, 0))
}

// RetryAfterHeader is the Retry-After value: whole seconds, at least 1.
func (d Decision) RetryAfterHeader() string { return strconv.Itoa(ceilSeconds(d.RetryAfter, 1)) }

// WriteHeaders sets the fields of d on h. policy is the key's
// RateLimit-Policy value, built once per key (a shared slice, never
// modified). Retry-After comes with a refusal only.
func (d Decision) WriteHeaders(h http.Header, policy []string) {
	h["Ratelimit-Policy"] = policy
	h["Ratelimit"] = []string{d.RateLimitHeader()}
	if !d.Allowed {
		h["Retry-After"] = []string{d.RetryAfterHeader()}
	}
}

func ceilSeconds(d time.Duration, min int) int {
	s := int(math.Ceil(d.Seconds()))
	if s < min {
		return min
	}
	return s
}
