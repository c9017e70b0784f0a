package main

import (
	"bytes"
	"fmt"
	"maps"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"gatehouse/bench/internal/benchcli"
)

func TestParseStat(t *testing.T) {
	tests := []struct {
		name, line string
		want       stat
		wantErr    bool
	}{
		{
			name: "plain",
			line: "15894 (sleep) S 15892 15892 5259 0 -1 4194304 132 0 0 0 7 3 0 0 20 0 1 0 506164 2990080 389 18446744073709551615\n",
			want: stat{ppid: 15892, cpu: 10},
		},
		{
			// The command name may hold spaces and ')' and is cut at 15 bytes.
			name: "tricky command name",
			line: "42 (my ) proc (x)) R 1 42 42 0 -1 4194560 10 0 0 0 1234 567 0 0 20 0 9 0 100 0 0",
			want: stat{ppid: 1, cpu: 1801},
		},
		{
			// A postmaster whose backends have exited: their ticks are in
			// its cutime and cstime.
			name: "reaped children",
			line: "812 (postgres) S 1 812 812 0 -1 4194560 5000 120000 0 0 150 90 4200 1800 20 0 1 0 2000 229437440 7000 18446744073709551615",
			want: stat{ppid: 1, cpu: 240, reaped: 6000},
		},
		{name: "truncated", line: "42 (x) R 1 42 42 0 -1 4194560 10 0 0 0 12 5", wantErr: true},
		{name: "no name", line: "42 x R 1 2 3", wantErr: true},
		{name: "bad utime", line: "42 (x) R 1 42 42 0 -1 4194560 10 0 0 0 abc 5 0 0", wantErr: true},
		{name: "bad cstime", line: "42 (x) R 1 42 42 0 -1 4194560 10 0 0 0 1 5 0 -1", wantErr: true},
		{name: "bad ppid", line: "42 (x) R x 42 42 0 -1 4194560 10 0 0 0 1 5 0 0", wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := parseStat(tt.line)
			if (err != nil) != tt.wantErr {
				t.Fatalf("parseStat() error = %v, wantErr %v", err, tt.wantErr)
			}
			if got != tt.want {
				t.Errorf("parseStat() = %+v, want %+v", got, tt.want)
			}
		})
	}
}

func TestParseMachineBusy(t *testing.T) {
	// user nice system idle iowait irq softirq steal guest guest_nice
	stat := "cpu  176896 1 35247 1018556 870 2 2561 247 0 0\ncpu0 1 2 3 4 5 6 7 8 0 0\nintr 1\n"
	got, err := parseMachineBusy(stat)
	if want := uint64(176896 + 1 + 35247 + 2 + 2561 + 247); err != nil || got != want {
		t.Errorf("parseMachineBusy() = %d, %v; want %d", got, err, want)
	}
	for _, bad := range []string{"", "cpu0 1 2 3 4 5 6 7 8\n", "cpu 1 2 3\n", "cpu 1 2 x 4 5 6 7 8\n"} {
		if _, err := parseMachineBusy(bad); err == nil {
			t.Errorf("parseMachineBusy(%q) succeeded, want an error", bad)
		}
	}
}

func TestParseVmHWM(t *testing.T) {
	status := "Name:\tgatehouse\nVmPeak:\t 1262404 kB\nVmSize:\t 1262404 kB\nVmHWM:\t   18236 kB\nVmRSS:\t   17000 kB\n"
	got, err := parseVmHWM(status)
	if err != nil || got != 18236<<10 {
		t.Errorf("parseVmHWM() = %d, %v; want %d", got, err, 18236<<10)
	}
	for _, bad := range []string{"Name:\tx\n", "VmHWM:\t12 MB\n", "VmHWM:\tmany kB\n"} {
		if _, err := parseVmHWM(bad); err == nil {
			t.Errorf("parseVmHWM(%q) succeeded, want an error", bad)
		}
	}
}

// The /proc readers must work on a live process: this one.
func TestProcReadersOnSelf(t *testing.T) {
	pid := os.Getpid()
	if _, err := os.Stat("/proc/self/stat"); err != nil {
		t.Fatalf("no /proc here: the benchmark reads CPU time and peak RSS from it (Linux only): %v", err)
	}
	if _, err := cpuTime(pid); err != nil {
		t.Errorf("cpuTime: %v", err)
	}
	if err := resetPeakRSS(pid); err != nil {
		t.Errorf("resetPeakRSS: %v", err)
	}
	if rss, err := peakRSS(pid); err != nil || rss == 0 {
		t.Errorf("peakRSS = %d, %v", rss, err)
	}
}

