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
// has no limits ("nolimits"), with one that has rpm, tpm and a budget
// ("limits"), and with the same key under limits.headers: refusals
// ("limits-quiet": no x-ratelimit-* headers on admitted responses), and
// with no limits and no request log line ("nolimits-nolog"), with no
// limits and no usage records ("nolimits-norecords"), the key with no
// limits in cluster mode with and without records ("cluster",
// "cluster-norecords": needs the test services), and through
// gatehouse serve --bare ("bare": no auth, log or limits). The
// differences are what admission control costs a request, how much of it
// is the six headers, and what the log line and the usage record cost;
// scripts/bench-instructions counts them in instructions. Run with -cpu 1
// for the least scheduling noise.
func BenchmarkRequestPath(b *testing.B) {
	up := startUpstream(b, mockllm.Options{RecordLimit: -1})
	prompt := strings.Repeat("Summarise the trade-offs of running an LLM gateway in front of several providers. ", 4)[:300]
	const limited = "  - {key: gh-bench-limited, project: bench, rpm: 100000000, tpm: 1000000000000, budget: {usd: 1000000000, period: total}}\n"
	variants := []struct {
		name, key, keyYAML, extra string
		headers                   bool // admitted responses carry x-ratelimit-* headers
		bare                      bool // gatehouse serve --bare
	}{
		{"bare", "gh-bench-free", "  - {key: gh-bench-free, project: bench}\n", "", false, true},
		{"nolimits", "gh-bench-free", "  - {key: gh-bench-free, project: bench}\n", "", false, false},
		{"limits", "gh-bench-limited", limited, "", true, false},
		{"limits-quiet", "gh-bench-limited", limited, "limits: {headers: refusals}\n", false, false},
		{"nolimits-nolog", "gh-bench-free", "  - {key: gh-bench-free, project: bench}\n", "log: {requests: false}\n", false, false},
		{"nolimits-norecords", "gh-bench-free", "  - {key: gh-bench-free, project: bench}\n", "usage: {records: false}\n", false, false},
		// Cluster mode (needs the test services: PostgreSQL takes the
		// records with COPY, out of this process).
		{"cluster", "gh-bench-free", "  - {key: gh-bench-free, project: bench}\n", "cluster", false, false},
		{"cluster-norecords", "gh-bench-free", "  - {key: gh-bench-free, project: bench}\n", "cluster usage: {records: false}\n", false, false},
	}
	for _, sc := range []struct {
		name string
		body string
	}{
		{"nonstream", `{"model":"chat","messages":[{"role":"user","content":"` + prompt + `"}]}`},
		{"stream-usage", `{"model":"chat","stream":true,"stream_options":{"include_usage":true},"messages":[{"role":"user","content":"` + prompt + `"}]}`},
	} {
		for _, v := range variants {
			b.Run(sc.name+"/"+v.name, func(b *testing.B) {
				extra := v.extra
				if rest, ok := strings.CutPrefix(extra, "cluster"); ok {
					extra = clusterStorage(b) + strings.TrimSpace(rest) + "\n"
				}
				yaml := strings.Replace(baseConfig(up, extra), "keys:\n", "keys:\n"+v.keyYAML, 1)
				gw := startGatewayMode(b, yaml, v.bare)
				client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 64}}
				body := []byte(sc.body)
				do := func() *http.Response {
					req, _ := http.NewRequest(http.MethodPost, gw.URL+"/v1/chat/completions", bytes.NewReader(body))
					req.Header.Set("Authorization", "Bearer "+v.key)
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
					return resp
				}
				// Warm (connections, key cache, counters) and check the
				// variant is what it says.
				if got := do().Header.Get("X-Ratelimit-Limit-Requests") != ""; got != v.headers {
					b.Fatalf("x-ratelimit headers on an admitted response: %v, want %v", got, v.headers)
				}
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
