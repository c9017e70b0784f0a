package main

import (
	"context"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"gatehouse/internal/config"
	"gatehouse/internal/mockllm"
	"gatehouse/internal/provider"
)

func TestPrewarmPlan(t *testing.T) {
	three, zero := 3, 0
	client := &http.Client{}
	dialer := provider.NewDialer()
	tests := []struct {
		name    string
		base    string
		prewarm *int
		dialer  *provider.Dialer
		want    int // connections planned; 0 = none
	}{
		{"remote, default", "https://api.openai.com/v1", nil, dialer, provider.DefaultPrewarm},
		{"remote, off", "https://api.openai.com/v1", &zero, dialer, 0},
		{"remote, set", "http://10.0.0.7:8000/v1", &three, dialer, 3},
		{"loopback, default", "http://127.0.0.1:9090/v1", nil, dialer, 0},
		{"localhost, default", "http://localhost:11434", nil, dialer, 0},
		{"ipv6 loopback, default", "http://[::1]:8000/v1", nil, dialer, 0},
		{"loopback, set", "http://127.0.0.1:9090/v1", &three, dialer, 3},
		{"client of the adapter's own", "https://api.openai.com/v1", &three, nil, 0},
		{"not http", "", &three, dialer, 0},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			w := &prewarm{}
			w.add(&config.Provider{Name: "p", Prewarm: tc.prewarm}, provider.Deployment{BaseURL: tc.base, Client: client, Dialer: tc.dialer})
			got := 0
			if len(w.jobs) == 1 {
				got = w.jobs[0].n
			}
			if len(w.jobs) > 1 || got != tc.want {
				t.Fatalf("planned %+v, want %d connections", w.jobs, tc.want)
			}
		})
	}
}

// A generation's start opens the planned connections to a real server.
func TestPrewarmStartOpensConnections(t *testing.T) {
	var conns atomic.Int64
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}))
	srv.Config.ConnState = func(_ net.Conn, s http.ConnState) {
		if s == http.StateNew {
			conns.Add(1)
		}
	}
	srv.Start()
	defer srv.Close()
	d := provider.NewDialer()
	n := 2
	w := &prewarm{}
	w.add(&config.Provider{Name: "p", Prewarm: &n}, provider.Deployment{BaseURL: srv.URL + "/v1", Dialer: d,
		Client: &http.Client{Transport: provider.NewTransportWith(d)}})
	w.start(context.Background(), slog.New(slog.NewTextHandler(io.Discard, nil)))
	w.wg.Wait() // done, not cut short
	w.stop()
	if conns.Load() < 1 {
		t.Fatal("no connection was opened")
	}
}

// The whole gateway: with providers[].prewarm set, the upstream has
// connections from gatehouse before the first request, the first request
// rides one of them (no new connection), and a reload — whose new
// transports start empty — opens more before any request.
func TestUpstreamConnectionsPrewarmedAtStartAndReload(t *testing.T) {
	const n = 3
	var conns, chats atomic.Int64
	m := mockllm.New(mockllm.Options{APIKey: upstreamKey})
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodPost {
			chats.Add(1)
		}
		m.ServeHTTP(w, r)
	}))
	srv.Config.ConnState = func(_ net.Conn, s http.ConnState) {
		if s == http.StateNew {
			conns.Add(1)
		}
	}
	srv.Start()
	t.Cleanup(srv.Close)
	up := &upstream{mock: m, URL: srv.URL}
	cfg := strings.Replace(baseConfig(up, ""), "    api_key: "+upstreamKey+"\n",
		"    api_key: "+upstreamKey+"\n    prewarm: "+strconv.Itoa(n)+"\n", 1)
	if !strings.Contains(cfg, "prewarm: 3") {
		t.Fatalf("the config sets no prewarm:\n%s", cfg)
	}
	gw := startGateway(t, cfg)
	// Done when the pre-warm says so: its connections are then back in
	// the idle pool (a HEAD's connection goes back before its answer is
	// handed over), where the first request must find one.
	warmed := func() int {
		return strings.Count(gw.Logs.String(), `"msg":"upstream connections pre-warmed","provider":"up","wanted":3,"opened":3`)
	}

	// The n requests go out at once, each wanting a connection of its
	// own; on a busy machine one may finish before another starts and
	// lend it its connection, so at least one is what is certain.
	waitFor(t, 30*time.Second, "the pre-warm", func() bool { return warmed() == 1 })
	warm := conns.Load()
	if warm < 1 || warm > n {
		t.Fatalf("%d upstream connections before the first request, want 1 to %d pre-warmed", warm, n)
	}
	if c := chats.Load(); c != 0 {
		t.Fatalf("%d chat requests before the client sent any", c)
	}
	if o := chatOnce(context.Background(), gw.client(), "chat"); o.status != http.StatusOK {
		t.Fatalf("status %d: %s", o.status, o.msg)
	}
	if got := conns.Load(); got != warm {
		t.Fatalf("%d upstream connections after the first request, want the %d pre-warmed (it dialled its own)", got, warm)
	}

	replaceFile(t, gw.Path, cfg+"  - name: added-later\n    targets: [{provider: up, model: gpt-4o}]\n")
	waitFor(t, 30*time.Second, "the reload", func() bool { return strings.Contains(gw.Logs.String(), "config reloaded") })
	waitFor(t, 30*time.Second, "the reload's pre-warm", func() bool { return warmed() == 2 })
	if got := conns.Load(); got <= warm || got > warm+n {
		t.Fatalf("%d upstream connections after the reload's pre-warm, want %d more than the %d before", got, n, warm)
	}
	if c := chats.Load(); c != 1 {
		t.Fatalf("%d chat requests upstream, want the client's 1", c)
	}
}
