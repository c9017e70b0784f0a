package certfile

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// writePair writes a self-signed certificate with the given serial number
// and its key, and moves the files' modification time to at.
func writePair(t *testing.T, cert, key string, serial int64, at time.Time) {
	t.Helper()
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(serial), Subject: pkix.Name{CommonName: "localhost"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour), DNSNames: []string{"localhost"}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &k.PublicKey, k)
	if err != nil {
		t.Fatal(err)
	}
	kder, err := x509.MarshalPKCS8PrivateKey(k)
	if err != nil {
		t.Fatal(err)
	}
	write(t, cert, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), at)
	write(t, key, pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: kder}), at)
}

func write(t *testing.T, path string, b []byte, at time.Time) {
	t.Helper()
	if err := os.WriteFile(path, b, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Chtimes(path, at, at); err != nil {
		t.Fatal(err)
	}
}

func serialOf(t *testing.T, s *Source) int64 {
	t.Helper()
	c, err := s.GetCertificate(nil)
	if err != nil || c == nil {
		t.Fatalf("no certificate: %v", err)
	}
	leaf, err := x509.ParseCertificate(c.Certificate[0])
	if err != nil {
		t.Fatal(err)
	}
	return leaf.SerialNumber.Int64()
}

func TestSourceReloadsChangedFiles(t *testing.T) {
	dir := t.TempDir()
	cert, key := filepath.Join(dir, "cert.pem"), filepath.Join(dir, "key.pem")
	t0 := time.Now().Add(-time.Hour)
	writePair(t, cert, key, 1, t0)
	s, err := Load(cert, key)
	if err != nil {
		t.Fatal(err)
	}
	var reported []error
	s.OnError = func(err error) { reported = append(reported, err) }
	if got := serialOf(t, s); got != 1 {
		t.Fatalf("serial %d", got)
	}

	writePair(t, cert, key, 2, t0.Add(time.Minute))
	if got := serialOf(t, s); got != 2 {
		t.Fatalf("after renewal: serial %d, want 2", got)
	}

	// Half written: the new certificate with the old key. The previous
	// pair is served and the problem reported once.
	old, _ := os.ReadFile(key)
	writePair(t, cert, key, 3, t0.Add(2*time.Minute))
	write(t, key, old, t0.Add(2*time.Minute))
	for range 3 {
		if got := serialOf(t, s); got != 2 {
			t.Fatalf("with a mismatched pair: serial %d, want 2", got)
		}
	}
	if len(reported) != 1 {
		t.Fatalf("reported %d times: %v", len(reported), reported)
	}

	// Files missing for a moment (being replaced): still served.
	if err := os.Remove(cert); err != nil {
		t.Fatal(err)
	}
	if got := serialOf(t, s); got != 2 {
		t.Fatalf("with the file gone: serial %d", got)
	}
	writePair(t, cert, key, 4, t0.Add(3*time.Minute))
	if got := serialOf(t, s); got != 4 {
		t.Fatalf("after the replacement: serial %d, want 4", got)
	}
}

func TestLoadRefusesBadFiles(t *testing.T) {
	dir := t.TempDir()
	cert, key := filepath.Join(dir, "cert.pem"), filepath.Join(dir, "key.pem")
	if _, err := Load(cert, key); err == nil {
		t.Error("missing files loaded")
	}
	write(t, cert, []byte("garbage"), time.Now())
	write(t, key, []byte("garbage"), time.Now())
	if _, err := Load(cert, key); err == nil {
		t.Error("garbage loaded")
	}
}
