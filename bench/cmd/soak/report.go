package main

import (
	"fmt"
	"strings"
	"time"
)

// fdSlack is how many open files more than the baseline still count as
// none leaked: the SQLite journal and the log may be open or not.
const fdSlack = 5

// heapSlack is how much more heap in use than the baseline still counts
// as back at rest: half the baseline or 8 MiB, whichever is more.
func heapSlack(baseline int64) int64 { return max(baseline/2, 8<<20) }

// report is a soak run's result.
type report struct {
	opts                     options
	start                    time.Time
	baseline, final          sample
	samples                  []sample // during the load
	reloadsSent, reloadsDone int
	failovers                int64
	outcomes                 []outcomeCount
	records                  recordCheck
}

// check is one line of the verdict.
type check struct {
	name, detail string
	ok           bool
}

func (r *report) checks() []check {
	b, f := r.baseline, r.final
	var unexpected []string
	for _, o := range r.outcomes {
		if !o.kind.expected(o.outcome) {
			unexpected = append(unexpected, fmt.Sprintf("%s: %s ×%d", o.kind, o.outcome, o.n))
		}
	}
	rc := r.records
	return []check{
		{"every request answered as its kind expects", orNone(unexpected), len(unexpected) == 0 && len(r.outcomes) > 0},
		{"requests failed over from the flaky target", fmt.Sprint(r.failovers), r.failovers > 0},
		{"goroutines back at the baseline", fmt.Sprintf("%d → %d (slack %d)", b.goroutines, f.goroutines, goroutineSlack),
			f.goroutines <= b.goroutines+goroutineSlack},
		{"open files back at the baseline", fmt.Sprintf("%d → %d (slack %d)", b.openFDs, f.openFDs, fdSlack),
			f.openFDs <= b.openFDs+fdSlack},
		{"heap in use back at the baseline", fmt.Sprintf("%s → %s (slack %s)", mib(b.heapInuse), mib(f.heapInuse), mib(heapSlack(b.heapInuse))),
			f.heapInuse <= b.heapInuse+heapSlack(b.heapInuse)},
		{"every request has exactly one usage record", fmt.Sprintf("%d requests reached the gateway, %d records; missing %s, duplicated %s, unknown %d",
			rc.sent, rc.records, firstFew(rc.missing), firstFew(rc.duplicate), rc.unknown), rc.ok()},
		{"every reload applied", fmt.Sprintf("%d asked for (SIGHUP after rewriting the file), %d \"config reloaded\" lines", r.reloadsSent, r.reloadsDone),
			r.reloadsSent > 0 && r.reloadsDone >= r.reloadsSent},
	}
}

func (r *report) passed() bool {
	for _, c := range r.checks() {
		if !c.ok {
			return false
		}
	}
	return true
}

func (r *report) markdown() string {
	var b strings.Builder
	o := r.opts
	fmt.Fprintf(&b, "## Soak: %s at %d requests/s, a reload every %s (warm-up %s)\n\n", o.duration, o.rate, o.reload, o.warmup)
	b.WriteString("| check | | figures |\n|---|---|---|\n")
	for _, c := range r.checks() {
		verdict := "**fail**"
		if c.ok {
			verdict = "pass"
		}
		fmt.Fprintf(&b, "| %s | %s | %s |\n", c.name, verdict, c.detail)
	}
	b.WriteString("\n| requests | outcome | count |\n|---|---|---:|\n")
	for _, oc := range r.outcomes {
		fmt.Fprintf(&b, "| %s | %s | %d |\n", oc.kind, oc.outcome, oc.n)
	}
	if len(r.samples) > 0 {
		b.WriteString("\nDuring the load (one sample every " + o.sample.String() + "):\n\n")
		b.WriteString("| gauge | at rest before | min | max | last | at rest after | trend over the load |\n|---|---:|---:|---:|---:|---:|---:|\n")
		row := func(name string, get func(sample) float64, format func(float64) string, unit string) {
			lo, hi := get(r.samples[0]), get(r.samples[0])
			for _, s := range r.samples {
				lo, hi = min(lo, get(s)), max(hi, get(s))
			}
			fmt.Fprintf(&b, "| %s | %s | %s | %s | %s | %s | %s%s/min |\n", name, format(get(r.baseline)), format(lo), format(hi),
				format(get(r.samples[len(r.samples)-1])), format(get(r.final)), format(slope(r.samples, get)), unit)
		}
		count := func(v float64) string { return fmt.Sprintf("%.0f", v) }
		mb := func(v float64) string { return fmt.Sprintf("%.1f", v/(1<<20)) }
		row("goroutines", func(s sample) float64 { return float64(s.goroutines) }, count, "")
		row("open files", func(s sample) float64 { return float64(s.openFDs) }, count, "")
		row("heap in use, MiB", func(s sample) float64 { return float64(s.heapInuse) }, mb, " MiB")
		row("RSS, MiB", func(s sample) float64 { return float64(s.rss) }, mb, " MiB")
	}
	b.WriteString("\n")
	return b.String()
}

// slope is the least-squares slope of get over the samples, per minute.
func slope(samples []sample, get func(sample) float64) float64 {
	if len(samples) < 2 {
		return 0
	}
	t0 := samples[0].at
	var n, sx, sy, sxx, sxy float64
	for _, s := range samples {
		x, y := s.at.Sub(t0).Minutes(), get(s)
		n++
		sx += x
		sy += y
		sxx += x * x
		sxy += x * y
	}
	d := n*sxx - sx*sx
	if d == 0 {
		return 0
	}
	return (n*sxy - sx*sy) / d
}

func mib(b int64) string { return fmt.Sprintf("%.1f MiB", float64(b)/(1<<20)) }

func orNone(s []string) string {
	if len(s) == 0 {
		return "none other"
	}
	return strings.Join(s, "; ")
}

// firstFew lists up to five sequence numbers and how many there are.
func firstFew(ns []int64) string {
	if len(ns) == 0 {
		return "none"
	}
	parts := make([]string, 0, 5)
	for _, n := range ns[:min(len(ns), 5)] {
		parts = append(parts, fmt.Sprint(n))
	}
	if len(ns) > 5 {
		parts = append(parts, "…")
	}
	return fmt.Sprintf("%d (%s)", len(ns), strings.Join(parts, ", "))
}
