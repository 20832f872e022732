// Package config is how a binary reads its configuration: one struct per
// binary, filled once from the getenv it is given by
// github.com/sethvargo/go-envconfig, checked, and logged with its secrets
// masked. A package that needs settings exports its part (database.Config,
// obs.Config, bankprovider.Config) for the binaries to embed; it never reads
// the environment itself.
//
// Tags are go-envconfig's: `env:"QUOTE_TTL, default=60s"`,
// `env:"QUOTE_SECRET, required"`, `env:", prefix=DB_"`. A variable set to
// the empty string counts as unset. A value a binary puts in its struct
// before Load is that field's default (the listen addresses each binary
// picks for itself).
package config

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"reflect"
	"strings"
	"time"

	"github.com/sethvargo/go-envconfig"
)

// Load fills the struct cfg points to from getenv, then checks it: cfg
// and each of its struct fields that has a Validate method is asked, and
// all their complaints come back together, so one run lists everything
// wrong with the values. (An embedded part is asked only through its
// parent, whose Validate is its own or shadows it: a part with rules is
// best a named field.) A variable that is missing or cannot be read at
// all stops the loading at once, as go-envconfig does.
func Load(getenv func(string) string, cfg any) error {
	err := envconfig.ProcessWith(context.Background(), &envconfig.Config{
		Target: cfg,
		Lookuper: envconfig.LookuperFunc(func(key string) (string, bool) {
			v := getenv(key)
			return v, v != ""
		}),
		DefaultOverwrite: true,
	})
	if err != nil {
		return err
	}
	return validate(reflect.ValueOf(cfg))
}

// Validator is a part of a config with rules of its own.
type Validator interface{ Validate() error }

// validate asks v (a pointer to a struct) and its parts. An embedded
// part is not asked on its own: its Validate is promoted to its parent,
// or shadowed by the parent's, which then asks it.
func validate(v reflect.Value) error {
	var errs []error
	if c, ok := v.Interface().(Validator); ok {
		errs = append(errs, c.Validate())
	}
	return errors.Join(append(errs, validateParts(v.Elem()))...)
}

func validateParts(v reflect.Value) error {
	var errs []error
	for i := 0; i < v.NumField(); i++ {
		f := v.Type().Field(i)
		switch {
		case f.Type.Kind() != reflect.Struct || !f.IsExported():
		case f.Anonymous:
			errs = append(errs, validateParts(v.Field(i)))
		default:
			errs = append(errs, validate(v.Field(i).Addr()))
		}
	}
	return errors.Join(errs...)
}

// MinSecretLen is the shortest secret a binary accepts.
const MinSecretLen = 16

// Secret is a configured secret: at least MinSecretLen characters when
// set, and logged as "[set]", never as itself.
type Secret string

// EnvDecode refuses a short secret (whether one is required is the
// field's tag's to say).
func (s *Secret) EnvDecode(v string) error {
	if v != "" && len(v) < MinSecretLen {
		return fmt.Errorf("a secret of at least %d characters is needed (openssl rand -hex 32), got %d", MinSecretLen, len(v))
	}
	*s = Secret(v)
	return nil
}

// LogValue masks the secret.
func (s Secret) LogValue() slog.Value {
	if s == "" {
		return slog.StringValue("[unset]")
	}
	return slog.StringValue("[set]")
}

// Private is a value that may carry a credential inside other text (a
// header list): any length, logged only as set or unset.
type Private string

// LogValue masks the value.
func (p Private) LogValue() slog.Value { return Secret(p).LogValue() }

// URL is an absolute http(s) URL.
type URL string

// EnvDecode refuses anything but an absolute http(s) URL.
func (u *URL) EnvDecode(v string) error {
	if v == "" {
		return nil
	}
	p, err := url.Parse(v)
	if err != nil || (p.Scheme != "http" && p.Scheme != "https") || p.Host == "" {
		return fmt.Errorf("%q is not an absolute http(s) URL", v)
	}
	*u = URL(v)
	return nil
}

// Parsed is the URL, parsed (EnvDecode checked it).
func (u URL) Parsed() *url.URL {
	p, _ := url.Parse(string(u))
	return p
}

// Positive is a rule for a duration that must be above zero; name is its
// variable.
func Positive(name string, d time.Duration) error {
	if d <= 0 {
		return fmt.Errorf("%s: %s is not a positive duration such as 50ms", name, d)
	}
	return nil
}

