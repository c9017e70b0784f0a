package main

import (
	"context"
	"flag"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"os"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/rueidis"

	"gatehouse/internal/mockllm"
	"gatehouse/internal/store/redis"
)

// benchRedis is a client of the test services' Redis, which cluster-mode
// variants use; closed with b.
func benchRedis(b *testing.B) rueidis.Client {
	b.Helper()
	c, err := redis.NewClient(os.Getenv("GATEHOUSE_TEST_REDIS"))
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(c.Close)
	return c
}

// redisCalls is how many script calls (EVALSHA, EVAL) and commands in
// all Redis has run since it started, from INFO commandstats, which
// counts the commands a script runs as well as the script: the first is
// the round trips' worth, the second the work.
func redisCalls(b *testing.B, c rueidis.Client) (scripts, all int64) {
	b.Helper()
	s, err := c.Do(context.Background(), c.B().Info().Section("commandstats").Build()).ToString()
	if err != nil {
		b.Fatal(err)
	}
	for line := range strings.Lines(s) {
		name, rest, ok := strings.Cut(line, ":calls=")
		if !ok {
			continue
		}
		v, _, _ := strings.Cut(rest, ",")
		k, _ := strconv.ParseInt(v, 10, 64)
		all += k
		if name == "cmdstat_evalsha" || name == "cmdstat_eval" {
			scripts += k
		}
	}
	return scripts, all
}

// The request rate BenchmarkRequestPath's background writers are paced
// for (see pacing): at benchRate requests a second the usage sink's
// 200 ms timer sees benchSinkBatch records a transaction and the spend
// log's 250 ms timer (limits.flush_every) one flush every benchSpendEvery
// requests, so the benchmark writes exactly that often, whatever the
// machine's load. The keys' last-used times (every 5 s, 5,000 requests)
// and the key cache's refresh (every minute) fall outside a run of a few
// thousand requests; written at close, they cancel out of
// scripts/bench-instructions' difference of two runs.
const (
	benchRate       = 1000
	benchSinkBatch  = benchRate * 200 / 1000
	benchSpendEvery = benchRate * 250 / 1000
)

// engineGatehouse is the config that serves HTTP/1.x with the gateway's
// own engine (internal/h1), the default since 2026-11-28; engineNetHTTP
// serves it with net/http's server. The benchmark's variants without
// "-h1" in their names run on net/http's server, as every count in
// BENCHMARKS.md taken before the engine became the default did, so that
// their names keep meaning what they measured.
const (
	engineGatehouse = "server: {http1_engine: gatehouse}\n"
	engineNetHTTP   = "server: {http1_engine: net/http}\n"
)