func TestPercentile(t *testing.T) {
	ms := func(ns ...int) []time.Duration {
		var d []time.Duration
		for _, n := range ns {
			d = append(d, time.Duration(n)*time.Millisecond)
		}
		return d
	}
	hundred := make([]time.Duration, 100)
	for i := range hundred {
		hundred[i] = time.Duration(i+1) * time.Millisecond
	}
	tests := []struct {
		name   string
		sorted []time.Duration
		q      float64
		want   time.Duration
	}{
		{"empty", nil, 0.5, 0},
		{"one", ms(7), 0.99, 7 * time.Millisecond},
		{"median of odd", ms(1, 2, 3), 0.5, 2 * time.Millisecond},
		{"median of even takes the lower", ms(1, 2, 3, 4), 0.5, 2 * time.Millisecond},
		{"p99 of 100", hundred, 0.99, 99 * time.Millisecond},
		{"p50 of 100", hundred, 0.50, 50 * time.Millisecond},
		{"p100", hundred, 1, 100 * time.Millisecond},
		{"p0 clamps to the minimum", hundred, 0, 1 * time.Millisecond},
	}
	for _, tt := range tests {
		if got := percentile(tt.sorted, tt.q); got != tt.want {
			t.Errorf("%s: percentile(q=%v) = %v, want %v", tt.name, tt.q, got, tt.want)
		}
	}
}

func TestMedian(t *testing.T) {
	rounds := []sample{
		{requests: 100, failed: 1, errs: map[string]int{"x": 1}, rps: 300, p50: 3, p99: 9, cores: 1.0, rssMiB: 20, redisCores: 0.03, pgCores: 0.01},
		{requests: 100, rps: 100, p50: 1, p99: 30, cores: 0.5, rssMiB: 30, spilled: 0.2, redisCores: 0.01, pgCores: 0.03},
		{requests: 100, failed: 2, errs: map[string]int{"x": 2}, rps: 200, p50: 2, p99: 10, cores: 0.7, rssMiB: 10, redisCores: 0.02, pgCores: 0.02},
	}
	got := median(rounds)
	if got.requests != 300 || got.failed != 3 || got.errs["x"] != 3 {
		t.Errorf("counts = %d requests, %d failed, %v; want 300, 3, x:3", got.requests, got.failed, got.errs)
	}
	if got.rps != 200 || got.p50 != 2 || got.p99 != 10 || got.cores != 0.7 || got.rssMiB != 20 || got.redisCores != 0.02 || got.pgCores != 0.02 {
		t.Errorf("medians = %+v", got)
	}
	even := median([]sample{{rps: 100, cores: math.NaN(), pgCores: math.NaN()}, {rps: 300, cores: math.NaN(), pgCores: math.NaN()}})
	if got.spread != 1 || got.other != 0 || got.spilled != 0.2 {
		t.Errorf("noise = %v spread, %v other, %v spilled; want 1 (=(300−100)/200), 0, 0.2 (the worst round)", got.spread, got.other, got.spilled)
	}
	if even.rps != 200 || !math.IsNaN(even.cores) || !math.IsNaN(even.pgCores) {
		t.Errorf("even median = %v rps, %v cores, %v PostgreSQL cores; want 200, NaN, NaN", even.rps, even.cores, even.pgCores)
	}
}

func TestFormatting(t *testing.T) {
	tests := []struct{ got, want string }{
		{pct(93.14, 100), "93.1%"},
		{pct(1, 3), "33.3%"},
		{pct(5, 0), "-"},
		{pct(math.NaN(), 1), "-"},
		{num(math.NaN(), 2), "-"},
		{num(0.456, 2), "0.46"},
		{failed(sample{}), "0"},
		{failed(sample{requests: 2000, failed: 3}), "3 (0.15%)"},
	}
	for i, tt := range tests {
		if tt.got != tt.want {
			t.Errorf("case %d: got %q, want %q", i, tt.got, tt.want)
		}
	}
	if got := msf(1500 * time.Microsecond); got != 1.5 {
		t.Errorf("msf(1.5ms) = %v", got)
	}
}

