package main

import (
	"bytes"
	"encoding/json"
	"slices"
	"strings"
	"testing"
	"time"
)

func TestGenerateIsDeterministic(t *testing.T) {
	for _, name := range scenarioOrder {
		sc := scenarios[name]
		a, b := generate(sc, 1), generate(sc, 1)
		if len(a) != sc.requests {
			t.Fatalf("%s: %d requests, want %d", name, len(a), sc.requests)
		}
		for i := range a {
			if a[i].promptTokens != b[i].promptTokens || !bytes.Equal(a[i].body, b[i].body) {
				t.Fatalf("%s: request %d differs between two runs with the same seed", name, i)
			}
		}
		c := generate(sc, 2)
		same := 0
		for i := range a {
			if a[i].promptTokens == c[i].promptTokens {
				same++
			}
		}
		if same == len(a) {
			t.Fatalf("%s: seed 2 gave the same sizes as seed 1", name)
		}
	}
}

func TestGenerateFollowsTheMix(t *testing.T) {
	sc := scenario{name: "t", requests: 4000, maxTokens: 16, mix: []band{{0.75, 10, 20, false}, {0.25, 1000, 8000, true}}}
	seq := generate(sc, 7)
	small, large := 0, 0
	for _, r := range seq {
		switch {
		case r.promptTokens >= 10 && r.promptTokens <= 20:
			small++
		case r.promptTokens >= 1000 && r.promptTokens <= 8000:
			large++
		default:
			t.Fatalf("size %d outside every band", r.promptTokens)
		}
	}
	if share := float64(small) / float64(len(seq)); share < 0.72 || share > 0.78 {
		t.Fatalf("small share %.3f, want about 0.75", share)
	}
	// Log-uniform: as many in 1,000–2,828 as in 2,828–8,000.
	lo := 0
	for _, r := range seq {
		if r.promptTokens >= 1000 && r.promptTokens < 2828 {
			lo++
		}
	}
	if f := float64(lo) / float64(large); f < 0.43 || f > 0.57 {
		t.Fatalf("log-uniform band: %.2f of it in its lower half (by ratio), want about 0.5", f)
	}
}

func TestChatBody(t *testing.T) {
	seq := generate(scenario{name: "t", requests: 3, maxTokens: 64, mix: []band{{1, 500, 500, false}}}, 1)
	for i, r := range seq {
		var req struct {
			Model     string `json:"model"`
			MaxTokens int    `json:"max_tokens"`
			Messages  []struct {
				Role, Content string
			} `json:"messages"`
		}
		if err := json.Unmarshal(r.body, &req); err != nil {
			t.Fatal(err)
		}
		if req.Model != benchModel || req.MaxTokens != 64 || len(req.Messages) != 1 || req.Messages[0].Role != "user" {
			t.Fatalf("request %d: %s", i, r.body)
		}
		text := req.Messages[0].Content
		if words := strings.Fields(text); len(words) != 500 || words[0] != "req"+string(rune('0'+i)) {
			t.Fatalf("request %d: %d words starting %q, want 500 starting with its index", i, len(words), words[0])
		}
		// mockllm counts (characters+3)/4 tokens: the same size.
		if n := (len(text) + 3) / 4; n < 495 || n > 505 {
			t.Fatalf("request %d: %d tokens as mockllm counts, want about 500", i, n)
		}
	}
}

func TestPercentile(t *testing.T) {
	var xs []time.Duration
	for i := 1; i <= 10; i++ {
		xs = append(xs, time.Duration(i)*time.Second)
	}
	for _, tc := range []struct {
		q    float64
		want time.Duration
	}{{0.5, 5 * time.Second}, {0.9, 9 * time.Second}, {0.99, 10 * time.Second}, {0, time.Second}, {1, 10 * time.Second}} {
		if got := percentile(xs, tc.q); got != tc.want {
			t.Errorf("percentile(%v) = %v, want %v", tc.q, got, tc.want)
		}
	}
	if percentile(nil, 0.5) != 0 {
		t.Error("percentile of nothing")
	}
}

func TestSummarise(t *testing.T) {
	ms := func(n int) time.Duration { return time.Duration(n) * time.Millisecond }
	runs := []pass{
		{results: []result{{latency: ms(100)}, {latency: ms(300)}, {err: "HTTP 500"}}, wall: time.Second, skew: 1.5},
		{results: []result{{latency: ms(200)}, {latency: ms(400)}, {latency: ms(600)}}, wall: time.Second, skew: 2.5},
	}
	s := summarise("x", runs)
	if s.requests != 6 || s.failed != 1 || s.errs["HTTP 500"] != 1 {
		t.Fatalf("counts: %+v", s)
	}
	if s.avg != ms(320) || s.p50 != ms(300) || s.p90 != ms(600) {
		t.Fatalf("avg %v p50 %v p90 %v, want 320ms 300ms 600ms", s.avg, s.p50, s.p90)
	}
	if s.rps != 2.5 || s.skew != 2 {
		t.Fatalf("rps %v skew %v, want 2.5 and 2", s.rps, s.skew)
	}
	// Per-round averages 200ms and 400ms: spread (400-200)/300.
	if d := s.avgSpread - 2.0/3; d > 1e-9 || d < -1e-9 {
		t.Fatalf("spread %v, want 2/3", s.avgSpread)
	}
}

