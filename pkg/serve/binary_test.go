package serve

import (
	"context"
	"io"
	"strings"
	"testing"

	"github.com/partnerpay/api/pkg/config"
)

type testSettings struct {
	Serve  Config
	Secret config.Secret `env:"TEST_SECRET, required"`
}

func (c *testSettings) Serving() *Config { return &c.Serve }

func start(env map[string]string, args ...string) error {
	b := Binary{Name: "test", Addr: "127.0.0.1:1", AdminAddr: "127.0.0.1:2"}
	return Start(context.Background(), b, args, func(k string) string { return env[k] }, io.Discard, &testSettings{},
		func(context.Context, *Setup, *testSettings) error { return nil })
}

// The healthcheck subcommand needs only the binary's address; serving
// needs the whole config, checked, and in production no public secret.
func TestStartLoadsTheConfigOnce(t *testing.T) {
	for _, tc := range []struct {
		name string
		env  map[string]string
		args []string
		want string
	}{
		{"healthcheck with its address alone", map[string]string{"TEST_ADDR": "127.0.0.1:1"}, []string{"healthcheck"}, "127.0.0.1:1"},
		{"a missing secret", map[string]string{}, nil, "missing required value: TEST_SECRET"},
		{"a bad drain", map[string]string{"TEST_SECRET": "a-secret-of-its-own-0123", "SHUTDOWN_DRAIN": "-1s"}, nil, "SHUTDOWN_DRAIN: -1s is negative"},
		{"half a certificate", map[string]string{"TEST_SECRET": "a-secret-of-its-own-0123", "TLS_CERT_FILE": "c.pem"}, nil, "set both TLS_CERT_FILE and TLS_KEY_FILE"},
		{"a public secret in production", map[string]string{"TEST_SECRET": "dev-quote-secret-change-me", "BANK_PROVIDER_URL": "https://api.bank-provider.com"}, nil,
			"TEST_SECRET is a known public default"},
		{"an unknown command", map[string]string{}, []string{"serve"}, `unknown command "serve"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := start(tc.env, tc.args...)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("%v, want %q", err, tc.want)
			}
		})
	}
	if err := start(map[string]string{"TEST_SECRET": "a-secret-of-its-own-0123"}); err != nil {
		t.Errorf("a sound config: %v", err)
	}
}
