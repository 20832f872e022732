package serve

import (
	"strings"
	"testing"
	"time"
)

type sample struct {
	Secret Secret        `env:"S" doc:"it signs"`
	TTL    time.Duration `env:"TTL" default:"60s"`
	URL    string        `env:"U" default:"http://127.0.0.1:1" url:"absolute"`
}

func TestLoadConfigChecksEverythingAtOnce(t *testing.T) {
	env := map[string]string{"S": "short", "TTL": "-1s", "U": "not a url"}
	var c sample
	err := LoadConfig(func(k string) string { return env[k] }, &c)
	for _, want := range []string{"S must be set to a secret of at least 16 characters: it signs", `TTL: "-1s" is not a positive duration`, `U: "not a url" is not an absolute http(s) URL`} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("error %v lacks %q", err, want)
		}
	}
	env = map[string]string{"S": "a-secret-of-its-own-0123"}
	if err := LoadConfig(func(k string) string { return env[k] }, &c); err != nil || c.TTL != time.Minute || c.URL != "http://127.0.0.1:1" {
		t.Fatalf("%+v %v", c, err)
	}
	if got := Masked(c).String(); strings.Contains(got, "a-secret-of-its-own") || !strings.Contains(got, "S=[set]") {
		t.Errorf("masked config %s shows the secret", got)
	}
}

func TestKnownDefaultsAreRefusedInProduction(t *testing.T) {
	for _, s := range []string{"dev-quote-secret-change-me", "MY-CHANGEME-TOKEN-0000", "internal-token-0123456789"} {
		if !KnownDefault(s) {
			t.Errorf("%s is not known", s)
		}
	}
	if KnownDefault("9f2c1e7a5b3d4c6e8f0a1b2c3d4e5f60") {
		t.Error("a random secret is known")
	}
	c := sample{Secret: "dev-quote-secret-change-me"}
	if name, ok := knownDefaultIn(c); !ok || name != "S" {
		t.Errorf("knownDefaultIn: %s %v", name, ok)
	}
}
