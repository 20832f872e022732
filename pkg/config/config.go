// Package config is how a binary reads its configuration: one struct per
// binary, filled from the environment (through the getenv it is given),
// every variable checked before the first error is answered, and logged
// with its secrets masked. A package that needs settings exports its part
// (database.Config, bankprovider.Config) for the binaries to embed.
package config

import (
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"reflect"
	"strconv"
	"strings"
	"time"
)

// Secret is a configured secret. It logs as "[set]", never as itself.
type Secret string

// LogValue masks the secret.
func (s Secret) LogValue() slog.Value {
	if s == "" {
		return slog.StringValue("[unset]")
	}
	return slog.StringValue("[set]")
}

// MinSecretLen is the shortest secret a binary accepts.
const MinSecretLen = 16

// Load fills the struct cfg points to from getenv. Each field names
// its variable in an `env` tag and may carry a `default`; `doc` says what
// the variable is for, in the error a missing one gets. Field types:
//
//	string          any value; with `url:"absolute"` an absolute http(s) URL
//	Secret          required, at least MinSecretLen characters
//	time.Duration   a Go duration ("50ms"), positive unless `zero:"allowed"`
//	int             a positive integer
//
// Every variable is checked before the first error is returned, so one run
// lists everything wrong.
//
// A struct field without an env tag, embedded or named, is a part: its
// fields count as the outer struct's. A package's part of several
// binaries' config (database.Config, bankprovider.Config) is declared once.
func Load(getenv func(string) string, cfg any) error {
	return loadStruct(getenv, reflect.ValueOf(cfg).Elem())
}

func loadStruct(getenv func(string) string, v reflect.Value) error {
	t := v.Type()
	var errs []error
	for i := 0; i < t.NumField(); i++ {
		f := t.Field(i)
		if part(f) {
			if err := loadStruct(getenv, v.Field(i)); err != nil {
				errs = append(errs, err)
			}
			continue
		}
		name := f.Tag.Get("env")
		if name == "" {
			continue
		}
		raw := getenv(name)
		if raw == "" {
			raw = f.Tag.Get("default")
		}
		if err := setField(v.Field(i), f, name, raw); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// part reports whether f is a part of the config rather than a variable.
func part(f reflect.StructField) bool {
	return f.Type.Kind() == reflect.Struct && f.Tag.Get("env") == ""
}

var (
	secretType   = reflect.TypeFor[Secret]()
	durationType = reflect.TypeFor[time.Duration]()
)

func setField(fv reflect.Value, f reflect.StructField, name, raw string) error {
	doc := f.Tag.Get("doc")
	switch {
	case f.Type == secretType:
		if len(raw) < MinSecretLen {
			return fmt.Errorf("%s must be set to a secret of at least %d characters: %s", name, MinSecretLen, doc)
		}
		fv.SetString(raw)
	case f.Type == durationType:
		if raw == "" && f.Tag.Get("optional") == "true" {
			return nil
		}
		d, err := time.ParseDuration(raw)
		if err != nil || d < 0 || (d == 0 && f.Tag.Get("zero") != "allowed") {
			return fmt.Errorf("%s: %q is not a positive duration such as 50ms", name, raw)
		}
		fv.SetInt(int64(d))
	case f.Type.Kind() == reflect.Int:
		n, err := strconv.Atoi(raw)
		if err != nil || n < 1 {
			return fmt.Errorf("%s: %q is not a positive integer", name, raw)
		}
		fv.SetInt(int64(n))
	case f.Type.Kind() == reflect.String:
		if raw == "" && f.Tag.Get("default") == "" && f.Tag.Get("optional") != "true" {
			return fmt.Errorf("%s must be set: %s", name, doc)
		}
		if f.Tag.Get("url") == "absolute" && raw != "" {
			u, err := url.Parse(raw)
			if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
				return fmt.Errorf("%s: %q is not an absolute http(s) URL", name, raw)
			}
		}
		fv.SetString(raw)
	default:
		panic("config: field " + f.Name + " has an unsupported type " + f.Type.String())
	}
	return nil
}

// Masked is cfg as it may be logged: each field under its variable's name,
// secrets as "[set]", URLs without their passwords.
func Masked(cfg any) slog.Value {
	v := reflect.ValueOf(cfg)
	if v.Kind() == reflect.Pointer {
		v = v.Elem()
	}
	return slog.GroupValue(maskedAttrs(v)...)
}

func maskedAttrs(v reflect.Value) []slog.Attr {
	t := v.Type()
	attrs := make([]slog.Attr, 0, t.NumField())
	for i := 0; i < t.NumField(); i++ {
		f := t.Field(i)
		if part(f) {
			attrs = append(attrs, maskedAttrs(v.Field(i))...)
			continue
		}
		name := f.Tag.Get("env")
		if name == "" {
			continue
		}
		fv := v.Field(i)
		switch {
		case f.Type == secretType:
			attrs = append(attrs, slog.String(name, Secret(fv.String()).LogValue().String()))
		case f.Type == durationType:
			attrs = append(attrs, slog.String(name, time.Duration(fv.Int()).String()))
		case f.Type.Kind() == reflect.Int:
			attrs = append(attrs, slog.Int64(name, fv.Int()))
		default:
			attrs = append(attrs, slog.String(name, Redacted(fv.String())))
		}
	}
	return attrs
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

// KnownDefaultIn finds a Secret field of cfg holding a known default.
func KnownDefaultIn(cfg any) (string, bool) {
	v := reflect.ValueOf(cfg)
	if v.Kind() == reflect.Pointer {
		v = v.Elem()
	}
	return knownDefaultField(v)
}

func knownDefaultField(v reflect.Value) (string, bool) {
	t := v.Type()
	for i := 0; i < t.NumField(); i++ {
		f := t.Field(i)
		if part(f) {
			if name, ok := knownDefaultField(v.Field(i)); ok {
				return name, true
			}
			continue
		}
		if f.Type == secretType && KnownDefault(v.Field(i).String()) {
			return f.Tag.Get("env"), true
		}
	}
	return "", false
}