// NotNegative is a rule for a duration that may be zero; name is its
// variable.
func NotNegative(name string, d time.Duration) error {
	if d < 0 {
		return fmt.Errorf("%s: %s is negative", name, d)
	}
	return nil
}

// Masked is cfg as it may be logged: each variable under its name (an
// unset one without a default is left out), secrets as "[set]", URLs
// without their passwords.
func Masked(cfg any) slog.Value {
	v := reflect.ValueOf(cfg)
	for v.Kind() == reflect.Pointer {
		v = v.Elem()
	}
	return slog.GroupValue(maskedAttrs(v, "")...)
}

func maskedAttrs(v reflect.Value, prefix string) []slog.Attr {
	t := v.Type()
	attrs := make([]slog.Attr, 0, t.NumField())
	for i := 0; i < t.NumField(); i++ {
		f := t.Field(i)
		if !f.IsExported() {
			continue
		}
		name := variable(f)
		if f.Type.Kind() == reflect.Struct && name == "" {
			attrs = append(attrs, maskedAttrs(v.Field(i), prefix+partPrefix(f))...)
			continue
		}
		name = prefix + name
		if name == "" {
			continue
		}
		switch fv := v.Field(i).Interface().(type) {
		case Private:
			if fv != "" {
				attrs = append(attrs, slog.Any(name, fv.LogValue()))
			}
		case slog.LogValuer:
			attrs = append(attrs, slog.Any(name, fv.LogValue()))
		case time.Duration:
			attrs = append(attrs, slog.String(name, fv.String()))
		case int:
			attrs = append(attrs, slog.Int(name, fv))
		case float64:
			attrs = append(attrs, slog.Float64(name, fv))
		default:
			if v := fmt.Sprint(fv); v != "" {
				attrs = append(attrs, slog.String(name, Redacted(v)))
			}
		}
	}
	return attrs
}

// variable is the name in f's env tag (go-envconfig's: the part before
// the first comma).
func variable(f reflect.StructField) string {
	name, _, _ := strings.Cut(f.Tag.Get("env"), ",")
	return strings.TrimSpace(name)
}

// partPrefix is the prefix a part's tag gives its variables
// (`env:", prefix=ORDERS_"`).
func partPrefix(f reflect.StructField) string {
	_, opts, _ := strings.Cut(f.Tag.Get("env"), ",")
	for _, o := range strings.Split(opts, ",") {
		if p, ok := strings.CutPrefix(strings.TrimSpace(o), "prefix="); ok {
			return p
		}
	}
	return ""
}

// Redacted is a URL without its password (and any other string as it is).
func Redacted(s string) string {
	u, err := url.Parse(s)
	if err != nil || u.User == nil {
		return s
	}
	return u.Redacted()
}

// knownDefaults are secrets that have been public: the examples of this
// repository's docs and files. A production binary refuses them.
var knownDefaults = []string{
	"dev-internal-token-change-me", "dev-quote-secret-change-me", "dev-consent-secret-change-me",
	"dev-bank-provider-key-change-me", "internal-token-0123456789", "test-secret-0123456789",
}

// KnownDefault reports whether a secret is a known public default.
func KnownDefault(secret string) bool {
	l := strings.ToLower(secret)
	if strings.Contains(l, "change-me") || strings.Contains(l, "changeme") {
		return true
	}
	for _, d := range knownDefaults {
		if secret == d {
			return true
		}
	}
	return false
}

// KnownDefaultIn finds a Secret of cfg holding a known default, and names
// its variable.
func KnownDefaultIn(cfg any) (string, bool) {
	v := reflect.ValueOf(cfg)
	for v.Kind() == reflect.Pointer {
		v = v.Elem()
	}
	return knownDefaultIn(v, "")
}

func knownDefaultIn(v reflect.Value, prefix string) (string, bool) {
	t := v.Type()
	for i := 0; i < t.NumField(); i++ {
		f := t.Field(i)
		switch {
		case !f.IsExported():
		case f.Type == reflect.TypeFor[Secret]() && KnownDefault(v.Field(i).String()):
			return prefix + variable(f), true
		case f.Type.Kind() == reflect.Struct:
			if name, ok := knownDefaultIn(v.Field(i), prefix+partPrefix(f)); ok {
				return name, true
			}
		}
	}
	return "", false
}
