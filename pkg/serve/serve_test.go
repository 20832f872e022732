package serve

import (
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"testing"
)

// TestProbe: the healthcheck of a container without a shell answers by
// exit status what the URL answers.
func TestProbe(t *testing.T) {
	t.Parallel()
	status := http.StatusOK
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(status) }))
	defer srv.Close()
	if err := Probe(srv.URL); err != nil {
		t.Errorf("Probe(200) = %v, want nil", err)
	}
	status = http.StatusServiceUnavailable
	if err := Probe(srv.URL); err == nil || err.Error() != "probe: status 503" {
		t.Errorf("Probe(503) = %v, want probe: status 503", err)
	}
	srv.Close()
	if err := Probe(srv.URL); err == nil {
		t.Error("Probe(a closed port) = nil")
	}
}

// TestInstallProbe copies the running binary, executable, replacing any
// earlier copy at once.
func TestInstallProbe(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "probe")
	if err := os.WriteFile(path, []byte("old"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := InstallProbe(path); err != nil {
		t.Fatal(err)
	}
	self, _ := os.Executable()
	want, _ := os.Stat(self)
	got, err := os.Stat(path)
	if err != nil || got.Size() != want.Size() || got.Mode().Perm()&0o111 == 0 {
		t.Fatalf("installed probe: %v, size %d (want %d), mode %v", err, got.Size(), want.Size(), got.Mode())
	}
	if _, err := os.Stat(path + ".tmp"); !os.IsNotExist(err) {
		t.Errorf("the temporary copy stayed: %v", err)
	}
}