func TestWriteTableAndVerdict(t *testing.T) {
	nan := math.NaN()
	c := cell{
		spec: runSpec{scenario: scenario{name: "nonstream"}, layout: pinned, concurrency: 32},
		rows: []row{
			{direct, sample{requests: 1000, rps: 1000, p50: time.Millisecond, p99: 4 * time.Millisecond, gwP50: nan, cores: nan, rssMiB: nan, spread: 0.03, redisCores: nan, pgCores: nan}},
			{plainproxy, sample{requests: 1000, rps: 500, p50: 2 * time.Millisecond, p99: 5 * time.Millisecond, gwP50: nan, cores: 0.9, rssMiB: 14.5, redisCores: nan, pgCores: nan}},
			{bare, sample{requests: 1000, rps: 480, p50: 2 * time.Millisecond, p99: 5500 * time.Microsecond, gwP50: 0.02, cores: 0.9, rssMiB: 20, redisCores: nan, pgCores: nan}},
			{full, sample{requests: 1000, failed: 2, errs: map[string]int{"HTTP 429: slow down": 2}, rps: 470, p50: 2 * time.Millisecond, p99: 6 * time.Millisecond, gwP50: 0.051, cores: 1.1, rssMiB: 22, other: 0.3, spread: 0.12, spilled: 0.0123, redisCores: nan, pgCores: nan}},
			{redisMode, sample{requests: 1000, rps: 400, p50: 2 * time.Millisecond, p99: 7 * time.Millisecond, gwP50: 0.06, cores: 1.0, rssMiB: 25, redisScripts: 2, redisCmds: 14, redisCores: 0.0108, pgCores: 0.0048}},
		},
	}
	var b bytes.Buffer
	writeTable(&b, c)
	writeRatios(&b, []cell{c})
	writeVerdicts(&b, []cell{c}, 3)
	out := b.String()
	for _, want := range []string{
		"## pinned, nonstream, 32 concurrent clients",
		"| gatehouse full   |  470 |   2.00 |   6.00 |     0.051 |      1.10 |     2340.4 |                - |                     - |         22.0 |         94.0% |   97.9% |     47.0% |                 +1.00 | 2 (0.20%) |        12% |       0.30 |",
		"| direct           | 1000 |   1.00 |   4.00 |         - |         - |          - |                - |                     - |            - |        200.0% |  208.3% |    100.0% |                     - |         0 |         3% |       0.00 |",
		"| gatehouse redis  |  400 |   2.00 |   7.00 |     0.060 |      1.00 |     2500.0 |             27.0 |                  12.0 |         25.0 |         80.0% |   83.3% |     40.0% |                 +2.00 |         0 |         0% |       0.00 |",
		"Failures of gatehouse full — over 0.1%: NOT A MEASUREMENT",
		"gatehouse full spilled usage records to disk: 1.23% of its requests' in its worst round.",
		"- 2 × HTTP 429: slow down",
		"| pinned nonstream c=32 |                 0.94× |                    +1.00 |                     1.30× |           0.98× |                   - |                    - |            0.85× |                2.00 |            14.00 |",
		"- pinned nonstream c=32: gatehouse full / plainproxy throughput = 0.94× (goal ≥ 1.00×) MISSED; p99 +1.00 ms vs plainproxy (goal ≤ +0.00) MISSED; proxy CPU per request 2340.4 vs 1800.0 µs",
		"- pinned nonstream c=32: gatehouse full / bare throughput = 97.9% (goal ≥ 97%) met; p99 added = +0.50 ms (goal ≤ 1 ms) met",
		"; gatehouse CPU per request 2500.0 vs 2340.4 µs (93.6% of embedded's requests a core); Redis 27.0 µs and PostgreSQL 12.0 µs of CPU a request; gatehouse full spilled",
		"- NOISY: other processes used up to 0.30 cores during a run (rps spread between runs up to 12%).",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q; got:\n%s", want, out)
		}
	}
	if !c.tooManyErrors() {
		t.Error("tooManyErrors() = false with 0.2% failed")
	}
}

