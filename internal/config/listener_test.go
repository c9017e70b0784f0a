package config

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
	"strings"
	"testing"
	"time"
)

// writeKeyPair writes a self-signed certificate and its key as PEM files.
func writeKeyPair(t *testing.T, dir string) (cert, key string) {
	t.Helper()
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "localhost"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour), DNSNames: []string{"localhost"}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &k.PublicKey, k)
	if err != nil {
		t.Fatal(err)
	}
	kder, err := x509.MarshalPKCS8PrivateKey(k)
	if err != nil {
		t.Fatal(err)
	}
	cert, key = filepath.Join(dir, "cert.pem"), filepath.Join(dir, "key.pem")
	if err := os.WriteFile(cert, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(key, pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: kder}), 0o600); err != nil {
		t.Fatal(err)
	}
	return cert, key
}

func TestListenerSettings(t *testing.T) {
	dir := t.TempDir()
	cert, key := writeKeyPair(t, dir)
	garbage := filepath.Join(dir, "garbage.pem")
	if err := os.WriteFile(garbage, []byte("not a certificate"), 0o600); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name, yaml   string
		field, inMsg string // the one error expected; none when field is ""
	}{
		{"tls ok", "server:\n  tls: {cert_file: " + cert + ", key_file: " + key + "}\n", "", ""},
		{"tls without key", "server:\n  tls: {cert_file: " + cert + "}\n", "server.tls.key_file", "required"},
		{"tls without cert", "server:\n  tls: {key_file: " + key + "}\n", "server.tls.cert_file", "required"},
		{"tls empty", "server:\n  tls: {}\n", "server.tls", "needs cert_file and key_file"},
		{"tls missing file", "server:\n  tls: {cert_file: " + dir + "/nope.pem, key_file: " + key + "}\n", "server.tls", "nope.pem"},
		{"tls not pem", "server:\n  tls: {cert_file: " + garbage + ", key_file: " + key + "}\n", "server.tls", "cannot use the certificate"},
		{"tls key of another cert", "server:\n  tls: {cert_file: " + cert + ", key_file: " + cert + "}\n", "server.tls", "cannot use the certificate"},
		{"header limit", "server:\n  max_header_bytes: 64KiB\n", "", ""},
		{"header limit too small", "server:\n  max_header_bytes: 1000\n", "server.max_header_bytes", "at least 4KiB"},
		{"body timeout negative", "server:\n  body_read_timeout: -1s\n", "server.body_read_timeout", "must not be negative"},
		{"engine net/http", "server:\n  http1_engine: net/http\n", "", ""},
		{"engine gatehouse", "server:\n  http1_engine: gatehouse\n", "", ""},
		{"engine unknown", "server:\n  http1_engine: fasthttp\n", "server.http1_engine", `unknown HTTP/1.x engine "fasthttp"`},
		{"engine wrong case", "server:\n  http1_engine: Gatehouse\n", "server.http1_engine", "want one of"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg, err := Parse([]byte(tt.yaml), "t.yaml", testTypes())
			if tt.field == "" {
				if err != nil {
					t.Fatal(err)
				}
				if cfg.Server.MaxHeaderBytes < smallestHeaderLimit || cfg.Server.BodyReadTimeout <= 0 || cfg.Server.HTTP1Engine == "" {
					t.Errorf("defaults not applied: %+v", cfg.Server)
				}
				return
			}
			fe := onlyError(t, err)
			if fe.Field != tt.field || !strings.Contains(fe.Message, tt.inMsg) {
				t.Errorf("got %v, want %s: …%s…", fe, tt.field, tt.inMsg)
			}
		})
	}
}

// TestHTTP1EngineDefault: with no server.http1_engine, gatehouse's own
// engine serves HTTP/1.x; the value given is kept as given.
func TestHTTP1EngineDefault(t *testing.T) {
	for yaml, want := range map[string]string{
		"server: {}\n":                           EngineGatehouse,
		"server: {http1_engine: gatehouse}\n":    EngineGatehouse,
		"server: {http1_engine: \"net/http\"}\n": EngineNetHTTP,
	} {
		cfg, err := Parse([]byte(yaml), "t.yaml", testTypes())
		if err != nil {
			t.Fatal(err)
		}
		if cfg.Server.HTTP1Engine != want {
			t.Errorf("%q: server.http1_engine %q, want %q", yaml, cfg.Server.HTTP1Engine, want)
		}
	}
}
