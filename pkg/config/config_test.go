package config

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
	err := Load(func(k string) string { return env[k] }, &c)
	for _, want := range []string{"S must be set to a secret of at least 16 characters: it signs", `TTL: "-1s" is not a positive duration`, `U: "not a url" is not an absolute http(s) URL`} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("error %v lacks %q", err, want)
		}
	}
	env = map[string]string{"S": "a-secret-of-its-own-0123"}
	if err := Load(func(k string) string { return env[k] }, &c); err != nil || c.TTL != time.Minute || c.URL != "http://127.0.0.1:1" {
		t.Fatalf("%+v %v", c, err)
	}
	if got := Masked(c).String(); strings.Contains(got, "a-secret-of-its-own") || !strings.Contains(got, "S=[set]") {
		t.Errorf("masked config %s shows the secret", got)
	}
}

// A package's part of a binary's config, named or embedded, is read,
// checked, masked and searched for known defaults with the rest.
func TestPartsCountAsTheirBinarysConfig(t *testing.T) {
	type store struct {
		URL string `env:"STORE_URL" doc:"where records are kept"`
	}
	type provider struct {
		Key Secret `env:"PROVIDER_KEY" doc:"the provider's key"`
	}
	var c struct {
		Store store
		provider
		TTL time.Duration `env:"TTL" default:"1s"`
	}
	if err := Load(func(string) string { return "" }, &c); err == nil || !strings.Contains(err.Error(), "STORE_URL must be set: where records are kept") ||
		!strings.Contains(err.Error(), "PROVIDER_KEY must be set to a secret") {
		t.Errorf("a missing part's variables: %v", err)
	}
	env := map[string]string{"STORE_URL": "postgres://u:hunter2@db/x", "PROVIDER_KEY": "dev-bank-provider-key-change-me"}
	if err := Load(func(k string) string { return env[k] }, &c); err != nil || c.Store.URL != env["STORE_URL"] {
		t.Fatalf("%+v %v", c, err)
	}
	if got := Masked(c).String(); strings.Contains(got, "hunter2") || !strings.Contains(got, "PROVIDER_KEY=[set]") {
		t.Errorf("masked %s", got)
	}
	if name, ok := KnownDefaultIn(c); !ok || name != "PROVIDER_KEY" {
		t.Errorf("a known default in a part: %q %v", name, ok)
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
	if name, ok := KnownDefaultIn(c); !ok || name != "S" {
		t.Errorf("KnownDefaultIn: %s %v", name, ok)
	}
}
