package deploycheck

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

// TestTheGoClientIsGeneratedFromTheDocument: clients/go is what
// oapi-codegen makes of the document the gateway serves, so the document
// is proven by a real generator and the client never lags it.
func TestTheGoClientIsGeneratedFromTheDocument(t *testing.T) {
	t.Parallel()
	out := filepath.Join(t.TempDir(), "partnerapi.gen.go")
	cmd := exec.Command("go", "tool", "oapi-codegen", "-config", "../clients/go/oapi-codegen.yaml",
		"-o", out, "../services/gateway/internal/apidocs/openapi.yaml")
	cmd.Dir = ".." // devstack, whose go.mod pins the generator
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("oapi-codegen: %v\n%s", err, b)
	}
	got, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	committed, err := os.ReadFile("../../clients/go/partnerapi.gen.go")
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, committed) {
		t.Fatal("clients/go/partnerapi.gen.go is not what the document generates: run make generate")
	}
}