// Each of issue 16's goals, met and missed, and where it does not apply.
func TestVerdicts(t *testing.T) {
	ms := time.Millisecond
	mk := func(stream bool, rows ...row) cell {
		return cell{spec: runSpec{scenario: scenario{name: "x", stream: stream}, layout: unpinned, concurrency: 256}, rows: rows}
	}
	rate := func(c cell, perSecond int) cell {
		c.spec.rate = perSecond
		return c
	}
	tests := []struct {
		name string
		c    cell
		want []string
	}{
		{
			name: "full beats plainproxy",
			c:    mk(false, row{plainproxy, sample{rps: 1000, p99: 5 * ms, cores: 0.049}}, row{full, sample{rps: 1010, p99: 5 * ms, cores: 0.05353}}),
			want: []string{"gatehouse full / plainproxy throughput = 1.01× (goal ≥ 1.00×) met; p99 +0.00 ms vs plainproxy (goal ≤ +0.00) met; proxy CPU per request 53.0 vs 49.0 µs"},
		},
		{
			name: "p99 worse",
			c:    mk(false, row{plainproxy, sample{rps: 1000, p99: 5 * ms, cores: math.NaN()}}, row{full, sample{rps: 1010, p99: 6 * ms}}),
			want: []string{"gatehouse full / plainproxy throughput = 1.01× (goal ≥ 1.00×) met; p99 +1.00 ms vs plainproxy (goal ≤ +0.00) MISSED"},
		},
		{
			name: "streams are informational",
			c:    mk(true, row{plainproxy, sample{rps: 1000, p99: 5 * ms, cores: 0.5}}, row{full, sample{rps: 900, p99: 6 * ms, cores: 0.5}}),
			want: []string{"gatehouse full / plainproxy throughput = 0.90× (goal ≥ 1.00×), p99 +1.00 ms; proxy CPU per request 555.6 vs 500.0 µs: informational, the goal is for non-streaming"},
		},
		{
			name: "cache hit fast and twice the misses",
			c:    mk(false, row{cacheHits, sample{rps: 2000, p50: 400 * time.Microsecond, gwP50: 0.12}}, row{cacheMisses, sample{rps: 1000}}),
			want: []string{"cache hit p50 inside the gateway = 0.120 ms (goal ≤ 0.3 ms) met; at the client 0.400 ms; hit / miss throughput = 2.00× (goal ≥ 2.00×) met"},
		},
		{
			name: "cache hit slow",
			c:    mk(false, row{cacheHits, sample{rps: 1500, gwP50: 0.31}}, row{cacheMisses, sample{rps: 1000}}),
			want: []string{"cache hit p50 inside the gateway = 0.310 ms (goal ≤ 0.3 ms) MISSED; at the client 0.000 ms; hit / miss throughput = 1.50× (goal ≥ 2.00×) MISSED"},
		},
		{
			name: "redis mode",
			c:    mk(false, row{full, sample{rps: 1000}}, row{redisMode, sample{rps: 790, redisScripts: 2, redisCmds: 14, redisCores: 0.0214, pgCores: 0.00932}}),
			want: []string{"Redis mode / embedded throughput = 79.0% (goal ≥ 80%) MISSED; per request 2.00 Redis script calls, 14.00 commands in all (those scripts ran included); Redis 27.1 µs and PostgreSQL 11.8 µs of CPU a request"},
		},
		{
			name: "redis mode met",
			c:    mk(false, row{full, sample{rps: 1000}}, row{redisMode, sample{rps: 800, redisScripts: 1, redisCmds: 1, redisCores: math.NaN(), pgCores: math.NaN()}}),
			want: []string{"Redis mode / embedded throughput = 80.0% (goal ≥ 80%) met; per request 1.00 Redis script calls, 1.00 commands in all (those scripts ran included)"},
		},
		{
			name: "leases",
			c:    mk(false, row{full, sample{rps: 1000}}, row{leaseMode, sample{rps: 950, redisScripts: 0.0004, redisCmds: 0.01, redisCores: 0.00019, pgCores: 0.0095}}),
			want: []string{"Redis mode with leases / embedded throughput = 95.0%; per request 0.0004 Redis script calls, 0.0100 commands in all; Redis 0.2 µs and PostgreSQL 10.0 µs of CPU a request"},
		},
		{
			name: "redis mode while spilling",
			c:    mk(false, row{full, sample{rps: 1000, cores: 0.08}}, row{redisMode, sample{rps: 600, redisScripts: 1, redisCmds: 1, spilled: 0.25, cores: 0.06, redisCores: 0.018, pgCores: 0.012}}),
			want: []string{"Redis mode / embedded throughput = 60.0% (goal ≥ 80%) NOT JUDGED (records spilled: the database's work for them fell after the run); per request 1.00 Redis script calls, 1.00 commands in all (those scripts ran included); gatehouse CPU per request 100.0 vs 80.0 µs (80.0% of embedded's requests a core); Redis 30.0 µs and PostgreSQL 20.0 µs of CPU a request; gatehouse redis spilled usage records: 25.00% (not a steady state: see its table)"},
		},
		{
			// A database that starts cold may fall behind for a moment:
			// up to maxSpilledJudged, the goal is judged.
			name: "redis mode spilling a little",
			c:    mk(false, row{full, sample{rps: 1000}}, row{redisMode, sample{rps: 850, redisScripts: 1, redisCmds: 1, spilled: 0.005, redisCores: math.NaN(), pgCores: math.NaN()}}),
			want: []string{"Redis mode / embedded throughput = 85.0% (goal ≥ 80%) met; per request 1.00 Redis script calls, 1.00 commands in all (those scripts ran included); gatehouse redis spilled usage records: 0.50% (not a steady state: see its table)"},
		},
		{
			name: "two builds in cluster mode",
			c: mk(false, row{redisMode, sample{rps: 1100, cores: 0.88, redisCores: 0.022, pgCores: 0.011}},
				row{baseRedis, sample{rps: 1000, cores: 0.9, redisCores: 0.02, pgCores: 0.012}}),
			want: []string{"gatehouse redis / base gatehouse redis throughput = 1.10×; CPU per request 0.89×, Redis's 1.00×, PostgreSQL's 0.83× (two builds in cluster mode: informational)"},
		},
		{
			name: "open loop: full's p99 against plainproxy's and bare's at one rate",
			c: rate(mk(false, row{plainproxy, sample{rps: 995, p99: 5 * ms, cores: 0.049}}, row{bare, sample{rps: 1000, p99: 4 * ms, cores: math.NaN()}},
				row{full, sample{rps: 990, p99: 4500 * time.Microsecond, cores: 0.0396}}), 1000),
			want: []string{
				"gatehouse full p99 -0.50 ms vs plainproxy at 1000 requests a second (goal ≤ +0.00) met; proxy CPU per request 40.0 vs 49.2 µs",
				"gatehouse full p99 +0.50 ms vs gatehouse --bare at 1000 requests a second (goal ≤ 1 ms) met",
			},
		},
		{
			name: "open loop: a target that fell behind is not judged",
			c:    rate(mk(false, row{plainproxy, sample{rps: 900, p99: 5 * ms}}, row{full, sample{rps: 1000, p99: 4 * ms}}), 1000),
			want: []string{"gatehouse full p99 -1.00 ms vs plainproxy at 1000 requests a second (goal ≤ +0.00): not judged, a target did not keep up with the rate"},
		},
		{
			name: "open loop: p99 worse, streams informational, no throughput goals",
			c: rate(mk(true, row{plainproxy, sample{rps: 1000, p99: 5 * ms}}, row{full, sample{rps: 1000, p99: 6 * ms, cores: math.NaN()}},
				row{cacheHits, sample{rps: 1000, gwP50: 0.1}}, row{cacheMisses, sample{rps: 1000}}, row{redisMode, sample{rps: 1000}}), 1000),
			want: []string{
				"gatehouse full p99 +1.00 ms vs plainproxy at 1000 requests a second: informational, the goal is for non-streaming",
				"cache hit p50 inside the gateway = 0.100 ms (goal ≤ 0.3 ms) met; at the client 0.000 ms",
			},
		},
		{
			name: "open loop: p99 worse",
			c:    rate(mk(false, row{plainproxy, sample{rps: 1000, p99: 5 * ms}}, row{full, sample{rps: 1000, p99: 6 * ms, cores: math.NaN()}}), 1000),
			want: []string{"gatehouse full p99 +1.00 ms vs plainproxy at 1000 requests a second (goal ≤ +0.00) MISSED"},
		},
		{
			name: "nothing to compare",
			c:    mk(false, row{plainproxy, sample{rps: 1000}}, row{redisMode, sample{rps: 800}}),
			want: nil,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := verdicts(tt.c)
			if strings.Join(got, "\n") != strings.Join(tt.want, "\n") {
				t.Errorf("verdicts() =\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(tt.want, "\n"))
			}
		})
	}
}

