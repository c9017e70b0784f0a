package main

import (
	"bufio"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"gatehouse/internal/mockllm"
)

// commandBuild is a build of the gatehouse command made once per test
// run, however many tests ask for it.
type commandBuild struct {
	once sync.Once
	path string
	err  error
}

// binary builds the command with the go build flags given, the first
// time it is asked; what the build failed with fails every test that
// asks.
func (b *commandBuild) binary(t *testing.T, what string, flags ...string) string {
	t.Helper()
	b.once.Do(func() {
		dir, err := os.MkdirTemp("", "gatehouse-bin")
		if err != nil {
			b.err = err
			return
		}
		b.path = filepath.Join(dir, "gatehouse")
		args := append(append([]string{"build"}, flags...), "-o", b.path, ".")
		if out, err := exec.Command("go", args...).CombinedOutput(); err != nil {
			b.err = fmt.Errorf("%w: %s", err, out)
		}
	})
	if b.err != nil {
		t.Fatalf("build %s: %v", what, b.err)
	}
	return b.path
}

var plainBuild commandBuild

// gatehouseBinary builds the real command once per test run, so signal
// handling is tested on the process users run.
func gatehouseBinary(t *testing.T) string {
	t.Helper()
	return plainBuild.binary(t, "gatehouse")
}

// process is a gatehouse child process.
type process struct {
	cmd  *exec.Cmd
	addr string
	logs *syncBuffer
	done chan error
}

func startProcess(t *testing.T, yaml string) (*process, string) {
	t.Helper()
	return startProcessWith(t, gatehouseBinary(t), yaml, nil)
}

// startProcessWith is startProcess running the binary bin, with env added
// to the test's own environment.
func startProcessWith(t *testing.T, bin, yaml string, env []string) (*process, string) {
	t.Helper()
	dir := t.TempDir()
	path := filepath.Join(dir, "gatehouse.yaml")
	yaml = withTestStorage(yaml, dir)
	if err := os.WriteFile(path, []byte(yaml), 0o600); err != nil {
		t.Fatal(err)
	}
	if e := os.Getenv("GATEHOUSE_TEST_HTTP1_ENGINE"); e != "" {
		useEngine(t, path, e)
	}
	cmd := exec.Command(bin, "serve", "--config", path)
	if env != nil {
		cmd.Env = append(os.Environ(), env...)
	}
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	p := &process{cmd: cmd, logs: &syncBuffer{}, done: make(chan error, 1)}
	addr := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			line := sc.Text()
			p.logs.Write([]byte(line + "\n"))
			if a, ok := strings.CutPrefix(line, "gatehouse listening on "); ok {
				addr <- a
			}
		}
		p.done <- cmd.Wait()
	}()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
	})
	select {
	case p.addr = <-addr:
	case <-time.After(15 * time.Second):
		t.Fatalf("gatehouse did not start: %s", p.logs.String())
	}
	return p, path
}

func TestProcessGracefulShutdownFinishesStreams(t *testing.T) {
	up := startUpstream(t, mockllm.Options{})
	p, _ := startProcess(t, baseConfig(up, "server: {shutdown_grace: 10s}\n"))

	req, _ := http.NewRequest(http.MethodPost, "http://"+p.addr+"/v1/chat/completions", strings.NewReader(
		`{"model":"chat","stream":true,"messages":[{"role":"user","content":"long @mock(chunks=6, tps=12)"}]}`))
	req.Header.Set("Authorization", "Bearer "+clientKey)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	br := bufio.NewReader(resp.Body)
	if _, err := br.ReadString('\n'); err != nil { // the first event is here: the stream is in flight
		t.Fatal(err)
	}
	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	rest, err := io.ReadAll(br)
	if err != nil {
		t.Fatalf("stream cut by shutdown: %v", err)
	}
	if !strings.HasSuffix(string(rest), "data: [DONE]\n\n") {
		t.Fatalf("stream did not finish: %q", rest)
	}
	select {
	case err := <-p.done:
		if err != nil {
			t.Fatalf("exit: %v (logs: %s)", err, p.logs.String())
		}
	case <-time.After(10 * time.Second):
		t.Fatal("process did not exit after its streams finished")
	}
	if _, err := http.Get("http://" + p.addr + "/healthz"); err == nil {
		t.Fatal("still accepting connections after shutdown")
	}
}

func TestProcessSIGHUPReloads(t *testing.T) {
	up := startUpstream(t, mockllm.Options{})
	p, path := startProcess(t, baseConfig(up, ""))
	// Write a new config in place without waiting for the watcher, then
	// ask for the reload explicitly.
	next := baseConfig(up, "  - name: via-sighup\n    targets: [{provider: up, model: gpt-4o}]\n")
	if err := os.WriteFile(path, []byte(next), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := p.cmd.Process.Signal(syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 30*time.Second, "the reload", func() bool {
		req, _ := http.NewRequest(http.MethodGet, "http://"+p.addr+"/v1/models/via-sighup", nil)
		req.Header.Set("Authorization", "Bearer "+clientKey)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	})
	// The log is written off the request path, a moment later.
	waitFor(t, 30*time.Second, "the SIGHUP log line", func() bool { return strings.Contains(p.logs.String(), "SIGHUP") })
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case err := <-p.done:
		if err != nil {
			t.Fatalf("exit: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("no exit after SIGTERM")
	}
}
