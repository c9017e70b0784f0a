package main

import (
	"bytes"
	"context"
	"log/slog"
	"net"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"

	"gatehouse/internal/config"
	"gatehouse/internal/mockllm"
)

// syncBuffer collects log output written from many goroutines.
type syncBuffer struct {
	mu      sync.Mutex
	buf     bytes.Buffer
	discard bool // benchmarks: encode every line, keep none
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.discard {
		return len(p), nil
	}
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// upstream is a mockllm emulator on a real loopback port.
type upstream struct {
	mock *mockllm.Server
	URL  string
}

const upstreamKey = "sk-upstream-secret"

// upProvider is the providers entry "up": an OpenAI-compatible provider
// on up, with its key.
func upProvider(up *upstream) string {
	return "  - {name: up, type: openai-compatible, base_url: " + up.URL + "/v1, api_key: " + upstreamKey + "}\n"
}

func startUpstream(t testing.TB, o mockllm.Options) *upstream {
	t.Helper()
	o.APIKey = upstreamKey
	m := mockllm.New(o)
	srv := httptest.NewServer(m)
	t.Cleanup(srv.Close)
	return &upstream{mock: m, URL: srv.URL}
}

// testGateway is a gatehouse serving a config file over real loopback HTTP,
// wired exactly as `gatehouse serve` wires it.
type testGateway struct {
	URL  string
	Path string // the config file, for reload tests
	Logs *syncBuffer
	gw   *gateway // the gateway itself, for benchmarks that pace its writers
}

const clientKey = "gh-test-client-key"

// baseConfig is a config with one upstream, one chat model and one
// embedding model; extra is appended verbatim: more entries of the models
// list, or top-level sections.
func baseConfig(up *upstream, extra string) string {
	return `listen: 127.0.0.1:0
providers:
  - name: up
    type: openai-compatible
    base_url: ` + up.URL + `/v1
    api_key: ` + upstreamKey + `
keys:
  - {key: ` + clientKey + `, name: tester, project: qa}
models:
  - name: chat
    targets: [{provider: up, model: gpt-4o-mini}]
  - name: embed
    targets: [{provider: up, model: text-embedding-3-small}]
` + extra
}

func startGateway(t testing.TB, yaml string) *testGateway {
	t.Helper()
	return startGatewayMode(t, yaml, false)
}

// startGatewayMode is startGateway, as a bare proxy (gatehouse serve
// --bare) when bare is set.
func startGatewayMode(t testing.TB, yaml string, bare bool) *testGateway {
	t.Helper()
	return startPacedGateway(t, yaml, bare, pacing{})
}

// startPacedGateway is startGatewayMode with the gateway's background
// writers paced by p.
func startPacedGateway(t testing.TB, yaml string, bare bool, p pacing) *testGateway {
	t.Helper()
	dir := t.TempDir()
	path := filepath.Join(dir, "gatehouse.yaml")
	if err := os.WriteFile(path, []byte(withTestStorage(yaml, dir)), 0o600); err != nil {
		t.Fatal(err)
	}
	gw, _ := launchPacedGateway(t, path, bare, nil, p)
	return gw
}

// launchGateway serves the config file at path over real loopback HTTP,
// wired exactly as `gatehouse serve` wires it, until stop (or the test's
// end).
func launchGateway(t testing.TB, path string, bare bool) (gw *testGateway, stop func()) {
	t.Helper()
	return launchGatewayOn(t, path, bare, nil)
}

// launchGatewayOn is launchGateway with the listener wrapped by wrap (a
// TLS listener, say: the URL is then https) unless wrap is nil.
func launchGatewayOn(t testing.TB, path string, bare bool, wrap func(net.Listener) net.Listener) (gw *testGateway, stop func()) {
	t.Helper()
	return launchPacedGateway(t, path, bare, wrap, pacing{})
}

// launchPacedGateway is launchGatewayOn with the gateway's background
// writers paced by p.
func launchPacedGateway(t testing.TB, path string, bare bool, wrap func(net.Listener) net.Listener, p pacing) (gw *testGateway, stop func()) {
	t.Helper()
	if e := os.Getenv("GATEHOUSE_TEST_HTTP1_ENGINE"); e != "" {
		useEngine(t, path, e)
	}
	types := providerTypes()
	cfg, err := config.Load(path, types)
	if err != nil {
		t.Fatalf("config: %v", err)
	}
	if e := os.Getenv("GATEHOUSE_TEST_HTTP1_ENGINE"); e != "" && cfg.Server.HTTP1Engine != e {
		t.Fatalf("GATEHOUSE_TEST_HTTP1_ENGINE=%s, but the config says server.http1_engine: %s", e, cfg.Server.HTTP1Engine)
	}
	logs := &syncBuffer{}
	level := slog.LevelDebug
	if _, ok := t.(*testing.B); ok {
		// As in production: info lines (one per request), none kept.
		logs.discard, level = true, slog.LevelInfo
	}
	log := slog.New(slog.NewJSONHandler(logs, &slog.HandlerOptions{Level: level}))
	g, err := newPacedGateway(path, cfg, types, bare, log, logs, p)
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	scheme := "http://"
	if cfg.Server.TLS != nil {
		scheme = "https://"
	}
	if wrap != nil {
		ln, scheme = wrap(ln), "https://"
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- g.run(ctx, ln, cfg) }()
	var once sync.Once
	stop = func() {
		once.Do(func() {
			cancel()
			select {
			case err := <-done:
				if err != nil {
					t.Errorf("gateway exited with %v", err)
				}
			case <-time.After(10 * time.Second):
				t.Error("gateway did not stop")
			}
		})
	}
	t.Cleanup(stop)
	return &testGateway{URL: scheme + ln.Addr().String(), Path: path, Logs: logs, gw: g}, stop
}

func (g *testGateway) client(opts ...option.RequestOption) openai.Client {
	base := []option.RequestOption{
		option.WithBaseURL(g.URL + "/v1/"),
		option.WithAPIKey(clientKey),
		option.WithMaxRetries(0),
	}
	return openai.NewClient(append(base, opts...)...)
}

// waitFor polls cond until it holds or the deadline passes.
func waitFor(t *testing.T, d time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for time.Now().Before(deadline) {
		if cond() {
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Fatalf("timed out after %v waiting for %s", d, what)
}

// logLine returns the request log line for a request id.
func (g *testGateway) logLine(t *testing.T, requestID string) string {
	t.Helper()
	var line string
	waitFor(t, 30*time.Second, "log line of "+requestID, func() bool {
		for _, l := range strings.Split(g.Logs.String(), "\n") {
			if strings.Contains(l, `"request_id":"`+requestID+`"`) {
				line = l
				return true
			}
		}
		return false
	})
	return line
}

// useEngine sets server.http1_engine to engine in the config file at
// path, unless the file sets it: GATEHOUSE_TEST_HTTP1_ENGINE=gatehouse
// runs the end-to-end tests on the gateway's own HTTP/1.x engine
// (make test runs a set of them so).
func useEngine(t testing.TB, path, engine string) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	y := string(b)
	if strings.Contains(y, "http1_engine:") {
		return
	}
	lines := strings.Split(y, "\n")
	found := false
	for i, l := range lines {
		rest, ok := strings.CutPrefix(l, "server:")
		if !ok {
			continue
		}
		found = true
		if flow, ok := strings.CutPrefix(strings.TrimSpace(rest), "{"); ok {
			lines[i] = "server: {http1_engine: " + engine + ", " + flow
			break
		}
		indent := "  "
		if i+1 < len(lines) {
			indent = lines[i+1][:len(lines[i+1])-len(strings.TrimLeft(lines[i+1], " "))]
		}
		lines = slices.Insert(lines, i+1, indent+"http1_engine: "+engine)
		break
	}
	y = strings.Join(lines, "\n")
	if !found {
		y += "\nserver: {http1_engine: " + engine + "}\n"
	}
	if err := os.WriteFile(path, []byte(y), 0o600); err != nil {
		t.Fatal(err)
	}
}

// withTestStorage keeps a test gateway's SQLite file and usage spill
// directory in its own temporary directory (the defaults, under ./data,
// would land in the source tree) unless the config names them.
func withTestStorage(yaml, dir string) string {
	if !strings.Contains(yaml, "\nusage:") && !strings.HasPrefix(yaml, "usage:") {
		yaml += "\nusage: {spill_dir: " + filepath.Join(dir, "spill") + "}\n"
	}
	if strings.Contains(yaml, "\nstorage:") || strings.HasPrefix(yaml, "storage:") {
		return yaml
	}
	return yaml + "\nstorage: {sqlite: " + filepath.Join(dir, "data", "gatehouse.db") + "}\n"
}
