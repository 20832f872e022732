package apikey

import (
	"context"
	"crypto/sha256"
	"errors"
	"log/slog"
	"os"
	"sync/atomic"
	"time"
)

// Store holds the live key set and keeps it in step with the keys file.
type Store struct {
	path    string
	log     *slog.Logger
	current atomic.Pointer[Set]

	// Hooks for metrics; nil hooks are skipped.
	OnLoad       func(keys *Set)
	OnLoadFailed func()

	// last is what the file held at the last look (or its read error), so a
	// change is acted on once: a broken file is logged and counted once, not
	// at every tick.
	last [32]byte
}

// NewStore loads path once. A missing file is an empty set (every /v1 path
// answers not_configured); a file that does not parse stops the boot.
func NewStore(path string, log *slog.Logger) (*Store, error) {
	s := &Store{path: path, log: log}
	b, err := os.ReadFile(path)
	f := &File{}
	switch {
	case errors.Is(err, os.ErrNotExist):
		log.Warn("keys file does not exist; every /v1 path answers not_configured until it does", "path", path)
	case err != nil:
		return nil, err
	default:
		if f, err = Parse(b); err != nil {
			return nil, err
		}
	}
	s.last = fingerprintOf(b, err)
	s.current.Store(NewSet(f))
	log.Info("keys loaded", "path", path, "keys", len(f.Keys))
	return s, nil
}

// Current is the live set.
func (s *Store) Current() *Set { return s.current.Load() }

// Watch re-reads the file every interval until ctx ends. Keys files are
// small; comparing their content is cheaper than trusting timestamps, whose
// granularity could hide a change made within the same tick.
func (s *Store) Watch(ctx context.Context, interval time.Duration) {
	if s.OnLoad != nil {
		s.OnLoad(s.Current())
	}
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			s.Reload()
		}
	}
}

// Reload applies the file if it changed since the last look. A file that
// fails to parse, or disappears, leaves the last good set in place.
func (s *Store) Reload() {
	b, err := os.ReadFile(s.path)
	fp := fingerprintOf(b, err)
	if fp == s.last {
		return
	}
	s.last = fp
	var f *File
	if err == nil {
		f, err = Parse(b)
	}
	if err != nil {
		s.log.Error("keys file reload failed; keeping the last good set", "path", s.path, "err", err)
		if s.OnLoadFailed != nil {
			s.OnLoadFailed()
		}
		return
	}
	set := NewSet(f)
	s.current.Store(set)
	s.log.Info("keys reloaded", "path", s.path, "keys", len(f.Keys))
	if s.OnLoad != nil {
		s.OnLoad(set)
	}
}

// fingerprintOf identifies what a read found: the content, or the error.
func fingerprintOf(b []byte, err error) [32]byte {
	if err != nil {
		return sha256.Sum256([]byte("error: " + err.Error()))
	}
	return sha256.Sum256(b)
}
