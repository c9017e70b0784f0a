package main

import (
	"context"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"

	"gatehouse/internal/config"
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