func TestSkewAndChange(t *testing.T) {
	for _, tc := range []struct {
		load []int64
		want float64
		ok   bool
	}{{[]int64{10, 10, 10}, 1, true}, {[]int64{30, 0, 0}, 3, true}, {[]int64{20, 10, 0}, 2, true}, {[]int64{0, 0, 0}, 0, false}, {nil, 0, false}} {
		got, ok := skewOf(tc.load)
		if got != tc.want || ok != tc.ok {
			t.Errorf("skewOf(%v) = %v, %t; want %v, %t", tc.load, got, ok, tc.want, tc.ok)
		}
	}
	if got := change(880*time.Millisecond, time.Second); got != "-12.0%" {
		t.Errorf("change = %s", got)
	}
	if got := change(time.Second, 0); got != "-" {
		t.Errorf("change against nothing = %s", got)
	}
}

func TestWriteTable(t *testing.T) {
	rows := []stats{
		{strategy: "round-robin", requests: 60, avg: time.Second, p90: 2 * time.Second},
		{strategy: "least-tokens", requests: 60, avg: 800 * time.Millisecond, p90: time.Second},
		{strategy: "broken", requests: 60, failed: 60, errs: map[string]int{"HTTP 502": 60}},
	}
	var b bytes.Buffer
	writeTable(&b, scenarios["reference"], 3, rows)
	out := b.String()
	for _, want := range []string{"## reference:", "| least-tokens ", "-20.0%", "-50.0%", "Failures of broken:", "60 × HTTP 502"} {
		if !strings.Contains(out, want) {
			t.Errorf("table lacks %q:\n%s", want, out)
		}
	}
	// Every table line has the same width, so it reads in a terminal too.
	width := -1
	for line := range strings.SplitSeq(out, "\n") {
		if !strings.HasPrefix(line, "|") {
			continue
		}
		if n := len([]rune(line)); width < 0 {
			width = n
		} else if n != width {
			t.Fatalf("ragged table:\n%s", out)
		}
	}
}

func TestGatehouseConfig(t *testing.T) {
	y := gatehouseConfig("127.0.0.1:1", "/tmp/x.db", "least-tokens", []string{"127.0.0.1:2", "127.0.0.1:3", "127.0.0.1:4"}, true)
	for _, want := range []string{"strategy: least-tokens", "base_url: http://127.0.0.1:3/v1", "{provider: b3, model: mock}", "load: {kind: llama.cpp", "exact: {enabled: false}"} {
		if !strings.Contains(y, want) {
			t.Errorf("config lacks %q:\n%s", want, y)
		}
	}
}

// TestSimulation: with one client there is nothing to balance, so every
// policy gives the same latencies, and those are the model's idle times;
// with the reference scenario's ten clients least-tokens beats
// round-robin on average over a few sequences.
func TestSimulation(t *testing.T) {
	o := options{perToken: 2 * time.Millisecond, capacity: 4096, jitter: 0}
	sc := scenarios["reference"]
	sc.concurrency = 1
	reqs := generate(sc, 1)
	var first []float64
	for _, p := range simPolicies {
		lat := simulate(sc, reqs, o, p.pick, 1)
		if len(lat) != len(reqs) {
			t.Fatalf("%s: %d latencies for %d requests", p.name, len(lat), len(reqs))
		}
		if first == nil {
			first = lat
		} else if !slices.Equal(lat, first) {
			t.Fatalf("%s: one client, yet latencies differ from round-robin's", p.name)
		}
	}
	// Idle: prompt at per-token/50 plus the reply at per-token, within a step.
	q := reqs[0]
	out := min(10+min(q.promptTokens, 50), sc.maxTokens)
	want := float64(q.promptTokens)*2.0/50 + float64(out)*2.0
	if d := first[0] - want; d < -simStep || d > 2*simStep {
		t.Fatalf("idle latency %.2f ms, want %.2f", first[0], want)
	}

	o.jitter = 0.2
	sc = scenarios["reference"]
	mean := func(pick simPolicy) float64 {
		sum, n := 0.0, 0
		for seed := range uint64(5) {
			for _, l := range simulate(sc, generate(sc, seed+1), o, pick, seed+1) {
				sum += l
				n++
			}
		}
		return sum / float64(n)
	}
	rr, lt := mean(simPolicies[0].pick), mean(simPolicies[2].pick)
	if lt >= rr {
		t.Fatalf("least-tokens %.1f ms on average, round-robin %.1f: not better", lt, rr)
	}
}
