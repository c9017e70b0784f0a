package route

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

const llamaMetrics = `# HELP llamacpp:prompt_tokens_total Number of prompt tokens processed.
# TYPE llamacpp:prompt_tokens_total counter
llamacpp:prompt_tokens_total 1234
# HELP llamacpp:kv_cache_usage_ratio KV-cache usage. 1 means 100 percent usage.
# TYPE llamacpp:kv_cache_usage_ratio gauge
llamacpp:kv_cache_usage_ratio 0.25
# TYPE llamacpp:requests_processing gauge
llamacpp:requests_processing 2
# TYPE llamacpp:requests_deferred gauge
llamacpp:requests_deferred 3
`

const vllmMetrics = `# TYPE vllm:num_requests_running gauge
vllm:num_requests_running{engine="0",model_name="qwen"} 4.0
vllm:num_requests_running{engine="1",model_name="qwen"} 1.0
vllm:num_requests_waiting{engine="0",model_name="qwen"} 7.0
vllm:gpu_cache_usage_perc{engine="0",model_name="a{b}"} 0.5
vllm:num_requests_waiting_by_reason{reason="capacity"} 99
`

func TestParseLoad(t *testing.T) {
	r, w, kv, _ := LoadMetrics("llama.cpp")
	l, err := ParseLoad(strings.NewReader(llamaMetrics), r, w, kv)
	if err != nil || l != (Load{Running: 2, Waiting: 3, KVCache: 0.25}) {
		t.Fatalf("llama.cpp: %+v %v", l, err)
	}
	r, w, kv, _ = LoadMetrics("vllm")
	l, err = ParseLoad(strings.NewReader(vllmMetrics), r, w, kv)
	if err != nil || l != (Load{Running: 5, Waiting: 7, KVCache: 0.5}) {
		t.Fatalf("vllm: %+v %v", l, err)
	}
	if _, _, _, ok := LoadMetrics("tgi"); ok {
		t.Fatal("unknown kind accepted")
	}
}

func TestMetricsPollerAndStaleness(t *testing.T) {
	var body atomic.Value
	body.Store(llamaMetrics)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = w.Write([]byte(body.Load().(string)))
	}))
	defer srv.Close()
	r, w, kv, _ := LoadMetrics("llamacpp")
	now := time.Unix(1_800_000_000, 0)
	p := &MetricsPoller{URL: srv.URL, Interval: time.Second, Running: r, Waiting: w, KVCache: kv,
		now: func() time.Time { return now }}
	if _, ok := p.Load(); ok {
		t.Fatal("load before any poll")
	}
	ctx := context.Background()
	if err := p.Poll(ctx); err != nil {
		t.Fatal(err)
	}
	if l, ok := p.Load(); !ok || l.Waiting != 3 {
		t.Fatalf("first reading %+v %v", l, ok)
	}
	body.Store(strings.Replace(llamaMetrics, "requests_deferred 3", "requests_deferred 9", 1))
	now = now.Add(2 * time.Second)
	if err := p.Poll(ctx); err != nil {
		t.Fatal(err)
	}
	if l, ok := p.Load(); !ok || l.Waiting != 9 {
		t.Fatalf("refreshed reading %+v %v", l, ok)
	}
	now = now.Add(3 * time.Second) // three intervals: still served
	if _, ok := p.Load(); !ok {
		t.Fatal("a reading three intervals old is no longer served")
	}
	now = now.Add(time.Nanosecond)
	if _, ok := p.Load(); ok {
		t.Fatal("a stale reading is still served")
	}
}

// TestMetricsPollerRunPollsUntilCancelled waits on the server seeing the
// polls, not on a clock.
func TestMetricsPollerRunPollsUntilCancelled(t *testing.T) {
	polled := make(chan struct{}, 16)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = w.Write([]byte(llamaMetrics))
		select {
		case polled <- struct{}{}:
		default:
		}
	}))
	defer srv.Close()
	r, w, kv, _ := LoadMetrics("llamacpp")
	fixed := time.Unix(1_800_000_000, 0) // readings never age: only the polling is under test
	p := &MetricsPoller{URL: srv.URL, Interval: time.Millisecond, Running: r, Waiting: w, KVCache: kv,
		now: func() time.Time { return fixed }, timeout: 30 * time.Second}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { p.Run(ctx); close(done) }()
	<-polled // the first poll, at once
	<-polled // and again on the ticker
	cancel()
	<-done // Run returns when its context ends
	if l, ok := p.Load(); !ok || l.Waiting != 3 {
		t.Fatalf("reading %+v %v", l, ok)
	}
}

func TestHealthCheckTakesProviderOutAndBack(t *testing.T) {
	var healthy atomic.Bool
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !healthy.Load() {
			w.WriteHeader(http.StatusServiceUnavailable)
		}
	}))
	defer srv.Close()
	pool := NewPool(PoolOptions{})
	g := pool.Group(Spec{Name: "m", Targets: targets(2)})
	var changes []bool
	h := &HealthCheck{Pool: pool, Provider: "a", URL: srv.URL, OnChange: func(down bool, _ error) { changes = append(changes, down) }}
	ctx := context.Background()
	h.Check(ctx)
	if g.Members()[0].Down() {
		t.Fatal("down after a single failed check")
	}
	h.Check(ctx)
	if !g.Members()[0].Down() || pickOnce(t, g, Success) != "b" {
		t.Fatal("failing deployment still selected")
	}
	healthy.Store(true)
	h.Check(ctx)
	if g.Members()[0].Down() || pickOnce(t, g, Success) != "a" {
		t.Fatal("recovered deployment not selected")
	}
	if len(changes) != 2 || !changes[0] || changes[1] {
		t.Fatalf("changes %v", changes)
	}
}