func TestABBA(t *testing.T) {
	tests := []struct {
		n    int
		want []int
	}{
		{1, []int{0, 0}},
		{2, []int{0, 1, 1, 0}},
		{3, []int{0, 1, 2, 2, 1, 0}},
	}
	for _, tt := range tests {
		if got := benchcli.ABBA(tt.n); !slices.Equal(got, tt.want) {
			t.Errorf("benchcli.ABBA(%d) = %v, want %v", tt.n, got, tt.want)
		}
	}
}

// A drift that is linear over the round (each run 10 rps slower than the
// one before) leaves two targets equal after ABBA and the mean.
func TestABBACancelsLinearDrift(t *testing.T) {
	const base, drift = 1000.0, 10.0
	runs := map[int][]sample{}
	for pos, i := range benchcli.ABBA(2) {
		runs[i] = append(runs[i], sample{rps: base - drift*float64(pos)})
	}
	a, b := mean(runs[0]), mean(runs[1])
	if a.rps != b.rps {
		t.Errorf("after ABBA: A %v rps, B %v rps; want equal", a.rps, b.rps)
	}
}

func TestMean(t *testing.T) {
	got := mean([]sample{
		{requests: 10, failed: 1, errs: map[string]int{"x": 1}, rps: 100, p50: 2, p99: 10, gwP50: 0.1, cores: 1, rssMiB: 30, other: 0.2, redisCmds: 1, redisScripts: 4, spilled: 0.01, redisCores: 0.25, pgCores: 0.5},
		{requests: 20, errs: map[string]int{}, rps: 300, p50: 4, p99: 20, gwP50: 0.3, cores: 0.5, rssMiB: 20, other: 0.1, redisCmds: 3, redisScripts: 2, spilled: 0.5, redisCores: 0.75, pgCores: 0.25},
	})
	want := sample{requests: 30, failed: 1, rps: 200, p50: 3, p99: 15, gwP50: 0.2, cores: 0.75, rssMiB: 30, other: 0.2, redisCmds: 2, redisScripts: 3, spilled: 0.5, redisCores: 0.5, pgCores: 0.375}
	got.errs = nil
	if math.Abs(got.gwP50-want.gwP50) > 1e-9 {
		t.Errorf("gwP50 = %v, want %v", got.gwP50, want.gwP50)
	}
	got.gwP50 = want.gwP50
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("mean() = %+v\nwant %+v", got, want)
	}
	none := sample{cores: math.NaN(), spilled: math.NaN(), redisCores: math.NaN(), pgCores: math.NaN()}
	if nan := mean([]sample{none, none}); !math.IsNaN(nan.cores) || !math.IsNaN(nan.spilled) || !math.IsNaN(nan.redisCores) || !math.IsNaN(nan.pgCores) {
		t.Errorf("mean of NaN cores, spills, Redis and PostgreSQL cores = %v, %v, %v, %v; want NaN (no proxy, no sink, no servers)",
			nan.cores, nan.spilled, nan.redisCores, nan.pgCores)
	}
	// µs per request divide the mean cores by the mean rps, as the proxy's do.
	if r, p := got.redisPerRequest(), got.pgPerRequest(); r != 2500 || p != 1875 {
		t.Errorf("Redis, PostgreSQL µs/req = %v, %v; want 2500, 1875", r, p)
	}
}

func TestParseAffinity(t *testing.T) {
	tests := []struct {
		in      string
		want    []int
		wantErr bool
	}{
		{"pid 42's current affinity list: 0,1\n", []int{0, 1}, false},
		{"pid 42's current affinity list: 0-3,6\n", []int{0, 1, 2, 3, 6}, false},
		{"pid 42's current affinity list: 5\n", []int{5}, false},
		{"pid 42's current affinity mask: 3\n", nil, true},
		{"pid 42's current affinity list: 3-1\n", nil, true},
		{"pid 42's current affinity list: a\n", nil, true},
	}
	for _, tt := range tests {
		got, err := parseAffinity(tt.in)
		if (err != nil) != tt.wantErr || !slices.Equal(got, tt.want) {
			t.Errorf("parseAffinity(%q) = %v, %v; want %v (error %t)", tt.in, got, err, tt.want, tt.wantErr)
		}
	}
}

