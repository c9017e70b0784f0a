package main

import (
	"slices"
	"strings"
	"testing"
	"time"
)

func TestParseMetrics(t *testing.T) {
	text := `# HELP go_goroutines Number of goroutines that currently exist.
# TYPE go_goroutines gauge
go_goroutines 42
go_gc_duration_seconds{quantile="0.5"} 1.2e-05
go_gc_duration_seconds_count 17
go_memstats_heap_inuse_bytes 1.2345678e+07
process_open_fds 23
process_resident_memory_bytes 5.4e+07
gatehouse_requests_total{route="chat"} 9
`
	s, err := parseMetrics(strings.NewReader(text))
	if err != nil {
		t.Fatal(err)
	}
	want := sample{goroutines: 42, openFDs: 23, heapInuse: 12345678, rss: 54000000, gcCycles: 17}
	if s != want {
		t.Fatalf("got %+v, want %+v", s, want)
	}
	if _, err := parseMetrics(strings.NewReader("process_open_fds 3\n")); err == nil || !strings.Contains(err.Error(), "go_goroutines") {
		t.Fatalf("a missing gauge is not an error: %v", err)
	}
	if _, err := parseMetrics(strings.NewReader("go_goroutines x\n")); err == nil {
		t.Fatal("a bad value is not an error")
	}
}

func TestCountLabels(t *testing.T) {
	csvText := "request_id,time,labels\n" +
		"a,t,soak=1\n" +
		"b,t,\"env=prod;soak=2\"\n" +
		"c,t,soak=2\n" +
		"d,t,other=3\n"
	counts, err := countLabels(strings.NewReader(csvText))
	if err != nil {
		t.Fatal(err)
	}
	if len(counts) != 2 || counts[1] != 1 || counts[2] != 2 {
		t.Fatalf("counts %v", counts)
	}
	if _, err := countLabels(strings.NewReader("request_id,time\na,b\n")); err == nil {
		t.Fatal("an export without labels is accepted")
	}
	if _, err := countLabels(strings.NewReader("labels\nsoak=x\n")); err == nil {
		t.Fatal("a label that is not a number is accepted")
	}
}

func TestMatchRecords(t *testing.T) {
	c := matchRecords(map[int64]int{1: 1, 2: 2, 4: 1, 5: 1, 6: 2}, []int64{1, 2, 3}, map[int64]bool{5: true, 6: true, 7: true})
	slices.Sort(c.duplicate)
	if !slices.Equal(c.missing, []int64{3}) || !slices.Equal(c.duplicate, []int64{2, 6}) || c.unknown != 1 || c.records != 7 || c.ok() {
		t.Fatalf("%+v", c)
	}
	if c := matchRecords(map[int64]int{1: 1, 2: 1}, []int64{1, 2}, map[int64]bool{9: true}); !c.ok() {
		t.Fatalf("a clean run fails: %+v", c)
	}
}

func TestSlope(t *testing.T) {
	t0 := time.Unix(0, 0)
	var ss []sample
	for i := range 5 {
		ss = append(ss, sample{at: t0.Add(time.Duration(i) * 30 * time.Second), goroutines: 100 + 3*i})
	}
	if got := slope(ss, func(s sample) float64 { return float64(s.goroutines) }); got < 5.999 || got > 6.001 {
		t.Fatalf("slope %v, want 6 a minute", got)
	}
}

// A run passes only when every check does; each kind of leak fails it.
func TestChecks(t *testing.T) {
	clean := func() *report {
		return &report{
			baseline:    sample{goroutines: 20, openFDs: 15, heapInuse: 20 << 20},
			final:       sample{goroutines: 25, openFDs: 16, heapInuse: 24 << 20},
			reloadsSent: 3, reloadsDone: 6, failovers: 2,
			outcomes: []outcomeCount{{chat, "200", 10}, {limited, "429", 3}, {gaveUp, "gave up", 1}},
			records:  recordCheck{sent: 14, records: 14},
		}
	}
	if r := clean(); !r.passed() {
		t.Fatalf("a clean run fails:\n%s", r.markdown())
	}
	for name, spoil := range map[string]func(*report){
		"goroutines": func(r *report) { r.final.goroutines = 31 },
		"files":      func(r *report) { r.final.openFDs = 21 },
		"heap":       func(r *report) { r.final.heapInuse = 31 << 20 },
		"records":    func(r *report) { r.records.missing = []int64{4} },
		"reloads":    func(r *report) { r.reloadsDone = 2 },
		"outcome":    func(r *report) { r.outcomes = append(r.outcomes, outcomeCount{chat, "502", 1}) },
		"failovers":  func(r *report) { r.failovers = 0 },
		"no load":    func(r *report) { r.outcomes = nil },
	} {
		r := clean()
		spoil(r)
		if r.passed() {
			t.Errorf("%s: a spoilt run passes:\n%s", name, r.markdown())
		}
	}
}

func TestParseFlags(t *testing.T) {
	o, err := parseFlags([]string{"-gatehouse", "g", "-mockllm", "m", "-quick"})
	if err != nil || o.duration != 2*time.Minute || o.rate != 40 {
		t.Fatalf("%+v %v", o, err)
	}
	for _, args := range [][]string{{"-mockllm", "m"}, {"-gatehouse", "g", "-mockllm", "m", "-rate", "0"}, {"-gatehouse", "g", "-mockllm", "m", "-reload", "0s"}} {
		if _, err := parseFlags(args); err == nil {
			t.Errorf("%v accepted", args)
		}
	}
}