// BenchmarkRequestPath is one chat completion through the whole gateway
// (real HTTP in and out, on loopback, mockllm upstream), with a key that
// has no limits ("nolimits"), with one that has rpm, tpm and a budget
// ("limits"), and with the same key under limits.headers: refusals
// ("limits-quiet": no x-ratelimit-* headers on admitted responses), and
// with no limits and no request log line ("nolimits-nolog"), with no
// limits and no usage records ("nolimits-norecords"), with limits and no
// usage records ("limits-norecords"), and that under limits.headers:
// refusals ("limits-quiet-norecords"), the key with no limits in cluster
// mode with and without records ("cluster", "cluster-norecords": needs
// the test services), the limited key in cluster mode without and with
// leases ("cluster-limits", "cluster-lease"; these report the Redis
// commands a request costs, redis-cmds/op), through
// gatehouse serve --bare ("bare": no auth, log or limits), "bare" and
// "limits" through the gateway's own HTTP/1.x engine ("bare-h1",
// "limits-h1"), limits-h1 with one feature off or no limits, for the
// feature tax split by feature ("limits-quiet-h1", "limits-nolog-h1",
// "limits-norecords-h1", "nolimits-h1"), through
// net/http/httputil's ReverseProxy alone ("plainproxy", as
// bench/cmd/plainproxy serves it) and with no proxy at all ("direct"). The
// differences are what admission control costs a request, how much of it
// is the six headers, and what the log line and the usage record cost;
// scripts/bench-instructions counts them in instructions. Run with -cpu 1
// for the least scheduling noise. In embedded mode the store writers are
// paced by request count (benchRate); cluster mode keeps its timers. The
// client is rawClient, whose own share of a count is small, unless
// BENCH_CLIENT=go picks net/http's (see benchClient).
func BenchmarkRequestPath(b *testing.B) {
	up := startUpstream(b, mockllm.Options{RecordLimit: -1})
	prompt := strings.Repeat("Summarise the trade-offs of running an LLM gateway in front of several providers. ", 4)[:300]
	const limited = "  - {key: gh-bench-limited, project: bench, rpm: 100000000, tpm: 1000000000000, budget: {usd: 1000000000, period: total}}\n"
	variants := []struct {
		name, key, keyYAML, extra string
		headers                   bool      // admitted responses carry x-ratelimit-* headers
		bare                      bool      // gatehouse serve --bare
		header                    [2]string // a request header, if any
		cache                     string    // the x-gatehouse-cache every timed response must carry ("" any)
	}{
		{"bare", "gh-bench-free", "  - {key: gh-bench-free, project: bench}\n", "", false, true, [2]string{}, ""},
		// No gatehouse: the standard library's reverse proxy in front of
		// the same mock ("plainproxy", the throughput goal's baseline),
		// and the client calling the mock itself ("direct": what the
		// client and the mock cost, counted in every variant alike). Both
		// send the upstream's own key, which a plain proxy passes on, and
		// get the mock's own x-ratelimit-* headers, which gatehouse drops.
		{"plainproxy", upstreamKey, "", "", true, false, [2]string{}, ""},
		{"direct", upstreamKey, "", "", true, false, [2]string{}, ""},
		{"nolimits", "gh-bench-free", "  - {key: gh-bench-free, project: bench}\n", "", false, false, [2]string{}, ""},
		{"limits", "gh-bench-limited", limited, "", true, false, [2]string{}, ""},
		{"limits-quiet", "gh-bench-limited", limited, "limits: {headers: refusals}\n", false, false, [2]string{}, ""},
		{"nolimits-nolog", "gh-bench-free", "  - {key: gh-bench-free, project: bench}\n", "log: {requests: false}\n", false, false, [2]string{}, ""},
		{"nolimits-norecords", "gh-bench-free", "  - {key: gh-bench-free, project: bench}\n", "usage: {records: false}\n", false, false, [2]string{}, ""},
		{"limits-norecords", "gh-bench-limited", limited, "usage: {records: false}\n", true, false, [2]string{}, ""},
		// limits-norecords under limits.headers: refusals: the difference
		// from limits-norecords is the x-ratelimit headers' work alone.
		{"limits-quiet-norecords", "gh-bench-limited", limited, "limits: {headers: refusals}\nusage: {records: false}\n", false, false, [2]string{}, ""},
		// Cluster mode (needs the test services: PostgreSQL takes the
		// records with COPY, out of this process).
		{"cluster", "gh-bench-free", "  - {key: gh-bench-free, project: bench}\n", "cluster", false, false, [2]string{}, ""},
		{"cluster-norecords", "gh-bench-free", "  - {key: gh-bench-free, project: bench}\n", "cluster usage: {records: false}\n", false, false, [2]string{}, ""},
		// The key with rpm, tpm and a budget in cluster mode: one
		// admission script a request and a settle; and with leases on
		// (limits.lease), admitted in-process from batches.
		{"cluster-limits", "gh-bench-limited", limited, "cluster", true, false, [2]string{}, ""},
		{"cluster-lease", "gh-bench-limited", limited, "cluster-lease", true, false, [2]string{}, ""},
		// The exact cache: every timed request a hit; and every one a
		// miss (a TTL of 0 keeps nothing), the upstream path plus the
		// lookup.
		// bare and limits served by the gateway's own HTTP/1.x engine
		// (server.http1_engine: gatehouse) instead of net/http's server.
		{"bare-h1", "gh-bench-free", "  - {key: gh-bench-free, project: bench}\n", engineGatehouse, false, true, [2]string{}, ""},
		{"limits-h1", "gh-bench-limited", limited, engineGatehouse, true, false, [2]string{}, ""},
		// The feature tax (limits-h1 against bare-h1) split by feature,
		// each variant limits-h1 with one thing off or the key with no
		// limits: the x-ratelimit headers (limits-quiet-h1), the request
		// log line (limits-nolog-h1), the usage records
		// (limits-norecords-h1), admission control and its headers
		// (nolimits-h1).
		{"nolimits-h1", "gh-bench-free", "  - {key: gh-bench-free, project: bench}\n", engineGatehouse, false, false, [2]string{}, ""},
		{"limits-quiet-h1", "gh-bench-limited", limited, engineGatehouse + "limits: {headers: refusals}\n", false, false, [2]string{}, ""},
		{"limits-nolog-h1", "gh-bench-limited", limited, engineGatehouse + "log: {requests: false}\n", true, false, [2]string{}, ""},
		{"limits-norecords-h1", "gh-bench-limited", limited, engineGatehouse + "usage: {records: false}\n", true, false, [2]string{}, ""},
		{"cache-hit", "gh-bench-free", "  - {key: gh-bench-free, project: bench}\n", "cache: {exact: {enabled: true}}\n",
			false, false, [2]string{}, "hit"},
		{"cache-miss", "gh-bench-free", "  - {key: gh-bench-free, project: bench}\n", "cache: {exact: {enabled: true}}\n",
			false, false, [2]string{"X-Gatehouse-Cache-Ttl", "0"}, "miss"},
	}
	for _, sc := range []struct {
		name string
		path string
		body string
	}{
		{"nonstream", "/v1/chat/completions", `{"model":"chat","messages":[{"role":"user","content":"` + prompt + `"}]}`},
		{"stream-usage", "/v1/chat/completions", `{"model":"chat","stream":true,"stream_options":{"include_usage":true},"messages":[{"role":"user","content":"` + prompt + `"}]}`},
		// The same question through the Responses API, translated to the
		// chat completions upstream and back.
		{"responses", "/v1/responses", `{"model":"chat","input":"` + prompt + `"}`},
		{"responses-stream", "/v1/responses", `{"model":"chat","stream":true,"input":"` + prompt + `"}`},
		// Passed through to the emulator's own Responses API
		// (responses_api: true on the provider).
		{"responses-native", "/v1/responses", `{"model":"chat","input":"` + prompt + `"}`},
		{"responses-native-stream", "/v1/responses", `{"model":"chat","stream":true,"input":"` + prompt + `"}`},
	} {
		for _, v := range variants {
			b.Run(sc.name+"/"+v.name, func(b *testing.B) {
				var flush func(context.Context) error // the paced spend log's tick
				extra := v.extra
				if extra == "cluster-lease" {
					extra = strings.Replace(clusterStorage(b), "redis_timeout: 10s}", "redis_timeout: 10s, lease: {enabled: true}}", 1)
				} else if rest, ok := strings.CutPrefix(extra, "cluster"); ok {
					extra = clusterStorage(b) + strings.TrimSpace(rest) + "\n"
				}
				if !strings.Contains(extra, "http1_engine:") {
					extra = engineNetHTTP + extra
				}
				yaml := strings.Replace(baseConfig(up, extra), "keys:\n", "keys:\n"+v.keyYAML, 1)
				if strings.HasPrefix(sc.name, "responses-native") {
					yaml = strings.Replace(yaml, "type: openai-compatible\n", "type: openai-compatible\n    responses_api: true\n", 1)
				}
				var pace pacing
				var base string // where the client sends its requests
				switch v.name {
				case "plainproxy":
					base = startPlainProxy(b, up.URL)
				case "direct":
					base = up.URL
				default:
					if !strings.HasPrefix(v.extra, "cluster") {
						pace = pacing{sinkBatch: benchSinkBatch, manual: true}
					}
					// As gatehouse serve runs (heapsampling.go): no heap
					// profile sampling, unless -memprofile asks for one.
					// The plain proxy and the direct calls keep Go's
					// default, as bench/cmd/plainproxy runs in the
					// throughput harness.
					if f := flag.Lookup("test.memprofile"); f == nil || f.Value.String() == "" {
						before := runtime.MemProfileRate
						if stopHeapSampling() {
							b.Cleanup(func() { runtime.MemProfileRate = before })
						}
					}
					gw := startPacedGateway(b, yaml, v.bare, pace)
					base = gw.URL
					flush = gw.gw.flushSpend
				}
				var served atomic.Int64 // timed requests, for the paced spend flush
				do := benchClient(b, base, sc.path, []byte(sc.body), v.key, v.header, v.cache != "")
				// Warm (connections, key cache, counters) and check the
				// variant is what it says.
				if got := do.request(true).rateLimit; got != v.headers {
					b.Fatalf("x-ratelimit headers on an admitted response: %v, want %v", got, v.headers)
				}
				do.expectCache(v.cache) // the first request stored the answer; from here on, all hits
				if c := do.request(true).cache; v.cache != "" && c != v.cache {
					b.Fatalf("x-gatehouse-cache %q, want %q", c, v.cache)
				}
				var mu sync.Mutex
				var overhead []float64 // x-gatehouse-overhead-ms of every timed request
				var rc rueidis.Client  // cluster mode: counts the commands Redis ran
				var scripts0, all0 int64
				if strings.HasPrefix(v.extra, "cluster") {
					rc = benchRedis(b)
					scripts0, all0 = redisCalls(b, rc)
				}
				paced := func() benchSeen {
					resp := do.request(false)
					if pace.manual && served.Add(1)%benchSpendEvery == 0 {
						if err := flush(context.Background()); err != nil {
							b.Fatal(err)
						}
					}
					return resp
				}
				marks := b.N > 1 && os.Getenv("BENCH_MARKS") != ""
				if marks {
					for range benchWarm(b) {
						paced()
					}
					benchMark()
				}
				b.ReportAllocs()
				b.ResetTimer()
				b.RunParallel(func(pb *testing.PB) {
					var mine []float64
					for pb.Next() {
						resp := paced()
						if v.cache != "" { // the cache's figure (the other variants' counts stay as they were)
							mine = append(mine, resp.overheadMs)
						}
					}
					mu.Lock()
					overhead = append(overhead, mine...)
					mu.Unlock()
				})
				b.StopTimer()
				if marks {
					benchMark()
				}
				if rc != nil {
					// Less the INFO that read the count; the settles queued
					// last may still be on their way (a pipelined batch).
					scripts, all := redisCalls(b, rc)
					b.ReportMetric(float64(scripts-scripts0)/float64(b.N), "redis-scripts/op")
					b.ReportMetric(float64(all-all0-1)/float64(b.N), "redis-cmds/op")
				}
				if len(overhead) > 0 {
					slices.Sort(overhead)
					b.ReportMetric(overhead[len(overhead)/2], "overhead-p50-ms")
				}
			})
		}
	}
}

