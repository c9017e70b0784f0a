//go:build realinference

package main

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// Real inference: llama.cpp's llama-server running SmolLM2-135M on
// loopback, behind an in-process gatehouse. These files compile only with
// -tags realinference (make test-real), which also builds the server and
// fetches the model; plain `go test ./...` never sees them.

// llamaServer is one llama-server child process.
type llamaServer struct {
	Name string // the gatehouse provider it is configured as
	URL  string // http://127.0.0.1:port, the server root
	log  string // its stdout and stderr
	cmd  *exec.Cmd
	done chan struct{} // closed when the process has exited
}

const (
	llamaReadyTimeout = 60 * time.Second
	llamaSlots        = 2 // --parallel: requests one server generates at once
)

// llamaPaths returns the server binary and the model, failing the test
// when the environment does not name them: this suite exists to run
// against a real server, so it never skips.
func llamaPaths(t *testing.T) (bin, model string) {
	t.Helper()
	bin, model = os.Getenv("GATEHOUSE_LLAMA_SERVER"), os.Getenv("GATEHOUSE_LLAMA_MODEL")
	if bin == "" || model == "" {
		t.Fatal("GATEHOUSE_LLAMA_SERVER and GATEHOUSE_LLAMA_MODEL are not set: run `make test-real`, " +
			"or eval \"$(scripts/llama-server build)\" first")
	}
	for _, p := range []string{bin, model} {
		if _, err := os.Stat(p); err != nil {
			t.Fatalf("%v: run `make test-real`, which builds it", err)
		}
	}
	return bin, model
}

// startLlamaServers starts one llama-server per name, each on its own free
// loopback port, and returns once every one answers /health with 200.
// They are stopped when the test ends.
func startLlamaServers(t *testing.T, names ...string) []*llamaServer {
	t.Helper()
	bin, model := llamaPaths(t)
	servers := make([]*llamaServer, len(names))
	errs := make([]error, len(names))
	var wg sync.WaitGroup
	for i, name := range names {
		wg.Go(func() { servers[i], errs[i] = launchLlama(t, bin, model, name) })
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		t.Fatal(err)
	}
	return servers
}

// launchLlama starts one server and waits until it is ready, trying
// another port when the one it picked was taken in the meantime.
func launchLlama(t *testing.T, bin, model, name string) (*llamaServer, error) {
	var err error
	for try := range 3 {
		var port int
		if port, err = freePort(); err != nil {
			return nil, err
		}
		s := &llamaServer{Name: name, URL: "http://127.0.0.1:" + strconv.Itoa(port),
			log: filepath.Join(t.TempDir(), fmt.Sprintf("llama-%s-%d.log", name, try)), done: make(chan struct{})}
		if err = s.start(t, bin, model, port); err != nil {
			return nil, err
		}
		err = s.waitReady(llamaReadyTimeout)
		if err == nil {
			t.Logf("llama-server %s on %s (log %s)", name, s.URL, s.log)
			return s, nil
		}
		s.stop()
		if !strings.Contains(s.tail(20), "bind") {
			return nil, fmt.Errorf("llama-server %s: %w\n%s", name, err, s.tail(30))
		}
	}
	return nil, fmt.Errorf("llama-server %s: no free port after 3 tries: %w", name, err)
}

func freePort() (int, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port, nil
}

func (s *llamaServer) start(t *testing.T, bin, model string, port int) error {
	f, err := os.Create(s.log)
	if err != nil {
		return err
	}
	// One thread each: two servers share this suite's two cores, and
	// SmolLM2-135M still generates ~80 tokens/s per slot on one.
	// --pooling mean: llama-server refuses /v1/embeddings for a chat
	// model's default pooling ("none").
	s.cmd = exec.Command(bin, "-m", model, "--host", "127.0.0.1", "--port", strconv.Itoa(port),
		"--parallel", strconv.Itoa(llamaSlots), "-c", "4096", "--threads", "1",
		"--metrics", "--embeddings", "--pooling", "mean", "--offline")
	s.cmd.Stdout, s.cmd.Stderr = f, f
	if err := s.cmd.Start(); err != nil {
		f.Close()
		return fmt.Errorf("start llama-server: %w", err)
	}
	go func() {
		_ = s.cmd.Wait()
		f.Close()
		close(s.done)
	}()
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("llama-server %s, last lines of %s:\n%s", s.Name, s.log, s.tail(30))
		}
		s.stop()
	})
	return nil
}

