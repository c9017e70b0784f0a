// This file prints the report: per count, every target's figures and its
// ratios against the plain proxy measured in the same run, then the
// issue's goals as verdicts.

package main

import (
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
)

func writeReport(w io.Writer, o options, nofile uint64, cells []cell) {
	fmt.Fprintf(w, "# Concurrent streams: memory per stream and time to first event\n\n")
	fmt.Fprintf(w, "Command (from bench/): `%s`\n\n", strings.Join(o.command, " "))
	fmt.Fprintf(w, "Each stream: %d data events (role, %d content chunks %s apart, finish, usage) and [DONE]. "+
		"Every run starts its target afresh and opens all N streams at once; RLIMIT_NOFILE %d for every process. "+
		"KiB/stream is (peak VmHWM during the burst − idle VmRSS before it) / N. "+
		"TTFE runs from the request written to the first event; connect (the dial and the write, %s) is apart. "+
		"The burst's TTFE is mostly the burst's own queueing; the probes' is the goal's: once all N streams have their first event, "+
		"up to %d more, each of one content chunk, are opened one at a time until the first stream of the burst ends "+
		"(probes is the fewest any run measured; the verdict needs %d in every run of both targets). "+
		"Open at once is the most streams that had their first event and not yet their end at one moment: "+
		"when it is well under N, the streams did not all overlap and KiB/stream understates the cost of N open streams. "+
		"%d round(s) of ABBA; figures are medians over rounds of each round's two runs.\n\n",
		o.events, o.events-3, o.gap, nofile, dialsText(o.dials), o.probes, minProbes, o.Rounds)
	for _, c := range cells {
		base, hasBase := c.get(kindPlain)
		fmt.Fprintf(w, "## %d concurrent streams\n\n", c.n)
		header := []string{"target", "complete", "open at once", "KiB/stream", "idle MiB", "peak MiB", "burst TTFE p50 ms", "burst TTFE p99 ms", "connect p99 ms",
			"probes", "probe TTFE p50 ms", "probe TTFE p99 ms"}
		if hasBase {
			header = append(header, "KiB/stream vs plainproxy", "probe TTFE p99 +ms vs plainproxy")
		}
		var rows [][]string
		for _, r := range c.rows {
			line := []string{r.name, fmt.Sprintf("%d/%d", r.completed, c.n), fmt.Sprint(r.maxOpen), num(r.perStream, 1), num(r.idleMiB, 1),
				num(r.peakMiB, 1), num(r.p50, 2), num(r.p99, 2), num(r.connectP99, 2), fmt.Sprint(r.probesMin), num(r.probeP50, 2), num(r.probeP99, 2)}
			if hasBase {
				line = append(line, ratio(r.perStream, base.perStream), fmt.Sprintf("%+.2f", r.probeP99-base.probeP99))
			}
			rows = append(rows, line)
		}
		writeTable(w, header, rows)
		for _, r := range c.rows {
			if r.probesFailed > 0 {
				fmt.Fprintf(w, "\n%s: %d probes did not complete over %d runs.\n", r.name, r.probesFailed, r.runs)
			}
			if r.incomplete == 0 {
				continue
			}
			fmt.Fprintf(w, "\n%s: %d streams did not complete over %d runs:\n", r.name, r.incomplete, r.runs)
			for _, e := range slices.Sorted(maps.Keys(r.errs)) {
				fmt.Fprintf(w, "- %d× %s\n", r.errs[e], e)
			}
		}
		fmt.Fprintln(w)
	}
	writeVerdicts(w, cells)
}

func dialsText(n int) string {
	if n == 0 {
		return "all N at once"
	}
	return fmt.Sprintf("at most %d at once", n)
}

func (c cell) get(name string) (row, bool) {
	for _, r := range c.rows {
		if r.name == name {
			return r, true
		}
	}
	return row{}, false
}

// writeVerdicts checks issue 16's goals for every gatehouse target against
// the plain proxy: memory per stream no more than its, every stream
// complete, TTFE p99 within 1 ms (the probes').
func writeVerdicts(w io.Writer, cells []cell) {
	var lines []string
	for _, c := range cells {
		base, ok := c.get(kindPlain)
		if !ok {
			continue
		}
		for _, r := range c.rows {
			if r.name == kindPlain {
				continue
			}
			lines = append(lines, verdicts(c.n, base, r)...)
		}
	}
	if len(lines) == 0 {
		return
	}
	fmt.Fprintf(w, "## Verdict (issue 16)\n\n")
	for _, l := range lines {
		fmt.Fprintln(w, "- "+l)
	}
}

// minProbes is the fewest probes a run must measure for its p99 to mean
// something: with 100, the p99 is the second slowest.
const minProbes = 100

func verdicts(n int, base, r row) []string {
	ttfe := fmt.Sprintf("n=%d %s: probe TTFE p99 %+.2f ms vs plainproxy (goal ≤ +1 ms) %s", n, r.name, r.probeP99-base.probeP99, met(r.probeP99-base.probeP99 <= 1))
	if fewest := min(r.probesMin, base.probesMin); fewest < minProbes {
		ttfe = fmt.Sprintf("n=%d %s: TTFE NOT MEASURED: a run measured %d probes with all %d streams open, fewer than %d (longer streams, -gap, give the probes more time)",
			n, r.name, fewest, n, minProbes)
	}
	return []string{
		fmt.Sprintf("n=%d %s: %.1f KiB/stream vs plainproxy's %.1f (goal ≤) %s", n, r.name, r.perStream, base.perStream, met(r.perStream <= base.perStream)),
		fmt.Sprintf("n=%d %s: %d streams incomplete and %d probes failed over %d runs (goal 0; plainproxy %d and %d) %s",
			n, r.name, r.incomplete, r.probesFailed, r.runs, base.incomplete, base.probesFailed, met(r.incomplete == 0 && r.probesFailed == 0)),
		ttfe,
	}
}

func met(ok bool) string {
	if ok {
		return "met"
	}
	return "MISSED"
}

// ratio is a/b as a multiplier; "-" when b is not positive.
func ratio(a, b float64) string {
	if b <= 0 {
		return "-"
	}
	return fmt.Sprintf("%.2f×", a/b)
}

func num(x float64, prec int) string { return fmt.Sprintf("%.*f", prec, x) }

// writeTable prints a markdown table whose columns are padded, so it also
// reads in a terminal.
func writeTable(w io.Writer, header []string, rows [][]string) {
	width := make([]int, len(header))
	for i, h := range header {
		width[i] = len([]rune(h))
	}
	for _, r := range rows {
		for i, v := range r {
			width[i] = max(width[i], len([]rune(v)))
		}
	}
	line := func(cells []string) {
		var b strings.Builder
		b.WriteString("|")
		for i, v := range cells {
			pad := width[i] - len([]rune(v))
			if i == 0 {
				b.WriteString(" " + v + strings.Repeat(" ", pad) + " |")
			} else {
				b.WriteString(" " + strings.Repeat(" ", pad) + v + " |")
			}
		}
		fmt.Fprintln(w, b.String())
	}
	line(header)
	sep := make([]string, len(header))
	for i := range sep {
		if i == 0 {
			sep[i] = strings.Repeat("-", width[i])
		} else {
			sep[i] = strings.Repeat("-", width[i]-1) + ":"
		}
	}
	line(sep)
	for _, r := range rows {
		line(r)
	}
}