func TestPlace(t *testing.T) {
	p, err := place(pinned, []int{2, 3, 4})
	if err != nil {
		t.Fatal(err)
	}
	if p.proxy.CPUs != "2" || p.load.CPUs != "3" || p.harnessCPUs != "3" || p.harnessProcs != 1 ||
		!slices.Equal(p.proxy.Env, []string{"GOMAXPROCS=1"}) || !slices.Equal(p.load.Env, []string{"GOMAXPROCS=1"}) {
		t.Errorf("pinned = %+v", p)
	}
	u, err := place(unpinned, []int{2, 3, 4})
	if err != nil {
		t.Fatal(err)
	}
	if u.proxy.CPUs != "" || u.load.CPUs != "" || u.harnessCPUs != "2,3,4" || u.harnessProcs != 0 ||
		!slices.Equal(u.proxy.Env, []string{"GOMAXPROCS=2"}) {
		t.Errorf("unpinned = %+v", u)
	}
	if _, err := place(pinned, []int{0}); err == nil {
		t.Error("pinned on one CPU: no error")
	}
	if _, err := place("sideways", []int{0, 1}); err == nil {
		t.Error("unknown layout: no error")
	}
}

func TestParseCommandStats(t *testing.T) {
	info := "# Commandstats\r\ncmdstat_evalsha:calls=120,usec=900,usec_per_call=7.50,rejected_calls=0,failed_calls=0\r\n" +
		"cmdstat_info:calls=7,usec=70,usec_per_call=10.00\r\ncmdstat_hello:calls=3,usec=3\r\n"
	got, err := parseCommandStats(info)
	if want := map[string]uint64{"evalsha": 120, "hello": 3}; err != nil || !maps.Equal(got, want) {
		t.Errorf("parseCommandStats() = %v, %v; want %v (INFO's own calls left out)", got, err, want)
	}
	total, scripts, top := perRequest(map[string]uint64{"evalsha": 20, "hello": 3}, map[string]uint64{"evalsha": 120, "hello": 3, "get": 50}, 100)
	if total != 1.5 || scripts != 1 || top != "evalsha 1.00, get 0.50" {
		t.Errorf("perRequest() = %v, %v, %q; want 1.5, 1, \"evalsha 1.00, get 0.50\"", total, scripts, top)
	}
	if total, _, _ := perRequest(nil, nil, 0); !math.IsNaN(total) {
		t.Errorf("perRequest with no requests = %v, want NaN", total)
	}
	if _, err := parseCommandStats("cmdstat_get:calls=x,usec=1\r\n"); err == nil {
		t.Error("parseCommandStats with a bad count: no error")
	}
}

func TestParseCounter(t *testing.T) {
	exp := "# HELP gatehouse_usage_records_spilled_total Usage records written to the spill file.\n" +
		"# TYPE gatehouse_usage_records_spilled_total counter\ngatehouse_usage_records_spilled_total_x 9\n" +
		"gatehouse_usage_records_spilled_total 1234\ngatehouse_usage_records_written_total 5e+06\n"
	if v, err := parseCounter(exp, spilledMetric); err != nil || v != 1234 {
		t.Errorf("parseCounter(spilled) = %v, %v; want 1234", v, err)
	}
	if v, err := parseCounter(exp, "gatehouse_usage_records_written_total"); err != nil || v != 5e6 {
		t.Errorf("parseCounter(written) = %v, %v; want 5e6", v, err)
	}
	if _, err := parseCounter(exp, "gatehouse_nothing"); err == nil {
		t.Error("parseCounter of a missing counter: no error")
	}
}

