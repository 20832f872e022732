package apikey

import (
	"context"
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
	OnLoad       func(keys int)
	OnLoadFailed func()

	stamp fileStamp
}

type fileStamp struct {
	exists  bool
	modTime time.Time
	size    int64
	inode   uint64
}

// NewStore loads path once. A missing file is an empty set (every /v1 path
// answers not_configured); a file that does not parse stops the boot.
func NewStore(path string, log *slog.Logger) (*Store, error) {
	s := &Store{path: path, log: log}
	s.stamp = stat(path)
	f, err := Load(path)
	switch {
	case IsNotExist(err):
		log.Warn("keys file does not exist; every /v1 path answers not_configured until it does", "path", path)
		f = &File{}
	case err != nil:
		return nil, err
	}
	s.current.Store(NewSet(f))
	log.Info("keys loaded", "path", path, "keys", len(f.Keys))
	return s, nil
}

// Current is the live set.
func (s *Store) Current() *Set { return s.current.Load() }

// Watch re-reads the file whenever it changes (checked every interval) until
// ctx ends. A file that fails to parse, or disappears, leaves the last good
// set in place.
func (s *Store) Watch(ctx context.Context, interval time.Duration) {
	if s.OnLoad != nil {
		s.OnLoad(s.Current().Len())
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

// Reload re-reads the file if its stamp changed since the last look.
func (s *Store) Reload() {
	st := stat(s.path)
	if st == s.stamp {
		return
	}
	s.stamp = st
	f, err := Load(s.path)
	if err != nil {
		s.log.Error("keys file reload failed; keeping the last good set", "path", s.path, "err", err)
		if s.OnLoadFailed != nil {
			s.OnLoadFailed()
		}
		return
	}
	s.current.Store(NewSet(f))
	s.log.Info("keys reloaded", "path", s.path, "keys", len(f.Keys))
	if s.OnLoad != nil {
		s.OnLoad(len(f.Keys))
	}
}

func stat(path string) fileStamp {
	fi, err := os.Stat(path)
	if err != nil {
		return fileStamp{}
	}
	return fileStamp{exists: true, modTime: fi.ModTime(), size: fi.Size(), inode: inode(fi)}
}
