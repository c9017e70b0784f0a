package main

import (
	"context"
	"fmt"
	"testing"

	"gatehouse/internal/limit"
	"gatehouse/internal/mockllm"
	"gatehouse/internal/store/redis"
	"gatehouse/internal/store/redis/redistest"
)

// TestLimitsLeaseTwoReplicas: two gatehouse processes with limits.lease
// on, sharing a Redis of this test's own, serve a key with rpm, tpm and
// a budget. After the first request of each, requests cost Redis no
// script call (the batches last thousands of requests); once both
// processes have stopped, handing their batches back, Redis's budget
// counter holds exactly the sum of the cost headers the requests got.
func TestLimitsLeaseTwoReplicas(t *testing.T) {
	up := startUpstream(t, mockllm.Options{Reply: longReply})
	redisURL := redistest.Start(t)
	pg, _ := clusterDSN(t) // a database of its own: the spend record seeds the budget counters
	storage := fmt.Sprintf("storage: {redis: '%s', postgres: '%s'}\nlimits: {redis_prefix: '%s', redis_timeout: 10s, lease: {enabled: true}}\n",
		redisURL, pg, uniquePrefix())
	cfg := limitsConfig(up, "  - {key: "+clientKey+", name: tester, project: qa, rpm: 100000, tpm: 100000000, budget: {usd: 100, period: total}}\n", storage)
	a, stopA := stoppableGateway(t, t.TempDir(), cfg)
	b, stopB := stoppableGateway(t, t.TempDir(), cfg)
	bases := []string{a.URL, b.URL}
	var sum limit.Micros
	send := func(n int) {
		for i := range n {
			o := chatOnce(context.Background(), burstClient(bases[i%2], clientKey), "chat")
			if o.status != 200 {
				t.Fatalf("request %d: %d %s", i, o.status, o.msg)
			}
			sum += mustUSD(t, o.header.Get("X-Gatehouse-Cost-Usd"))
		}
	}
	send(2) // each process takes its batches
	before := redisCommands(t, redisURL)
	const n = 40
	send(n)
	after := redisCommands(t, redisURL)
	if d := after["evalsha"] - before["evalsha"] + after["eval"] - before["eval"]; d != 0 {
		t.Errorf("%d script calls during %d requests with leases, want none", d, n)
	}
	stopA()
	stopB()

	c, err := redis.NewClient(redisURL)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ctx := context.Background()
	keys, err := c.Do(ctx, c.B().Keys().Pattern("*:b:key:total::static:tester").Build()).AsStrSlice()
	if err != nil || len(keys) != 1 {
		t.Fatalf("budget counters %v (%v), want the key's one", keys, err)
	}
	got, err := c.Do(ctx, c.B().Get().Key(keys[0]).Build()).AsInt64()
	if err != nil {
		t.Fatal(err)
	}
	if limit.Micros(got) != sum {
		t.Errorf("Redis's budget counter %s after both stopped, want the sum of the cost headers %s", limit.Micros(got), sum)
	}
}
