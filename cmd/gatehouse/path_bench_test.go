package main

import (
	"bytes"
	"io"
	"net/http"
	"strings"
	"testing"

	"gatehouse/internal/mockllm"
)

// BenchmarkRequestPath is one chat completion through the whole gateway
// (real HTTP in and out, on loopback, mockllm upstream), with a key that
// has no limits and with one that has rpm, tpm and a budget. The
// difference between the two is what admission control costs a request
// in CPU time, the figure BENCHMARKS.md relates to the load benchmark's
// throughput ratio. Run with -cpu 1 for the least scheduling noise.
func BenchmarkRequestPath(b *testing.B) {
	up := startUpstream(b, mockllm.Options{RecordLimit: -1})
	prompt := strings.Repeat("Summarise the trade-offs of running an LLM gateway in front of several providers. ", 4)[:300]
	keys := map[string]string{
		"nolimits": "  - {key: gh-bench-free, project: bench}\n",
		"limits":   "  - {key: gh-bench-limited, project: bench, rpm: 100000000, tpm: 1000000000000, budget: {usd: 1000000000, period: total}}\n",
	}
	for _, sc := range []struct {
		name string
		body string
	}{
		{"nonstream", `{"model":"chat","messages":[{"role":"user","content":"` + prompt + `"}]}`},
		{"stream-usage", `{"model":"chat","stream":true,"stream_options":{"include_usage":true},"messages":[{"role":"user","content":"` + prompt + `"}]}`},
	} {
		for _, name := range []string{"nolimits", "limits"} {
			b.Run(sc.name+"/"+name, func(b *testing.B) {
				yaml := strings.Replace(baseConfig(up, ""), "keys:\n", "keys:\n"+keys[name], 1)
				gw := startGateway(b, yaml)
				key := "gh-bench-free"
				if name == "limits" {
					key = "gh-bench-limited"
				}
				client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 64}}
				body := []byte(sc.body)
				do := func() {
					req, _ := http.NewRequest(http.MethodPost, gw.URL+"/v1/chat/completions", bytes.NewReader(body))
					req.Header.Set("Authorization", "Bearer "+key)
					req.Header.Set("Content-Type", "application/json")
					resp, err := client.Do(req)
					if err != nil {
						b.Fatal(err)
					}
					_, _ = io.Copy(io.Discard, resp.Body)
					resp.Body.Close()
					if resp.StatusCode != http.StatusOK {
						b.Fatalf("status %d", resp.StatusCode)
					}
					if name == "limits" && resp.Header.Get("X-Ratelimit-Limit-Requests") == "" {
						b.Fatal("admission did not run: no x-ratelimit headers")
					}
				}
				do() // warm: connections, key cache, counters
				b.ReportAllocs()
				b.ResetTimer()
				b.RunParallel(func(pb *testing.PB) {
					for pb.Next() {
						do()
					}
				})
			})
		}
	}
}
