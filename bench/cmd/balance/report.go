// This file turns results into the report: per strategy, latency
// statistics over every round, throughput, how evenly the prompt tokens
// were spread over the backends, and the change against round-robin.

package main

import (
	"fmt"
	"io"
	"maps"
	"math"
	"slices"
	"strings"
	"time"
)

// baseline is the strategy the others are compared with.
const baseline = "round-robin"

// stats summarises one strategy's runs of one scenario.
type stats struct {
	strategy           string
	requests, failed   int
	avg, p50, p90, p99 time.Duration
	rps                float64 // successful requests per second of wall time, over all rounds
	avgSpread          float64 // (max − min) / median of the per-round averages
	skew               float64 // mean over rounds of pass.skew
	errs               map[string]int
}

// pass is one strategy's pass over a sequence.
type pass struct {
	results []result // in sequence order
	wall    time.Duration
	// skew is how unevenly the backends were loaded while it ran: the
	// busiest backend's in-flight tokens over the mean of the three,
	// averaged over samples of their /metrics (1 = even, 3 = one backend
	// held everything); 0 when never sampled busy.
	skew float64
}

// summarise pools the rounds of one strategy: percentiles over every
// successful request of every round, throughput over their summed wall
// time.
func summarise(strategy string, runs []pass) stats {
	s := stats{strategy: strategy, errs: map[string]int{}}
	var lat []time.Duration
	var wall time.Duration
	var avgs []float64
	for _, r := range runs {
		var sum time.Duration
		n := 0
		for _, x := range r.results {
			s.requests++
			if x.err != "" {
				s.failed++
				s.errs[x.err]++
				continue
			}
			lat = append(lat, x.latency)
			sum += x.latency
			n++
		}
		if n > 0 {
			avgs = append(avgs, float64(sum)/float64(n))
		}
		wall += r.wall
		s.skew += r.skew / float64(len(runs))
	}
	if len(lat) == 0 {
		return s
	}
	slices.Sort(lat)
	var sum time.Duration
	for _, d := range lat {
		sum += d
	}
	s.avg = sum / time.Duration(len(lat))
	s.p50, s.p90, s.p99 = percentile(lat, 0.50), percentile(lat, 0.90), percentile(lat, 0.99)
	if wall > 0 {
		s.rps = float64(len(lat)) / wall.Seconds()
	}
	s.avgSpread = spread(avgs)
	return s
}

// percentile is the nearest-rank q-quantile of sorted: the smallest value
// with at least q of the values at or below it.
func percentile(sorted []time.Duration, q float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	k := int(math.Ceil(q*float64(len(sorted)))) - 1
	return sorted[min(max(k, 0), len(sorted)-1)]
}

// spread is (max − min) / median: how much the rounds disagree.
func spread(xs []float64) float64 {
	if len(xs) < 2 {
		return 0
	}
	s := slices.Sorted(slices.Values(xs))
	med := s[len(s)/2]
	if len(s)%2 == 0 {
		med = (s[len(s)/2-1] + s[len(s)/2]) / 2
	}
	if med == 0 {
		return 0
	}
	return (s[len(s)-1] - s[0]) / med
}

// skewOf is the busiest backend's load over the mean load; false when
// nothing is in flight.
func skewOf(load []int64) (float64, bool) {
	var total, top int64
	for _, v := range load {
		total += v
		top = max(top, v)
	}
	if total <= 0 {
		return 0, false
	}
	return float64(top) * float64(len(load)) / float64(total), true
}

// change is a's relative change from b, as the report prints it.
func change(a, b time.Duration) string {
	if b == 0 {
		return "-"
	}
	return fmt.Sprintf("%+.1f%%", (float64(a)/float64(b)-1)*100)
}

func secs(d time.Duration) string { return fmt.Sprintf("%.3f", d.Seconds()) }

// writeTable prints one scenario's table, strategies in the given order.
func writeTable(w io.Writer, sc scenario, rounds int, rows []stats) {
	streamed := ""
	if sc.stream {
		streamed = "; replies streamed"
	}
	fmt.Fprintf(w, "## %s: %s%s\n\n", sc.name, sc.about, streamed)
	var base *stats
	for i := range rows {
		if rows[i].strategy == baseline {
			base = &rows[i]
		}
	}
	header := []string{"strategy", "requests", "failed", "avg s", "p50 s", "p90 s", "p99 s", "req/s", "avg vs " + baseline, "p90 vs " + baseline, "round spread", "token skew"}
	var cells [][]string
	for _, r := range rows {
		avgVs, p90Vs := "-", "-"
		if base != nil && r.strategy != baseline && r.requests > r.failed {
			avgVs, p90Vs = change(r.avg, base.avg), change(r.p90, base.p90)
		}
		cells = append(cells, []string{
			r.strategy, fmt.Sprint(r.requests), fmt.Sprint(r.failed),
			secs(r.avg), secs(r.p50), secs(r.p90), secs(r.p99),
			fmt.Sprintf("%.2f", r.rps), avgVs, p90Vs,
			fmt.Sprintf("%.0f%%", r.avgSpread*100), fmt.Sprintf("%.2f", r.skew),
		})
	}
	writeMarkdownTable(w, header, cells)
	fmt.Fprintf(w, "\n%d round(s) of the same %d-request sequence per strategy; latency to the end of the response, pooled over rounds.\n", rounds, sc.requests)
	for _, r := range rows {
		if r.failed == 0 {
			continue
		}
		fmt.Fprintf(w, "\nFailures of %s:\n", r.strategy)
		for _, k := range slices.Sorted(maps.Keys(r.errs)) {
			fmt.Fprintf(w, "- %d × %s\n", r.errs[k], k)
		}
	}
	fmt.Fprintln(w)
}

// writeMarkdownTable prints a markdown table padded so that it also
// reads as columns in a terminal; numbers are right-aligned.
func writeMarkdownTable(w io.Writer, header []string, rows [][]string) {
	width := make([]int, len(header))
	for i, h := range header {
		width[i] = len([]rune(h))
	}
	for _, r := range rows {
		for i, c := range r {
			width[i] = max(width[i], len([]rune(c)))
		}
	}
	line := func(cells []string, right bool) {
		var b strings.Builder
		b.WriteString("|")
		for i, c := range cells {
			pad := strings.Repeat(" ", width[i]-len([]rune(c)))
			if right && i > 0 {
				b.WriteString(" " + pad + c + " |")
			} else {
				b.WriteString(" " + c + pad + " |")
			}
		}
		fmt.Fprintln(w, b.String())
	}
	line(header, false)
	sep := make([]string, len(header))
	for i := range sep {
		sep[i] = strings.Repeat("-", width[i])
		if i > 0 {
			sep[i] = sep[i][:width[i]-1] + ":"
		}
	}
	line(sep, false)
	for _, r := range rows {
		line(r, true)
	}
}
