package main

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestHealthURL(t *testing.T) {
	tests := []struct{ listen, want string }{
		{"0.0.0.0:8080", "http://127.0.0.1:8080/healthz"},
		{":9000", "http://127.0.0.1:9000/healthz"},
		{"[::]:8080", "http://[::1]:8080/healthz"},
		{"127.0.0.1:8080", "http://127.0.0.1:8080/healthz"},
		{"10.0.0.7:80", "http://10.0.0.7:80/healthz"},
		{"[fd00::1]:8080", "http://[fd00::1]:8080/healthz"},
	}
	for _, tt := range tests {
		got, err := healthURL(tt.listen)
		if err != nil || got != tt.want {
			t.Errorf("healthURL(%q) = %q, %v; want %q", tt.listen, got, err, tt.want)
		}
	}
	if _, err := healthURL("8080"); err == nil {
		t.Error("healthURL(\"8080\"): no error for an address without a port")
	}
}

func TestProbe(t *testing.T) {
	status := http.StatusOK
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/healthz" {
			http.NotFound(w, r)
			return
		}
		w.WriteHeader(status)
	}))
	defer srv.Close()
	ctx := context.Background()
	if err := probe(ctx, srv.URL+"/healthz"); err != nil {
		t.Errorf("200: %v", err)
	}
	status = http.StatusServiceUnavailable
	if err := probe(ctx, srv.URL+"/healthz"); err == nil || !strings.Contains(err.Error(), "503") {
		t.Errorf("503: err = %v, want one naming the status", err)
	}
	// A port nobody listens on.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	if err := probe(ctx, "http://"+addr+"/healthz"); err == nil {
		t.Error("closed port: no error")
	}
	// A server that never answers is given up on.
	hang := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { <-r.Context().Done() }))
	defer hang.Close()
	tctx, cancel := context.WithTimeout(ctx, 100*time.Millisecond)
	defer cancel()
	start := time.Now()
	if err := probe(tctx, hang.URL+"/healthz"); err == nil {
		t.Error("hung server: no error")
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("hung server: probe took %v", d)
	}
}

// TestHealthcheckFindsPortInConfig: with no --url, the port comes from
// the config's listen address, probed over loopback.
func TestHealthcheckFindsPortInConfig(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/healthz" {
			http.NotFound(w, r)
		}
	}))
	defer srv.Close()
	_, port, _ := net.SplitHostPort(srv.Listener.Addr().String())
	path := filepath.Join(t.TempDir(), "gatehouse.yaml")
	cfg := "listen: 0.0.0.0:" + port + "\nproviders: [{name: demo, type: mock}]\nmodels: [{name: m, targets: [{provider: demo, model: gpt-4o-mini}]}]\n"
	if err := os.WriteFile(path, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	c := &healthcheckCmd{Config: path, Timeout: 3 * time.Second}
	var out strings.Builder
	if err := c.run(&out); err != nil {
		t.Errorf("healthcheck against %s: %v", srv.URL, err)
	}
	if want := "healthy: http://127.0.0.1:" + port + "/healthz\n"; out.String() != want {
		t.Errorf("healthcheck printed %q, want %q", out.String(), want)
	}
	srv.Close()
	if err := c.run(io.Discard); err == nil {
		t.Error("healthcheck after the server closed: no error")
	}
	if err := os.WriteFile(path, []byte("listen: nonsense\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := c.run(io.Discard); err == nil {
		t.Error("healthcheck with an invalid config: no error")
	}
}

// TestProcessHealthcheck runs the subcommand as the container does: exit
// 0 against a running gateway, 1 once it has stopped.
func TestProcessHealthcheck(t *testing.T) {
	p, _ := startProcess(t, "listen: 127.0.0.1:0\nproviders: [{name: demo, type: mock}]\nmodels: [{name: m, targets: [{provider: demo, model: gpt-4o-mini}]}]\n")
	url := "--url=http://" + p.addr + "/healthz"
	if out, err := exec.Command(gatehouseBinary(t), "healthcheck", url).CombinedOutput(); err != nil {
		t.Fatalf("healthcheck of a running gateway: %v\n%s", err, out)
	}
	_ = p.cmd.Process.Kill()
	<-p.done
	out, err := exec.Command(gatehouseBinary(t), "healthcheck", url).CombinedOutput()
	var exit *exec.ExitError
	if !errors.As(err, &exit) || exit.ExitCode() != 1 {
		t.Fatalf("healthcheck of a stopped gateway: %v, want exit status 1\n%s", err, out)
	}
}
