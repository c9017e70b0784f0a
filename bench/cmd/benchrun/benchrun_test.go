package main

import (
	"bytes"
	"math"
	"os"
	"strings"
	"testing"
	"time"
)

func TestParseStatCPU(t *testing.T) {
	tests := []struct {
		name, line string
		want       uint64
		wantErr    bool
	}{
		{
			name: "plain",
			line: "15894 (sleep) S 15892 15892 5259 0 -1 4194304 132 0 0 0 7 3 0 0 20 0 1 0 506164 2990080 389 18446744073709551615\n",
			want: 10,
		},
		{
			// The command name may hold spaces and ')' and is cut at 15 bytes.
			name: "tricky command name",
			line: "42 (my ) proc (x)) R 1 42 42 0 -1 4194560 10 0 0 0 1234 567 0 0 20 0 9 0 100 0 0",
			want: 1801,
		},
		{name: "truncated", line: "42 (x) R 1 42 42 0 -1 4194560 10 0 0", wantErr: true},
		{name: "no name", line: "42 x R 1 2 3", wantErr: true},
		{name: "not a number", line: "42 (x) R 1 42 42 0 -1 4194560 10 0 0 0 abc 5 0 0", wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := parseStatCPU(tt.line)
			if (err != nil) != tt.wantErr {
				t.Fatalf("parseStatCPU() error = %v, wantErr %v", err, tt.wantErr)
			}
			if got != tt.want {
				t.Errorf("parseStatCPU() = %d, want %d", got, tt.want)
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
		{requests: 100, failed: 1, errs: map[string]int{"x": 1}, rps: 300, p50: 3, p99: 9, cores: 1.0, rssMiB: 20},
		{requests: 100, rps: 100, p50: 1, p99: 30, cores: 0.5, rssMiB: 30},
		{requests: 100, failed: 2, errs: map[string]int{"x": 2}, rps: 200, p50: 2, p99: 10, cores: 0.7, rssMiB: 10},
	}
	got := median(rounds)
	if got.requests != 300 || got.failed != 3 || got.errs["x"] != 3 {
		t.Errorf("counts = %d requests, %d failed, %v; want 300, 3, x:3", got.requests, got.failed, got.errs)
	}
	if got.rps != 200 || got.p50 != 2 || got.p99 != 10 || got.cores != 0.7 || got.rssMiB != 20 {
		t.Errorf("medians = %+v", got)
	}
	even := median([]sample{{rps: 100, cores: math.NaN()}, {rps: 300, cores: math.NaN()}})
	if got.spread != 1 || got.other != 0 {
		t.Errorf("noise = %v spread, %v other; want 1 (=(300−100)/200), 0", got.spread, got.other)
	}
	if even.rps != 200 || !math.IsNaN(even.cores) {
		t.Errorf("even median = %v rps, %v cores; want 200, NaN", even.rps, even.cores)
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
	c := cell{
		spec: runSpec{scenario: scenario{name: "nonstream"}, concurrency: 32},
		rows: []row{
			{direct, sample{requests: 1000, rps: 1000, p50: time.Millisecond, p99: 4 * time.Millisecond, cores: math.NaN(), rssMiB: math.NaN(), spread: 0.03}},
			{plainproxy, sample{requests: 1000, rps: 500, p50: 2 * time.Millisecond, p99: 5 * time.Millisecond, cores: 0.9, rssMiB: 14.5}},
			{bare, sample{requests: 1000, rps: 480, p50: 2 * time.Millisecond, p99: 5500 * time.Microsecond, cores: 0.9, rssMiB: 20}},
			{full, sample{requests: 1000, failed: 2, errs: map[string]int{"HTTP 429: slow down": 2}, rps: 470, p50: 2 * time.Millisecond, p99: 6 * time.Millisecond, cores: 1.1, rssMiB: 22, other: 0.3, spread: 0.12}},
		},
	}
	var b bytes.Buffer
	writeTable(&b, c, 3)
	writeVerdicts(&b, []cell{c}, 3)
	out := b.String()
	for _, want := range []string{
		"## nonstream, 32 concurrent clients",
		"| gatehouse full   |  470 |   2.00 |   6.00 |      1.10 |         22.0 |         94.0% |   97.9% |     47.0% |                 +1.00 | 2 (0.20%) |        12% |       0.30 |",
		"| direct           | 1000 |   1.00 |   4.00 |         - |            - |        200.0% |  208.3% |    100.0% |                     - |         0 |         3% |       0.00 |",
		"Failures of gatehouse full — over 0.1%: NOT A MEASUREMENT",
		"- 2 × HTTP 429: slow down",
		"- nonstream c=32: gatehouse full / plainproxy throughput = 94.0% (target ≥ 90%) met",
		"- nonstream c=32: gatehouse full / bare throughput = 97.9% (target ≥ 97%) met; p99 added = +0.50 ms (target ≤ 1 ms) met",
		"- NOISY: other processes used up to 0.30 cores during a run (rps spread between rounds up to 12%).",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q; got:\n%s", want, out)
		}
	}
	if !c.tooManyErrors() {
		t.Error("tooManyErrors() = false with 0.2% failed")
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
