package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"gatehouse/bench/internal/proc"
)

const (
	adminKey   = "soak-admin-key-0123456789"
	mainKey    = "sk-soak-main"
	limitedKey = "sk-soak-limited"
	model      = "soak"
	// settleWait bounds the wait for the gateway to go back to rest once
	// the load stops: Go forces a garbage collection every two minutes,
	// and the heap is read after one that ran while idle.
	settleWait = 150 * time.Second
)

// run starts mockllm and gatehouse, drives the warm-up, reads the
// baseline, drives the load with reloads, reads the gateway again at rest
// and checks the usage records.
func run(ctx context.Context, o options) (*report, error) {
	g, err := proc.NewGroup("gatehouse-soak-")
	if err != nil {
		return nil, err
	}
	defer g.Close(o.Keep, "soak")
	// Streams of 20 chunks at 400 tokens a second last about 50 ms.
	mock, err := g.Start("mockllm", o.Mockllm, "-listen", "127.0.0.1:0", "-chunks", "20", "-tps", "400", "-record-limit", "-1")
	if err != nil {
		return nil, err
	}
	mockAddr, err := mock.WaitListening(ctx, 10*time.Second)
	if err != nil {
		return nil, err
	}
	addrs, err := proc.FreePorts(1)
	if err != nil {
		return nil, err
	}
	cfg := gatewayConfig{listen: addrs[0], mockAddr: mockAddr, sqlite: filepath.Join(g.Dir, "soak.db")}
	cfgPath := filepath.Join(g.Dir, "gatehouse.yaml")
	if err := os.WriteFile(cfgPath, []byte(cfg.yaml()), 0o600); err != nil {
		return nil, err
	}
	gw, err := g.Start("gatehouse", o.Gatehouse, "serve", "--config", cfgPath)
	if err != nil {
		return nil, err
	}
	base := "http://" + addrs[0]
	if err := gw.WaitReady(ctx, base+"/readyz", 30*time.Second); err != nil {
		return nil, err
	}
	rep := &report{opts: o, start: time.Now().UTC()}
	gauges := gaugeReader{url: base + "/metrics", pid: gw.Pid()}
	d := newDriver(base, o.rate)

	d.run(ctx, o.warmup)
	if rep.baseline, err = atRest(ctx, d, gauges, gauges.zero()); err != nil {
		return rep, fmt.Errorf("baseline: %w", err)
	}

	loadCtx, stopLoad := context.WithTimeout(ctx, o.duration)
	defer stopLoad()
	reloads := make(chan int, 1)
	go func() { reloads <- reloadEvery(loadCtx, o.reload, cfgPath, cfg, gw.Pid()) }()
	samples := make(chan []sample, 1)
	go func() { samples <- gauges.every(loadCtx, o.sample) }()
	d.run(loadCtx, o.duration)
	stopLoad()
	rep.reloadsSent = <-reloads
	rep.samples = <-samples
	if ctx.Err() != nil {
		return rep, ctx.Err()
	}
	if rep.final, err = atRest(ctx, d, gauges, rep.baseline); err != nil {
		return rep, fmt.Errorf("at rest after the load: %w", err)
	}
	rep.reloadsDone = countLines(filepath.Join(g.Dir, "gatehouse.log"), `"config reloaded"`)
	rep.outcomes = d.outcomes()
	rep.failovers = d.failovers.Load()
	rep.records, err = checkRecords(ctx, base, adminKey, rep.start, d.sent(), d.maybe())
	return rep, err
}

// atRest waits until the gateway has nothing left to do — the client's
// idle connections closed, goroutines back near the baseline's, a garbage
// collection run since the load stopped — and reads its gauges then.
// The baseline itself is read the same way after the warm-up.
func atRest(ctx context.Context, d *driver, gauges gaugeReader, baseline sample) (sample, error) {
	d.client.CloseIdleConnections()
	start, err := gauges.read()
	if err != nil {
		return sample{}, err
	}
	deadline := time.Now().Add(settleWait)
	for {
		s, err := gauges.read()
		if err != nil {
			return s, err
		}
		rested := s.gcCycles > start.gcCycles && (baseline.goroutines == 0 || s.goroutines <= baseline.goroutines+goroutineSlack)
		if rested || time.Now().After(deadline) {
			return s, nil
		}
		select {
		case <-ctx.Done():
			return s, ctx.Err()
		case <-time.After(time.Second):
		}
	}
}

// reloadEvery rewrites the config with the limited key's rpm changed and
// sends SIGHUP, every interval until ctx ends; it returns how many
// reloads it asked for.
func reloadEvery(ctx context.Context, every time.Duration, path string, cfg gatewayConfig, pid int) int {
	t := time.NewTicker(every)
	defer t.Stop()
	n := 0
	for {
		select {
		case <-ctx.Done():
			return n
		case <-t.C:
		}
		n++
		cfg.generation = n
		if os.WriteFile(path, []byte(cfg.yaml()), 0o600) == nil && syscall.Kill(pid, syscall.SIGHUP) != nil {
			return n - 1
		}
	}
}

// countLines counts the lines of a file that contain text.
func countLines(path, text string) int {
	b, err := os.ReadFile(path)
	if err != nil {
		return -1
	}
	return strings.Count(string(b), text)
}

// gatewayConfig is the soak's gatehouse config: a model whose first target
// fails a fifth of its calls (mockllm's X-Mock-* headers, sent as the
// provider's extra headers) so that requests fail over to the second; a
// key without limits and one whose rpm refuses most of its requests; the
// admin key to read the records with. Each reload moves the limited key's
// rpm between 1 and 2, so a reload changes what the gateway enforces.
type gatewayConfig struct {
	listen, mockAddr, sqlite string
	generation               int
}

func (c gatewayConfig) yaml() string {
	return fmt.Sprintf(`# Generated by bench/cmd/soak; generation %d.
listen: %s
admin_key: %s
storage: {sqlite: %s}
log: {level: info}
providers:
  - name: flaky
    type: openai-compatible
    base_url: http://%s/v1
    api_key: sk-mock
    headers: {X-Mock-Error-Status: "503", X-Mock-Error-Rate: "0.2"}
  - {name: steady, type: openai-compatible, base_url: http://%s/v1, api_key: sk-mock}
breaker: {failures: 0, error_rate: 0}
models:
  - name: %s
    strategy: failover
    targets: [{provider: flaky, model: gpt-4o-mini}, {provider: steady, model: gpt-4o-mini}]
keys:
  - {key: %s, project: soak}
  - {key: %s, project: soak, rpm: %d}
`, c.generation, c.listen, adminKey, c.sqlite, c.mockAddr, c.mockAddr, model, mainKey, limitedKey, 1+c.generation%2)
}
