package config

import (
	"errors"
	"strings"
	"testing"
	"time"
)

type sample struct {
	Secret Secret        `env:"S, required"`
	TTL    time.Duration `env:"TTL, default=60s"`
	Delay  time.Duration `env:"DELAY, default=0s"`
	URL    URL           `env:"U, default=http://127.0.0.1:1"`
	Addr   string        `env:"ADDR"`
}

func (s sample) Validate() error {
	return errors.Join(Positive("TTL", s.TTL), NotNegative("DELAY", s.Delay))
}

func env(m map[string]string) func(string) string { return func(k string) string { return m[k] } }

func TestLoadReadsDefaultsAndPresetValues(t *testing.T) {
	t.Parallel()
	c := sample{Addr: "127.0.0.1:8081"} // a binary's own default
	if err := Load(env(map[string]string{"S": "a-secret-of-its-own-0123", "DELAY": ""}), &c); err != nil {
		t.Fatal(err)
	}
	if c.TTL != time.Minute || c.URL != "http://127.0.0.1:1" || c.Addr != "127.0.0.1:8081" || c.Delay != 0 {
		t.Errorf("%+v", c)
	}
	if err := Load(env(map[string]string{"S": "a-secret-of-its-own-0123", "ADDR": "0.0.0.0:80"}), &c); err != nil || c.Addr != "0.0.0.0:80" {
		t.Errorf("a set variable beats the preset default: %+v %v", c, err)
	}
	if got := Masked(&c).String(); strings.Contains(got, "a-secret-of-its-own") || !strings.Contains(got, "S=[set]") || !strings.Contains(got, "TTL=1m0s") {
		t.Errorf("masked config %s", got)
	}
}

func TestLoadRefusesWhatItCannotUse(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		env  map[string]string
		want []string
	}{
		{"a missing secret", map[string]string{}, []string{"missing required value: S"}},
		{"a short secret", map[string]string{"S": "short"}, []string{"a secret of at least 16 characters is needed"}},
		{"not a URL", map[string]string{"S": "a-secret-of-its-own-0123", "U": "not a url"}, []string{`"not a url" is not an absolute http(s) URL`}},
		{"not a duration", map[string]string{"S": "a-secret-of-its-own-0123", "TTL": "soon"}, []string{`TTL`, `invalid duration "soon"`}},
		// The values' rules are all asked, so one run lists every one.
		{"every rule at once", map[string]string{"S": "a-secret-of-its-own-0123", "TTL": "-1s", "DELAY": "-2s"},
			[]string{"TTL: -1s is not a positive duration such as 50ms", "DELAY: -2s is negative"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var c sample
			err := Load(env(tc.env), &c)
			for _, want := range tc.want {
				if err == nil || !strings.Contains(err.Error(), want) {
					t.Errorf("error %v lacks %q", err, want)
				}
			}
		})
	}
}

type store struct {
	URL string `env:"STORE_URL, required"`
}

type Provider struct {
	Key     Secret  `env:"PROVIDER_KEY, required"`
	Headers Private `env:"PROVIDER_HEADERS"`
}

func (p Provider) Validate() error {
	if p.Headers == "bad" {
		return errors.New("PROVIDER_HEADERS: bad")
	}
	return nil
}

type binary struct {
	Store store
	Links links `env:", prefix=LINKS_"`
	Provider
	Limits limits
	TTL    time.Duration `env:"TTL, default=1s"`
}

type links struct {
	Secret Secret `env:"SECRET, required"`
}

type limits struct {
	Rate int `env:"RATE, default=10"`
}

func (l limits) Validate() error {
	if l.Rate < 1 {
		return errors.New("RATE: want at least 1")
	}
	return nil
}

// A package's part of a binary's config, named or embedded, is read,
// checked, masked and searched for known defaults with the rest.
func TestPartsCountAsTheirBinarysConfig(t *testing.T) {
	t.Parallel()
	var c binary
	if err := Load(env(nil), &c); err == nil || !strings.Contains(err.Error(), "missing required value: STORE_URL") {
		t.Errorf("a missing part's variable: %v", err)
	}
	vars := map[string]string{"STORE_URL": "postgres://u:hunter2@db/x", "PROVIDER_KEY": "dev-bank-provider-key-change-me", "PROVIDER_HEADERS": "Authorization=Bearer tok",
		"LINKS_SECRET": "links-secret-0123456789"}
	if err := Load(env(vars), &c); err != nil || c.Store.URL != vars["STORE_URL"] || c.Limits.Rate != 10 {
		t.Fatalf("%+v %v", c, err)
	}
	got := Masked(c).String()
	for _, leak := range []string{"hunter2", "Bearer", "change-me"} {
		if strings.Contains(got, leak) {
			t.Errorf("masked %s shows %s", got, leak)
		}
	}
	if !strings.Contains(got, "PROVIDER_KEY=[set]") || !strings.Contains(got, "PROVIDER_HEADERS=[set]") || !strings.Contains(got, "LINKS_SECRET=[set]") {
		t.Errorf("masked %s", got)
	}
	if name, ok := KnownDefaultIn(c); !ok || name != "PROVIDER_KEY" {
		t.Errorf("a known default in a part: %q %v", name, ok)
	}
	c.Provider.Key, c.Links.Secret = "a-secret-of-its-own-0123", "links-change-me-0123"
	if name, ok := KnownDefaultIn(c); !ok || name != "LINKS_SECRET" {
		t.Errorf("a known default in a prefixed part: %q %v", name, ok)
	}
	// An embedded part's rules and a named part's are asked, each once.
	vars["PROVIDER_HEADERS"], vars["RATE"] = "bad", "-1"
	err := Load(env(vars), &c)
	if err == nil || strings.Count(err.Error(), "PROVIDER_HEADERS: bad") != 1 || !strings.Contains(err.Error(), "RATE: want at least 1") {
		t.Errorf("parts' rules: %v", err)
	}
}

func TestKnownDefaultsAreRefusedInProduction(t *testing.T) {
	t.Parallel()
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
