package main

import (
	"context"
	"strings"
	"testing"
	"time"

	"gatehouse/internal/mockllm"
)

// TestMetricsOfRequestsAndReload: tokens by type, cost, overhead, cache
// results, denials, routing decisions, the deployments' in-flight gauges
// and the usage sink's counters are served after real requests; a reload
// that removes a provider drops its series.
func TestMetricsOfRequestsAndReload(t *testing.T) {
	up := startUpstream(t, mockllm.Options{Reply: longReply})
	other := startUpstream(t, mockllm.Options{})
	cfg := `listen: 127.0.0.1:0
providers:
  - {name: up, type: openai-compatible, base_url: ` + up.URL + `/v1, api_key: ` + upstreamKey + `}
  - {name: other, type: openai-compatible, base_url: ` + other.URL + `/v1, api_key: ` + upstreamKey + `}
keys:
  - {key: ` + clientKey + `, name: tester, project: qa, rpm: 3, budget: {usd: 10, period: month}}
models:
  - name: chat
    strategy: round-robin
    targets: [{provider: up, model: gpt-4o-mini}, {provider: other, model: gpt-4o-mini}]
`
	gw := startGateway(t, cfg)
	for i := range 4 {
		o := chatOnce(context.Background(), gw.client(), "chat")
		if want := 200; i == 3 {
			if o.status != 429 {
				t.Fatalf("4th request: %d, want 429 (rpm 3)", o.status)
			}
		} else if o.status != want {
			t.Fatalf("request %d: %d %s", i, o.status, o.msg)
		}
	}
	var m string
	waitFor(t, 30*time.Second, "the usage records written", func() bool {
		m = scrape(t, gw)
		return strings.Contains(m, "gatehouse_usage_records_written_total 4")
	})
	for _, want := range []string{
		`gatehouse_tokens_total{model="chat",project="qa",provider="up",type="prompt"}`,
		`gatehouse_tokens_total{model="chat",project="qa",provider="other",type="completion"}`,
		`gatehouse_cost_usd_total{model="chat",project="qa",provider="up"}`,
		`gatehouse_overhead_seconds_count{route="/v1/chat/completions"} 4`,
		`gatehouse_cache_requests_total{model="chat",project="qa",result="bypass"} 4`,
		`gatehouse_limit_denials_total{kind="requests",project="qa",scope="key"} 1`,
		`gatehouse_routing_decisions_total{model="chat",provider="up",strategy="round-robin"}`,
		`gatehouse_routing_decisions_total{model="chat",provider="other",strategy="round-robin"}`,
		`gatehouse_deployment_in_flight_requests{model="gpt-4o-mini",provider="other"} 0`,
		`gatehouse_deployment_in_flight_tokens{model="gpt-4o-mini",provider="up"} 0`,
		`gatehouse_requests_in_flight 0`,
		`gatehouse_usage_queue_depth 0`,
		`gatehouse_usage_records_spilled_total 0`,
	} {
		if !strings.Contains(m, want) {
			t.Errorf("metrics lack %s:\n%s", want, grepLines(m, "gatehouse_"))
		}
	}

	// The provider "other" goes: the series of its deployment (breaker,
	// attempts, routing decisions, in-flight gauges) go with it; the
	// spend counters (tokens, cost) keep their history.
	replaceFile(t, gw.Path, strings.Replace(strings.Replace(cfg, ", {provider: other, model: gpt-4o-mini}", "", 1),
		"  - {name: other, type: openai-compatible, base_url: "+other.URL+"/v1, api_key: "+upstreamKey+"}\n", "", 1))
	waitFor(t, 30*time.Second, "the reload", func() bool { return strings.Contains(gw.Logs.String(), "config reloaded") })
	m = scrape(t, gw)
	for _, gone := range []string{`gatehouse_upstream_attempts_total{model="gpt-4o-mini",outcome="success",provider="other"}`,
		`gatehouse_deployment_in_flight_requests{model="gpt-4o-mini",provider="other"}`,
		`gatehouse_routing_decisions_total{model="chat",provider="other"`} {
		if strings.Contains(m, gone) {
			t.Errorf("after the reload: %s still served", gone)
		}
	}
	if !strings.Contains(m, `gatehouse_deployment_in_flight_requests{model="gpt-4o-mini",provider="up"} 0`) {
		t.Errorf("the kept deployment's gauge is gone:\n%s", grepLines(m, "in_flight"))
	}
}
