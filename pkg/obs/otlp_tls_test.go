package obs

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// writePEM writes blocks of type kind to a file of the test's and returns
// its path.
func writePEM(t *testing.T, name, kind string, der []byte) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: kind, Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// clientPair is a self-signed client certificate and its key, as files,
// and its pool (what the collector trusts).
func clientPair(t *testing.T) (cert, key string, pool *x509.CertPool) {
	t.Helper()
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "payout"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		KeyUsage: x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
		IsCA: true, BasicConstraintsValid: true}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &k.PublicKey, k)
	if err != nil {
		t.Fatal(err)
	}
	kder, err := x509.MarshalECPrivateKey(k)
	if err != nil {
		t.Fatal(err)
	}
	parsed, _ := x509.ParseCertificate(der)
	pool = x509.NewCertPool()
	pool.AddCert(parsed)
	return writePEM(t, "client.pem", "CERTIFICATE", der), writePEM(t, "client-key.pem", "EC PRIVATE KEY", kder), pool
}

// A collector behind a CA of its own is reached with
// OTEL_EXPORTER_OTLP_CERTIFICATE (the exporter's own client would have
// ignored it), and one that asks for the exporter's certificate gets the
// one of OTEL_EXPORTER_OTLP_CLIENT_CERTIFICATE and _CLIENT_KEY; without
// them, the export fails rather than trust anyone.
func TestOTLPExporterHonoursTheTLSVariables(t *testing.T) {
	t.Parallel()
	cert, key, clients := clientPair(t)
	var received atomic.Int32
	collector := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.TLS != nil && len(r.TLS.PeerCertificates) == 1 && r.TLS.PeerCertificates[0].Subject.CommonName == "payout" {
			received.Add(1)
		}
	}))
	collector.TLS = &tls.Config{ClientAuth: tls.RequireAndVerifyClientCert, ClientCAs: clients}
	collector.StartTLS()
	t.Cleanup(collector.Close)
	ca := writePEM(t, "collector-ca.pem", "CERTIFICATE", collector.Certificate().Raw)

	export := func(vars map[string]string) error {
		vars["OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"] = collector.URL + "/v1/traces"
		vars["OTEL_EXPORTER_OTLP_TIMEOUT"] = "2000"
		e, err := newOTLPExporter(env(vars))
		if err != nil {
			return err
		}
		defer e.Shutdown(context.Background())
		return e.ExportSpans(context.Background(), oneSpan())
	}
	if err := export(map[string]string{"OTEL_EXPORTER_OTLP_CERTIFICATE": ca, "OTEL_EXPORTER_OTLP_CLIENT_CERTIFICATE": cert,
		"OTEL_EXPORTER_OTLP_CLIENT_KEY": key}); err != nil || received.Load() != 1 {
		t.Fatalf("with the collector's CA and a client certificate: %v, %d batches received", err, received.Load())
	}
	if err := export(map[string]string{"OTEL_EXPORTER_OTLP_TRACES_CERTIFICATE": ca, "OTEL_EXPORTER_OTLP_TRACES_CLIENT_CERTIFICATE": cert,
		"OTEL_EXPORTER_OTLP_TRACES_CLIENT_KEY": key}); err != nil || received.Load() != 2 {
		t.Fatalf("the traces-specific variables: %v, %d batches received", err, received.Load())
	}
	if err := export(map[string]string{"OTEL_EXPORTER_OTLP_CLIENT_CERTIFICATE": cert, "OTEL_EXPORTER_OTLP_CLIENT_KEY": key}); err == nil {
		t.Error("a collector whose CA the exporter was not given: exported")
	}
	if err := export(map[string]string{"OTEL_EXPORTER_OTLP_CERTIFICATE": ca}); err == nil {
		t.Error("a collector that asks for a client certificate, none given: exported")
	}
	for _, vars := range []map[string]string{
		{"OTEL_EXPORTER_OTLP_CERTIFICATE": filepath.Join(t.TempDir(), "missing.pem")},
		{"OTEL_EXPORTER_OTLP_CLIENT_CERTIFICATE": cert},
		{"OTEL_EXPORTER_OTLP_CLIENT_CERTIFICATE": cert, "OTEL_EXPORTER_OTLP_CLIENT_KEY": ca},
	} {
		if err := export(vars); err == nil || !strings.Contains(err.Error(), "OTEL_EXPORTER_OTLP_") {
			t.Errorf("%v: %v, want a refusal naming the variable", vars, err)
		}
	}
	if received.Load() != 2 {
		t.Errorf("%d batches received, want 2", received.Load())
	}
}
