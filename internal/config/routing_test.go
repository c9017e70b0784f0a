package config

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

const routingYAML = `providers:
  - {name: cloud, type: mock}
  - name: box
    type: openai-compatible
    base_url: http://10.0.0.7:8080/v1
    local: true
    health_check: {path: /health}
    load: {kind: llama.cpp, interval: 500ms}
routing: {mode: local_first}
retry: {max_attempts: 4, backoff: 50ms, retry_on: [404]}
breaker: {failures: 0, cooldown: 10s}
models:
  - name: small
    strategy: least-tokens
    targets: [{provider: box, model: qwen}, {provider: cloud, model: gpt-4o-mini}]
    fallbacks: [big]
    context_fallbacks: [big]
    max_context: 8192
    retry: {max_backoff: 1s}
  - name: big
    routing: {mode: cloud_only}
    targets: [{provider: cloud, model: gpt-4o}]
`

func TestRoutingConfig(t *testing.T) {
	cfg, err := Parse([]byte(routingYAML), "t.yaml", testTypes())
	if err != nil {
		t.Fatal(err)
	}
	box, _ := cfg.Provider("box")
	if diff := cmp.Diff(&HealthCheck{Path: "/health", Interval: DefaultHealthCheckInterval, Timeout: DefaultHealthCheckTimeout}, box.HealthCheck); diff != "" {
		t.Errorf("health check (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(&LoadSignal{Kind: "llama.cpp", Interval: Duration(500 * time.Millisecond)}, box.Load); diff != "" {
		t.Errorf("load (-want +got):\n%s", diff)
	}
	// An explicit 0 disables the consecutive-failure rule; the rest default.
	want := defaultBreaker()
	want.Failures, want.Cooldown = 0, secs(10)
	if diff := cmp.Diff(want, cfg.Breaker); diff != "" {
		t.Errorf("breaker (-want +got):\n%s", diff)
	}
	small, _ := cfg.Model("small")
	big, _ := cfg.Model("big")
	if diff := cmp.Diff(Retry{MaxAttempts: 4, Backoff: Duration(50 * time.Millisecond), MaxBackoff: secs(1), RetryOn: []int{404}},
		small.EffectiveRetry(cfg.Retry)); diff != "" {
		t.Errorf("retry (-want +got):\n%s", diff)
	}
	if small.EffectiveMode(cfg.Routing) != "local_first" || big.EffectiveMode(cfg.Routing) != "cloud_only" {
		t.Errorf("modes %s %s", small.EffectiveMode(cfg.Routing), big.EffectiveMode(cfg.Routing))
	}
	if small.MaxContext != 8192 || len(small.Fallbacks) != 1 || small.ContextFallbacks[0] != "big" {
		t.Errorf("small %+v", small)
	}
	if m := (&Model{}); m.EffectiveMode(Routing{}) != DefaultRoutingMode {
		t.Error("no mode anywhere should be any")
	}
}

func TestRoutingValidation(t *testing.T) {
	tests := []struct {
		name string
		yaml string
		want []problem
	}{
		{"unknown mode", "routing: {mode: local}\n", []problem{{1, 17, "routing.mode", `unknown routing mode "local"; want one of any, local_first`}}},
		{"retry values", "retry:\n  backoff: -1s\n  retry_on: [200, 404]\n", []problem{
			{2, 12, "retry.backoff", "must not be negative"},
			{3, 14, "retry.retry_on[0]", "200 is not an error status"}}},
		{"breaker ratio", "breaker: {error_rate: 1.5}\n", []problem{{1, 23, "breaker.error_rate", "between 0 and 1"}}},
		{"health check path", "providers:\n  - name: a\n    type: mock\n    health_check: {path: health, interval: 0s}\n", []problem{
			{4, 26, "providers[0].health_check.path", "must start with /"},
			{4, 44, "providers[0].health_check.interval", "greater than 0"}}},
		{"load kind", "providers:\n  - name: a\n    type: mock\n    load: {kind: tgi, url: nope}\n", []problem{
			{4, 18, "providers[0].load.kind", `unknown load signal kind "tgi"; want one of llama.cpp, vllm`},
			{4, 28, "providers[0].load.url", "absolute http"}}},
		{"fallbacks", p1 + "models:\n  - name: m\n    targets: [{provider: p, model: x}]\n    fallbacks: [m, nope]\n    context_fallbacks: [gone]\n", []problem{
			{5, 17, "models[0].fallbacks[0]", "cannot fall back to itself"},
			{5, 20, "models[0].fallbacks[1]", `unknown model "nope"`},
			{6, 25, "models[0].context_fallbacks[0]", `unknown model "gone"`}}},
		{"mode leaves no target", p1 + "models:\n  - name: m\n    routing: {mode: local_only}\n    targets: [{provider: p, model: x}]\n", []problem{
			{5, 14, "models[0].targets", "routing mode local_only leaves no target"}}},
		{"max context", p1 + "models:\n  - name: m\n    targets: [{provider: p, model: x}]\n    max_context: -5\n", []problem{
			{5, 18, "models[0].max_context", "must not be negative"}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Parse([]byte(tt.yaml), "t.yaml", testTypes())
			checkProblems(t, err, tt.want)
		})
	}
}