// treeTicks sums a process tree on a fake procfs: the root's own ticks
// and its reaped children's, and its live descendants' at any depth, but
// nothing outside the tree.
func TestTreeTicks(t *testing.T) {
	dir := t.TempDir()
	write := func(pid, ppid int, utime, stime, cutime, cstime uint64) {
		d := filepath.Join(dir, fmt.Sprint(pid))
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
		line := fmt.Sprintf("%d (postgres) S %d %d %d 0 -1 4194560 0 0 0 0 %d %d %d %d 20 0 1 0 100 0 0\n",
			pid, ppid, pid, pid, utime, stime, cutime, cstime)
		if err := os.WriteFile(filepath.Join(d, "stat"), []byte(line), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write(1, 0, 1000, 1000, 1000, 1000)         // init: the root's parent
	write(100, 1, 30, 10, 500, 100)             // the postmaster, with exited backends
	write(101, 100, 7, 3, 0, 0)                 // a live backend
	write(102, 100, 50, 20, 0, 0)               // another
	write(103, 102, 1, 1, 0, 0)                 // a grandchild
	write(200, 1, 999, 999, 999, 999)           // redis-server: not in the tree
	for _, d := range []string{"self", "104"} { // not a pid; a process gone since the listing
		if err := os.Mkdir(filepath.Join(dir, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if got, err := treeTicks(dir, 100); err != nil || got != 640+10+70+2 {
		t.Errorf("treeTicks(postmaster) = %d, %v; want 722", got, err)
	}
	if got, err := treeTicks(dir, 101); err != nil || got != 10 {
		t.Errorf("treeTicks(backend) = %d, %v; want 10", got, err)
	}
	if _, err := treeTicks(dir, 105); err == nil {
		t.Error("treeTicks of a missing root: no error")
	}
}

// A child that has exited and been reaped still counts: the kernel adds
// its CPU to this process's cutime and cstime, which treeCPU reads.
func TestTreeCPUCountsReapedChildren(t *testing.T) {
	before, err := treeCPU(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("sh", "-c", "i=0; while [ $i -lt 100000 ]; do i=$((i+1)); done")
	if err := cmd.Run(); err != nil {
		t.Fatal(err)
	}
	child := cmd.ProcessState.UserTime() + cmd.ProcessState.SystemTime()
	after, err := treeCPU(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	// Each of the four tick counts is rounded down.
	if slack := 4 * time.Second / clockTicks; after-before < child-slack {
		t.Errorf("treeCPU grew by %s while a child used %s and exited", after-before, child)
	}
}

func TestGatehouseConfig(t *testing.T) {
	embedded := gatehouseConfig{listen: "127.0.0.1:1", mockAddr: "127.0.0.1:2", sqlite: "/tmp/x.db", limits: true}.yaml()
	cluster := gatehouseConfig{listen: "127.0.0.1:1", mockAddr: "127.0.0.1:2", redis: "redis://127.0.0.1:3/0",
		postgres: "postgres://bench@127.0.0.1:4/postgres?sslmode=disable", spill: "/tmp/spill", limits: true}.yaml()
	for _, tt := range []struct{ yaml, want string }{
		{embedded, "storage: {sqlite: /tmp/x.db}\n"},
		{embedded, "rpm: 100000000, tpm: 1000000000000, budget: {usd: 1000000000, period: total}"},
		{embedded, "exact: {enabled: false}"},
		// Cluster mode needs both: Redis alone would leave gatehouse embedded.
		{cluster, "storage: {redis: 'redis://127.0.0.1:3/0', postgres: 'postgres://bench@127.0.0.1:4/postgres?sslmode=disable'}\n"},
		{cluster, "usage: {spill_dir: /tmp/spill}\n"},
	} {
		if !strings.Contains(tt.yaml, tt.want) {
			t.Errorf("config lacks %q:\n%s", tt.want, tt.yaml)
		}
	}
	if strings.Contains(cluster, "sqlite") {
		t.Errorf("cluster config names SQLite:\n%s", cluster)
	}
}

func TestParseFlags(t *testing.T) {
	o, err := parseFlags([]string{"-mockllm", "m", "-gatehouse", "g"})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(o.layouts, []string{pinned, unpinned}) || !slices.Equal(o.concurrency, []int{32, 256}) ||
		len(o.scenarios) != 2 || o.Rounds != 3 || o.duration != 5*time.Second {
		t.Errorf("defaults = layouts %v, concurrency %v, %d scenarios, %d rounds, %s", o.layouts, o.concurrency, len(o.scenarios), o.Rounds, o.duration)
	}
	for _, name := range []string{plainproxy, bare, full, cacheHits, cacheMisses, redisMode} {
		if !o.targets[name] {
			t.Errorf("default targets lack %q", name)
		}
	}
	q, err := parseFlags([]string{"-mockllm", "m", "-quick", "-rounds", "2", "-layout", "unpinned"})
	if err != nil {
		t.Fatal(err)
	}
	if q.duration != time.Second || q.Rounds != 2 || !slices.Equal(q.layouts, []string{unpinned}) || q.targets[full] {
		t.Errorf("-quick -rounds 2 without -gatehouse = %s, %d rounds, layouts %v, full %t", q.duration, q.Rounds, q.layouts, q.targets[full])
	}
	if q.rate != 0 {
		t.Errorf("rate %d by default, want 0 (the closed loop)", q.rate)
	}
	r, err := parseFlags([]string{"-mockllm", "m", "-rate", "4000"})
	if err != nil || r.rate != 4000 {
		t.Errorf("-rate 4000: rate %d, %v", r.rate, err)
	}
	for _, bad := range [][]string{
		{"-mockllm", "m", "-rate", "-1"},
		{"-mockllm", "m", "-layout", "diagonal"},
		{"-mockllm", "m", "-targets", "full,nginx"},
		{"-mockllm", "m", "-layout", ""},
		{"-gatehouse", "g"},
	} {
		if _, err := parseFlags(bad); err == nil {
			t.Errorf("parseFlags(%q): no error", bad)
		}
	}
}

func TestCommandLine(t *testing.T) {
	got := commandLine([]string{"benchrun", "-gatehouse", "../bin/gatehouse", "-targets", "full,redis", "-out", "my report.md", "-x", "it's"})
	want := `benchrun -gatehouse ../bin/gatehouse -targets full,redis -out 'my report.md' -x 'it'\''s'`
	if got != want {
		t.Errorf("commandLine() = %s, want %s", got, want)
	}
}

func TestRequestBody(t *testing.T) {
	nonstream, stream := requestBody(scenario{}), requestBody(scenario{stream: true})
	withUsage := requestBody(scenario{stream: true, usage: true})
	if bytes.Contains(nonstream, []byte(`"stream"`)) || !bytes.Contains(stream, []byte(`"stream":true`)) {
		t.Errorf("stream flag wrong:\n%s\n%s", nonstream, stream)
	}
	if bytes.Contains(stream, []byte("include_usage")) || !bytes.Contains(withUsage, []byte(`"stream_options":{"include_usage":true}`)) {
		t.Errorf("include_usage wrong:\n%s\n%s", stream, withUsage)
	}
	if n := len(nonstream); n < 300 || n > 450 {
		t.Errorf("body is %d bytes, want a ~300-byte prompt", n)
	}
}

func TestSpreadOf(t *testing.T) {
	// The spread is over every run, so one round (two runs) has one.
	if got := spreadOf([]float64{900, 1100}); got != 0.2 {
		t.Errorf("spreadOf(900, 1100) = %v, want 0.2", got)
	}
	if got := spreadOf([]float64{100, 300, 200, 200}); got != 1 {
		t.Errorf("spreadOf(100, 300, 200, 200) = %v, want 1", got)
	}
	if got := spreadOf(nil); got != 0 {
		t.Errorf("spreadOf(nil) = %v, want 0", got)
	}
}

// The header names the exact command, where it ran, and the code measured.
func TestWriteHeader(t *testing.T) {
	o := options{duration: 5 * time.Second, warmup: time.Second, layouts: []string{pinned, unpinned},
		command: []string{"go", "run", "./cmd/benchrun", "-gatehouse", "../bin/gatehouse", "-quick"},
		dir:     "/src/gatehouse/bench", version: "gatehouse dev (commit abc123, go1.26 linux/amd64)"}
	o.Rounds = 3
	var b bytes.Buffer
	writeHeader(&b, o, []string{plainproxy, full})
	out := b.String()
	for _, want := range []string{
		"    cd /src/gatehouse/bench && go run ./cmd/benchrun -gatehouse ../bin/gatehouse -quick\n",
		"Measuring gatehouse dev (commit abc123, go1.26 linux/amd64).",
		"targets: plainproxy, gatehouse full",
		"median of 3 rounds",
		"- pinned: the proxy alone on one CPU",
		"- unpinned: no pinning; the proxy at GOMAXPROCS=2.",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("header lacks %q; got:\n%s", want, out)
		}
	}
}

// base-full is full served by the -base binary; the ratio table sets the
// two builds side by side.
func TestBaseFull(t *testing.T) {
	if _, err := parseFlags([]string{"-mockllm", "m", "-gatehouse", "g", "-targets", "plainproxy,full,base-full"}); err == nil {
		t.Error("-targets base-full without -base: no error")
	}
	o, err := parseFlags([]string{"-mockllm", "m", "-gatehouse", "g", "-base", "main-gatehouse", "-targets", "plainproxy,full,base-full"})
	if err != nil {
		t.Fatal(err)
	}
	if !o.targets[baseFull] || !filepath.IsAbs(o.base) || filepath.Base(o.base) != "main-gatehouse" {
		t.Errorf("-base main-gatehouse: targets %v, base %q", o.targets, o.base)
	}
	c := cell{
		spec: runSpec{scenario: scenario{name: "nonstream"}, layout: unpinned, concurrency: 32},
		rows: []row{
			{plainproxy, sample{requests: 1000, rps: 1000, cores: 0.5}},
			{full, sample{requests: 1000, rps: 900, cores: 0.5}},
			{baseFull, sample{requests: 1000, rps: 800, cores: 0.5}},
		},
	}
	var b bytes.Buffer
	writeRatios(&b, []cell{c})
	// base full / plainproxy, full / base full in rps and in CPU per
	// request (the same cores, more requests: less CPU each).
	if want := "|                      0.80× |                1.12× |                    0.89× |"; !strings.Contains(b.String(), want) {
		t.Errorf("ratios lack %q:\n%s", want, b.String())
	}
}

// An open-loop run says so in its header, names its rate in each table's
// title, and marks a target that fell behind the rate.
func TestOpenLoopReport(t *testing.T) {
	o := options{duration: 5 * time.Second, warmup: time.Second, layouts: []string{pinned}, rate: 4000}
	o.Rounds = 3
	nan := math.NaN()
	c := cell{
		spec: runSpec{scenario: scenario{name: "nonstream"}, layout: pinned, concurrency: 32, rate: 4000},
		rows: []row{
			{plainproxy, sample{requests: 20000, rps: 3990, p99: 5 * time.Millisecond, gwP50: nan, cores: 0.5, rssMiB: 14, redisCores: nan, pgCores: nan}},
			{full, sample{requests: 17000, rps: 3400, p99: 4 * time.Millisecond, gwP50: 0.02, cores: 0.9, rssMiB: 20, redisCores: nan, pgCores: nan}},
		},
	}
	var b bytes.Buffer
	writeHeader(&b, o, []string{plainproxy, full})
	writeTable(&b, c)
	writeVerdicts(&b, []cell{c}, 3)
	out := b.String()
	for _, want := range []string{
		"Open loop: 4000 requests a second sent to each target whatever its answers",
		"## pinned, nonstream, 4000 requests a second, at most 32 in flight",
		"gatehouse full did not keep up with 4000 requests a second (it answered 3400)",
		"- pinned nonstream c=32 rate=4000/s: gatehouse full p99 -1.00 ms vs plainproxy at 4000 requests a second (goal ≤ +0.00): not judged",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("report lacks %q; got:\n%s", want, out)
		}
	}
	if strings.Contains(out, "plainproxy did not keep up") {
		t.Errorf("plainproxy answered 99.75%% of the rate and is marked as behind:\n%s", out)
	}
}
