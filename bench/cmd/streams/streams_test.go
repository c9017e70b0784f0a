package main

import (
	"errors"
	"math"
	"strings"
	"testing"
	"testing/iotest"
	"time"

	"gatehouse/bench/internal/benchcli"
)

func TestParseStatus(t *testing.T) {
	text := "Name:\tgatehouse\nVmPeak:\t 1000 kB\nVmHWM:\t   20480 kB\nVmRSS:\t    10240 kB\nThreads:\t9\n"
	m, err := parseStatus(text)
	if err != nil {
		t.Fatal(err)
	}
	if m.rss != 10240<<10 || m.hwm != 20480<<10 {
		t.Fatalf("got rss %d hwm %d", m.rss, m.hwm)
	}
	for _, bad := range []string{
		"Name:\tkthreadd\nThreads:\t1\n", // kernel threads have no Vm lines
		"VmHWM:\t 1 kB\nVmRSS:\t x kB\n", // not a number
		"VmHWM:\t 1 MB\nVmRSS:\t 1 kB\n", // another unit
		"VmRSS:\t 1 kB\n",                // one of two
	} {
		if _, err := parseStatus(bad); err == nil {
			t.Errorf("parseStatus(%q) = nil error", bad)
		}
	}
}

func TestReadEvents(t *testing.T) {
	const complete = "data: {\"a\":1}\n\n: comment\n\ndata: {\"b\":2}\n\ndata: [DONE]\n\n"
	tests := []struct {
		name   string
		body   string
		events int
		done   bool
		err    bool
	}{
		{"complete", complete, 2, true, false},
		{"no done", "data: {}\n\ndata: {}\n\n", 2, false, false},
		{"event after done", "data: {}\n\ndata: [DONE]\n\ndata: {}\n\n", 1, false, true},
		{"empty", "", 0, false, false},
		{"no space", "data:{}\n\ndata:[DONE]\n\n", 1, true, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			firsts := 0
			// One byte at a time: events split across reads must count once.
			events, done, err := readEvents(iotest.OneByteReader(strings.NewReader(tc.body)), func() { firsts++ })
			if events != tc.events || done != tc.done || (err != nil) != tc.err {
				t.Fatalf("got %d events, done %t, err %v; want %d, %t, err %t", events, done, err, tc.events, tc.done, tc.err)
			}
			if want := min(1, tc.events+btoi(tc.done)); firsts != want {
				t.Fatalf("first called %d times, want %d", firsts, want)
			}
		})
	}
	if _, _, err := readEvents(iotest.ErrReader(errors.New("reset")), nil); err == nil {
		t.Fatal("a read error was not reported")
	}
}

func btoi(b bool) int {
	if b {
		return 1
	}
	return 0
}

func TestPercentile(t *testing.T) {
	var d []time.Duration
	for i := 1; i <= 100; i++ {
		d = append(d, time.Duration(i)*time.Millisecond)
	}
	if got := percentile(d, 0.99); got != 99*time.Millisecond {
		t.Errorf("p99 of 1..100 ms = %s", got)
	}
	if got := percentile(d, 0.5); got != 50*time.Millisecond {
		t.Errorf("p50 of 1..100 ms = %s", got)
	}
	if got := percentile(d[:1], 0.99); got != time.Millisecond {
		t.Errorf("p99 of one = %s", got)
	}
	if got := percentile(nil, 0.99); got != 0 {
		t.Errorf("p99 of none = %s", got)
	}
}

func TestMedian(t *testing.T) {
	xs := []float64{5, 1, 3}
	if got := median(xs); got != 3 {
		t.Errorf("median(5,1,3) = %g", got)
	}
	if xs[0] != 5 {
		t.Error("median sorted its argument")
	}
	if got := median([]float64{4, 1, 3, 2}); got != 2.5 {
		t.Errorf("median(4,1,3,2) = %g", got)
	}
	if !math.IsNaN(median(nil)) {
		t.Error("median of none is not NaN")
	}
}

func TestABBA(t *testing.T) {
	got := benchcli.ABBA(3)
	want := []int{0, 1, 2, 2, 1, 0}
	if len(got) != len(want) {
		t.Fatalf("benchcli.ABBA(3) = %v", got)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("benchcli.ABBA(3) = %v, want %v", got, want)
		}
	}
}

func TestParseCounts(t *testing.T) {
	got, err := parseCounts(" 1000, 10000,")
	if err != nil || len(got) != 2 || got[0] != 1000 || got[1] != 10000 {
		t.Fatalf("parseCounts = %v, %v", got, err)
	}
	for _, bad := range []string{"", "0", "-5", "ten", ","} {
		if _, err := parseCounts(bad); err == nil {
			t.Errorf("parseCounts(%q) accepted", bad)
		}
	}
}

func TestParseTargets(t *testing.T) {
	got, err := parseTargets("plainproxy, full+GOGC=50+GOMEMLIMIT=1GiB,before,before-h1")
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 4 || got[1].kind != kindFull || got[1].name != "full+GOGC=50+GOMEMLIMIT=1GiB" ||
		len(got[1].env) != 2 || got[1].env[1] != "GOMEMLIMIT=1GiB" || got[2].kind != kindBefore || got[3].kind != kindBeforeH1 {
		t.Fatalf("parseTargets = %+v", got)
	}
	if got, err := parseTargets("before-h1"); err != nil || got[0].kind != kindBeforeH1 {
		t.Fatalf("parseTargets(before-h1) = %+v, %v", got, err)
	}
	for _, bad := range []string{"", "nginx", "full+GOGC", "full+=1", "full,full"} {
		if _, err := parseTargets(bad); err == nil {
			t.Errorf("parseTargets(%q) accepted", bad)
		}
	}
}

func TestVerdicts(t *testing.T) {
	base := row{name: kindPlain, perStream: 60, p99: 500, probeP99: 10, probesMin: minProbes}
	good := row{name: kindFull, perStream: 59, p99: 900, probeP99: 10.9, probesMin: 150, runs: 6}
	bad := row{name: kindFull, perStream: 61, p99: 400, probeP99: 11.1, probesMin: minProbes, probesFailed: 1, runs: 6}
	for _, l := range verdicts(1000, base, good) {
		if !strings.HasSuffix(l, " met") {
			t.Errorf("good row: %s", l)
		}
	}
	for _, l := range verdicts(1000, base, bad) {
		if !strings.HasSuffix(l, "MISSED") {
			t.Errorf("bad row: %s", l)
		}
	}
	// Too few probes in some run: the TTFE goal is not judged either way.
	few := good
	few.probesMin = minProbes - 1
	if l := verdicts(1000, base, few)[2]; !strings.Contains(l, "NOT MEASURED") {
		t.Errorf("a run with %d probes: %s", few.probesMin, l)
	}
	if l := verdicts(1000, row{name: kindPlain, probesMin: 3}, good)[2]; !strings.Contains(l, "NOT MEASURED") {
		t.Errorf("plainproxy with 3 probes: %s", l)
	}
}
