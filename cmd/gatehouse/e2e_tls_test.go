package main

import (
	"bufio"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"io"
	"math/big"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"gatehouse/internal/config"
	"gatehouse/internal/mockllm"
)

// server.tls end to end: HTTPS with HTTP/2 and HTTP/1.1 from the
// configured files, a renewed certificate used by new connections without
// a restart, and bad files refused at start.

// writeCert writes a self-signed certificate for 127.0.0.1 with the given
// serial number, and its key; it returns the certificate.
func writeCert(t *testing.T, certFile, keyFile string, serial int64) *x509.Certificate {
	t.Helper()
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(serial), Subject: pkix.Name{CommonName: "gatehouse test"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)}, IsCA: true, BasicConstraintsValid: true,
		KeyUsage: x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &k.PublicKey, k)
	if err != nil {
		t.Fatal(err)
	}
	kder, err := x509.MarshalPKCS8PrivateKey(k)
	if err != nil {
		t.Fatal(err)
	}
	// Written beside and renamed over, as renewal tools do: a reader
	// never sees half a file.
	for path, b := range map[string][]byte{
		certFile: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		keyFile:  pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: kder}),
	} {
		if err := os.WriteFile(path+".new", b, 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(path+".new", path); err != nil {
			t.Fatal(err)
		}
	}
	c, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// servedSerial opens a new TLS connection and returns the serial number
// of the certificate the gateway presents.
func servedSerial(t *testing.T, addr string) int64 {
	t.Helper()
	c, err := tls.Dial("tcp", addr, &tls.Config{InsecureSkipVerify: true}) // only reading what is served
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	return c.ConnectionState().PeerCertificates[0].SerialNumber.Int64()
}

func TestTLSListener(t *testing.T) {
	up := startUpstream(t, mockllm.Options{})
	dir := t.TempDir()
	certFile, keyFile := filepath.Join(dir, "cert.pem"), filepath.Join(dir, "key.pem")
	first := writeCert(t, certFile, keyFile, 1)
	gw := startGateway(t, baseConfig(up, "admin_key: gh-tls-admin-key-0123456789\nserver:\n  tls: {cert_file: "+certFile+", key_file: "+keyFile+"}\n"))
	if !strings.HasPrefix(gw.URL, "https://") {
		t.Fatalf("served at %s", gw.URL)
	}
	roots := x509.NewCertPool()
	roots.AddCert(first)
	for _, proto := range []string{"HTTP/2.0", "HTTP/1.1"} {
		p := new(http.Protocols)
		if proto == "HTTP/2.0" {
			p.SetHTTP2(true)
		} else {
			p.SetHTTP1(true)
		}
		hc := &http.Client{Transport: &http.Transport{Protocols: p, TLSClientConfig: &tls.Config{RootCAs: roots}}}
		req, _ := http.NewRequest(http.MethodPost, gw.URL+"/v1/chat/completions", strings.NewReader(plainChat))
		req.Header.Set("Authorization", "Bearer "+clientKey)
		resp, err := hc.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 || resp.Proto != proto || resp.TLS == nil {
			t.Fatalf("%s: %d over %s: %s", proto, resp.StatusCode, resp.Proto, b)
		}
		// The dashboard knows it is served over TLS (over HTTP/1.1 the
		// connection is watched, and still reports its TLS state).
		ui, err := hc.Get(gw.URL + "/ui/")
		if err != nil {
			t.Fatal(err)
		}
		ui.Body.Close()
		if ui.StatusCode != 200 || !strings.HasPrefix(ui.Header.Get("Strict-Transport-Security"), "max-age=") {
			t.Errorf("%s: /ui/ answered %d with Strict-Transport-Security %q", proto, ui.StatusCode, ui.Header.Get("Strict-Transport-Security"))
		}
	}

	addr := strings.TrimPrefix(gw.URL, "https://")

	// HTTP/1.1 over TLS is watched for request smuggling as plain
	// connections are.
	tc, err := tls.Dial("tcp", addr, &tls.Config{RootCAs: roots, NextProtos: []string{"http/1.1"}})
	if err != nil {
		t.Fatal(err)
	}
	defer tc.Close()
	_ = tc.SetDeadline(time.Now().Add(30 * time.Second)) // a hung test fails instead of hanging
	c := &rawConn{t: t, c: tc, br: bufio.NewReader(tc)}
	c.send(chatRequest("/v1/chat/completions", "", plainChat)) // an ordinary request first
	if resp, body := c.answer(); resp.StatusCode != 200 {
		t.Fatalf("over TLS HTTP/1.1: %d %s", resp.StatusCode, body)
	}
	c.send("POST /v1/chat/completions HTTP/1.1\r\nHost: gw\r\nAuthorization: Bearer " + clientKey + "\r\nContent-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n" +
		chatRequest("/v1/chat/completions", "", plainChat))
	if resp, body := c.answer(); resp.StatusCode != 400 || !resp.Close {
		t.Fatalf("smuggling over TLS: %d (close %v) %s", resp.StatusCode, resp.Close, body)
	}
	if !c.closed() {
		t.Error("the TLS connection stayed open after an ambiguous request")
	}

	if got := servedSerial(t, addr); got != 1 {
		t.Fatalf("serving serial %d", got)
	}
	writeCert(t, certFile, keyFile, 2)
	waitFor(t, 30*time.Second, "the renewed certificate", func() bool { return servedSerial(t, addr) == 2 })

	// A renewal that cannot be used (a key of another certificate) keeps
	// the last good one in service.
	other := filepath.Join(dir, "other")
	writeCert(t, other+".cert", other+".key", 3)
	k, _ := os.ReadFile(other + ".key")
	if err := os.WriteFile(keyFile, k, 0o600); err != nil {
		t.Fatal(err)
	}
	if got := servedSerial(t, addr); got != 2 {
		t.Fatalf("with a mismatched pair: serial %d", got)
	}
	waitFor(t, 30*time.Second, "the reload error in the log", func() bool { return strings.Contains(gw.Logs.String(), "TLS certificate reload") })

	// Plain HTTP to the TLS port is refused, and the gateway serves on.
	resp, err := http.Get("http://" + addr + "/healthz")
	if err == nil {
		resp.Body.Close()
		if resp.StatusCode != 400 {
			t.Errorf("plain HTTP: %d", resp.StatusCode)
		}
	}
	if got := servedSerial(t, addr); got != 2 {
		t.Fatalf("serial %d", got)
	}
}

func TestTLSFilesAreCheckedAtStart(t *testing.T) {
	up := startUpstream(t, mockllm.Options{})
	dir := t.TempDir()
	bad := filepath.Join(dir, "bad.pem")
	if err := os.WriteFile(bad, []byte("-----BEGIN CERTIFICATE-----\nnope\n-----END CERTIFICATE-----\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "gatehouse.yaml")
	if err := os.WriteFile(path, []byte(withTestStorage(baseConfig(up, "server:\n  tls: {cert_file: "+bad+", key_file: "+bad+"}\n"), dir)), 0o600); err != nil {
		t.Fatal(err)
	}
	_, err := config.Load(path, providerTypes())
	if err == nil || !strings.Contains(err.Error(), "server.tls") {
		t.Fatalf("got %v, want an error naming server.tls", err)
	}
}
