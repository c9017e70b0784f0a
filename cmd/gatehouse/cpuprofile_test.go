package main

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"gatehouse/internal/mockllm"
)

// gzipMagic starts every profile pprof writes (it is gzipped protobuf).
var gzipMagic = []byte{0x1f, 0x8b}

func TestStartCPUProfile(t *testing.T) {
	if _, err := startCPUProfile(filepath.Join(t.TempDir(), "missing", "cpu.pprof")); err == nil ||
		!strings.Contains(err.Error(), "--cpuprofile") {
		t.Fatalf("startCPUProfile in a missing directory: err = %v, want a --cpuprofile error", err)
	}
	path := filepath.Join(t.TempDir(), "cpu.pprof")
	stop, err := startCPUProfile(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(path)
	if err != nil || !bytes.HasPrefix(b, gzipMagic) {
		t.Fatalf("profile = %d bytes %x…, %v; want a gzipped profile", len(b), b[:min(len(b), 4)], err)
	}
	// Stopped means stopped: a second profile can start.
	stop, err = startCPUProfile(path)
	if err != nil {
		t.Fatalf("second profile: %v", err)
	}
	_ = stop()
}

// The flag on the real process: refused at once when the file cannot be
// created, written in full when the gateway shuts down.
func TestProcessCPUProfile(t *testing.T) {
	up := startUpstream(t, mockllm.Options{})
	dir := t.TempDir()
	cfg := filepath.Join(dir, "gatehouse.yaml")
	if err := os.WriteFile(cfg, []byte(withTestStorage(baseConfig(up, ""), dir)), 0o600); err != nil {
		t.Fatal(err)
	}

	out, err := exec.Command(gatehouseBinary(t), "serve", "--config", cfg, "--cpuprofile", filepath.Join(dir, "missing", "cpu.pprof")).CombinedOutput()
	if err == nil || !strings.Contains(string(out), "--cpuprofile") {
		t.Fatalf("serve with an uncreatable profile: err = %v, output %q; want exit 1 naming --cpuprofile", err, out)
	}

	prof := filepath.Join(dir, "cpu.pprof")
	cmd := exec.Command(gatehouseBinary(t), "serve", "--config", cfg, "--cpuprofile", prof)
	logs := &syncBuffer{}
	cmd.Stdout, cmd.Stderr = logs, logs
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill() })
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	waitFor(t, 30*time.Second, "the gateway to listen", func() bool { return strings.Contains(logs.String(), "gatehouse listening on ") })
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("exit: %v (logs: %s)", err, logs.String())
		}
	case <-time.After(10 * time.Second):
		t.Fatal("no exit after SIGTERM")
	}
	b, err := os.ReadFile(prof)
	if err != nil || len(b) < 64 || !bytes.HasPrefix(b, gzipMagic) {
		t.Fatalf("profile after shutdown = %d bytes, %v; want a gzipped profile", len(b), err)
	}
}