// waitReady polls /health until it answers 200 (503 while the model loads).
func (s *llamaServer) waitReady(timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	c := &http.Client{Timeout: time.Second}
	for time.Now().Before(deadline) {
		select {
		case <-s.done:
			return errors.New("exited before it was ready")
		default:
		}
		if resp, err := c.Get(s.URL + "/health"); err == nil {
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
		}
		time.Sleep(100 * time.Millisecond)
	}
	return fmt.Errorf("/health not 200 after %v", timeout)
}

// stop sends SIGTERM and, if the server has not exited 5 s later, kills
// it. Safe to call twice.
func (s *llamaServer) stop() {
	select {
	case <-s.done:
		return
	default:
	}
	_ = s.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-s.done:
	case <-time.After(5 * time.Second):
		_ = s.cmd.Process.Kill()
		<-s.done
	}
}

// tail returns the last n lines of the server's log.
func (s *llamaServer) tail(n int) string {
	b, _ := os.ReadFile(s.log)
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	return strings.Join(lines[max(len(lines)-n, 0):], "\n")
}

// metrics reads the server's llamacpp:* Prometheus samples.
func (s *llamaServer) metrics(t *testing.T) map[string]float64 {
	t.Helper()
	resp, err := http.Get(s.URL + "/metrics")
	if err != nil {
		t.Fatalf("llama-server %s metrics: %v", s.Name, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("llama-server %s metrics: %d %s", s.Name, resp.StatusCode, b)
	}
	m := map[string]float64{}
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		name, value, ok := strings.Cut(sc.Text(), " ")
		if !ok || !strings.HasPrefix(name, "llamacpp:") {
			continue
		}
		if v, err := strconv.ParseFloat(strings.TrimSpace(value), 64); err == nil {
			m[strings.TrimPrefix(name, "llamacpp:")] = v
		}
	}
	return m
}

// processing is how many requests the server is generating for now.
func (s *llamaServer) processing(t *testing.T) float64 {
	return s.metrics(t)["requests_processing"]
}

// counters are the server's running totals of the tokens it processed.
// llama-server adds a request to them when the request ends.
type counters struct{ prompt, predicted int }

func (s *llamaServer) counters(t *testing.T) counters {
	m := s.metrics(t)
	// prompt_tokens_total excludes tokens reused from the prompt cache;
	// usage.prompt_tokens counts both.
	return counters{prompt: int(m["prompt_tokens_total"] + m["prompt_tokens_cached_total"]), predicted: int(m["tokens_predicted_total"])}
}

func (c counters) sub(d counters) counters {
	return counters{prompt: c.prompt - d.prompt, predicted: c.predicted - d.predicted}
}

// occupy fills the server's slots with long streams sent to it directly
// (not through gatehouse): load the gateway did not send and can learn of
// only from the server's metrics. release ends them.
func (s *llamaServer) occupy(t *testing.T, n int) (release func()) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	body := `{"model":"any","stream":true,"max_tokens":1500,"ignore_eos":true,` +
		`"messages":[{"role":"user","content":"Tell me a very long story about a lighthouse keeper."}]}`
	for range n {
		wg.Go(func() {
			req, _ := http.NewRequestWithContext(ctx, http.MethodPost, s.URL+"/v1/chat/completions", strings.NewReader(body))
			req.Header.Set("Content-Type", "application/json")
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				return
			}
			defer resp.Body.Close()
			_, _ = io.Copy(io.Discard, resp.Body)
		})
	}
	var once sync.Once
	release = func() { once.Do(func() { cancel(); wg.Wait() }) }
	t.Cleanup(release)
	return release
}

// realConfig puts the servers behind one least-tokens model "smol" (each
// server a local openai-compatible provider with its health check and
// llama.cpp load signal) and an embeddings model "smol-embed" on the first.
func realConfig(servers []*llamaServer) string {
	var b strings.Builder
	b.WriteString("listen: 127.0.0.1:0\nproviders:\n")
	for _, s := range servers {
		fmt.Fprintf(&b, `  - name: %s
    type: openai-compatible
    base_url: %s/v1
    local: true
    health_check: {path: /health, interval: 1s}
    load: {kind: llama.cpp, interval: %s}
`, s.Name, s.URL, loadInterval)
	}
	b.WriteString("keys:\n  - {key: " + clientKey + ", name: tester, project: qa}\n")
	b.WriteString("models:\n  - name: smol\n    strategy: least-tokens\n    targets:\n")
	for _, s := range servers {
		fmt.Fprintf(&b, "      - {provider: %s, model: smollm2-135m}\n", s.Name)
	}
	fmt.Fprintf(&b, "  - name: smol-embed\n    targets: [{provider: %s, model: smollm2-135m}]\n", servers[0].Name)
	return b.String()
}

// loadInterval is how often the gateway polls each server's metrics.
const loadInterval = 200 * time.Millisecond
