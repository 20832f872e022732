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
	Listen Listen        `env:", prefix=TEST_"`
	Secret config.Secret `env:"TEST_SECRET, required"`
}

func (c *testSettings) Serving() *Config   { return &c.Serve }
func (c *testSettings) Listening() *Listen { return &c.Listen }

// otherSettings reads another binary's addresses.
type otherSettings struct {
	Serve  Config
	Listen Listen `env:", prefix=OTHER_"`
}

func (c *otherSettings) Serving() *Config   { return &c.Serve }
func (c *otherSettings) Listening() *Listen { return &c.Listen }

func start(env map[string]string, args ...string) error {
	b := Binary{Name: "test", Addr: "127.0.0.1:1", AdminAddr: "127.0.0.1:2"}
	return Start(context.Background(), b, args, func(k string) string { return env[k] }, io.Discard, &testSettings{},
		func(context.Context, *Setup, *testSettings) error { return nil })
}

// The config is loaded once, for serving and for the healthcheck
// subcommand alike (the probe of the binary's own address, where its
// container's environment is whole): checked, and in production no public
// secret.
func TestStartLoadsTheConfigOnce(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		env  map[string]string
		args []string
		want string
	}{
		{"healthcheck of the binary's address", map[string]string{"TEST_SECRET": "a-secret-of-its-own-0123", "TEST_ADDR": "127.0.0.1:1"}, []string{"healthcheck"}, "127.0.0.1:1"},
		{"healthcheck without the config", map[string]string{"TEST_ADDR": "127.0.0.1:1"}, []string{"healthcheck"}, "missing required value: TEST_SECRET"},
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
	err := Start(context.Background(), Binary{Name: "test"}, nil, func(string) string { return "" }, io.Discard, &otherSettings{},
		func(context.Context, *Setup, *otherSettings) error { return nil })
	if err == nil || !strings.Contains(err.Error(), `want env:", prefix=TEST_"`) {
		t.Errorf("a binary reading another's addresses: %v", err)
	}
}