// startPlainProxy serves httputil's ReverseProxy in front of upstream on
// a loopback port, set up as bench/cmd/plainproxy sets it up (the
// throughput goal's baseline, in another module), and returns its URL.
func startPlainProxy(b *testing.B, upstream string) string {
	b.Helper()
	u, err := url.Parse(upstream)
	if err != nil {
		b.Fatal(err)
	}
	rp := httputil.NewSingleHostReverseProxy(u)
	rp.FlushInterval = -1
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.MaxIdleConns = 0
	tr.MaxIdleConnsPerHost = 1024
	rp.Transport = tr
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	srv := &http.Server{
		Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			_ = http.NewResponseController(w).EnableFullDuplex()
			rp.ServeHTTP(w, r)
		}),
		ReadHeaderTimeout: 10 * time.Second,
		IdleTimeout:       2 * time.Minute,
	}
	go func() { _ = srv.Serve(ln) }()
	b.Cleanup(func() {
		_ = srv.Close()
		tr.CloseIdleConnections()
	})
	return "http://" + ln.Addr().String()
}

// benchMark marks where the timed requests begin and where they end, when
// BENCH_MARKS is set: scripts/bench-instructions' MARKS mode has
// callgrind dump its counters each time it is entered (--dump-before),
// so that the counts between the two dumps are the timed requests' alone,
// in one process that has served benchWarm requests first. Two processes
// counted N1 and N2 requests each differ by more than the requests in
// between: the Go runtime fills its type-assertion caches at random (one
// miss in about a thousand updates a call site's cache), so when each of
// the net/http and io call sites stops missing differs per process, and
// that moves a count by hundreds of instructions a request. It does
// nothing; it is not inlined, so that callgrind sees it entered.
//
//go:noinline
func benchMark() {}

// benchWarm is how many requests BENCH_MARKS runs before the first mark
// (BENCH_WARM, 5,000 unless set): enough that a call site that misses on
// every request has stopped missing (the chance that it has not is
// (1-1/1024)^5000, under 1%), and a multiple of the paced batches and
// flushes.
func benchWarm(b *testing.B) int {
	v := os.Getenv("BENCH_WARM")
	if v == "" {
		return 5000
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 0 {
		b.Fatalf("BENCH_WARM=%q: want a count of requests", v)
	}
	return n
}
