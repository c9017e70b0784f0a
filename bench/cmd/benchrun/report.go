// This file turns measurements into the report: one markdown table per
// layout, scenario and concurrency, readable as plain text in a terminal,
// then a table of the ratios issue 16 sets goals for, one row per cell,
// and the verdicts against those goals and DESIGN.md's budgets. Every
// ratio compares targets measured in the same cell of the same run, which
// is the only comparison a shared, noisy machine supports.

package main

import (
	"fmt"
	"io"
	"math"
	"runtime"
	"slices"
	"strings"
	"time"
	"unicode/utf8"
)

// The goals the verdict checks: issue 16's, and DESIGN.md's "Performance
// budgets".
const (
	// minFullVsPlain is gatehouse full / plainproxy throughput, non-streaming
	// (issue 16), with maxP99VsPlain ms of p99 at most on top of the plain
	// proxy's ("p99 no worse").
	minFullVsPlain = 1.0
	maxP99VsPlain  = 0.0
	minFullVsBare  = 0.97 // gatehouse full / gatehouse --bare throughput (DESIGN.md)
	maxP99Added    = 1.0  // ms, gatehouse full p99 − gatehouse --bare p99 (DESIGN.md)
	// maxCacheHitP50 is the exact-cache hit's p50 inside the gateway, in
	// ms, and minHitVsMiss its throughput against the miss path (issue 16).
	maxCacheHitP50 = 0.3
	minHitVsMiss   = 2.0
	// minRedisVsEmbedded is cluster mode's throughput against embedded
	// mode's, the full stack in both (issue 16).
	minRedisVsEmbedded = 0.80
	// maxAdmissionDrop is issue 5's bound, in percentage points of the
	// plainproxy throughput: full with limits vs full without.
	maxAdmissionDrop = 3.0
)

// row is one target's result in a cell.
type row struct {
	name string
	sample
}

// cell is the result of one scenario at one concurrency.
type cell struct {
	spec runSpec
	rows []row // in target order
}

func (c cell) get(name string) (sample, bool) {
	for _, r := range c.rows {
		if r.name == name {
			return r.sample, true
		}
	}
	return sample{}, false
}

func (c cell) tooManyErrors() bool {
	return slices.ContainsFunc(c.rows, func(r row) bool { return r.errorRate() > maxErrorRate })
}

func (c cell) label() string {
	if c.spec.rate > 0 {
		return fmt.Sprintf("%s %s c=%d rate=%d/s", c.spec.layout, c.spec.name, c.spec.concurrency, c.spec.rate)
	}
	return fmt.Sprintf("%s %s c=%d", c.spec.layout, c.spec.name, c.spec.concurrency)
}

// minKeptUp is the share of an open loop's rate a target must answer
// successfully for its latencies to count: one that falls behind has its
// requests held back until a client is free, and their wait is not in the
// latency vegeta times.
const minKeptUp = 0.97

// keptUp says whether s answered its cell's rate: always true in a closed
// loop, which has no rate to fall behind.
func (c cell) keptUp(s sample) bool {
	return c.spec.rate == 0 || s.rps >= minKeptUp*float64(c.spec.rate)
}

func writeHeader(w io.Writer, o options, names []string) {
	fmt.Fprintf(w, "# gatehouse load benchmark\n\n")
	cmd := commandLine(o.command)
	if o.dir != "" {
		cmd = "cd " + commandLine([]string{o.dir}) + " && " + cmd
	}
	fmt.Fprintf(w, "    %s\n\n", cmd)
	if o.version != "" {
		fmt.Fprintf(w, "Measuring %s.\n\n", o.version)
	}
	fmt.Fprintf(w, "%s · %s/%s · %d CPUs · %s · targets: %s\n\n",
		time.Now().Format("2006-01-02 15:04"), runtime.GOOS, runtime.GOARCH, runtime.NumCPU(),
		runtime.Version(), strings.Join(names, ", "))
	rounds := "1 round"
	if o.Rounds > 1 {
		rounds = fmt.Sprintf("median of %d rounds", o.Rounds)
	}
	loop := "Closed loop: each client sends its next request as soon as the last is answered"
	if o.rate > 0 {
		loop = fmt.Sprintf("Open loop: %d requests a second sent to each target whatever its answers, at most the cell's "+
			"concurrency in flight, so that latencies are compared at one rate; throughput is not judged", o.rate)
	}
	fmt.Fprintf(w, "%s; "+
		"%s per run after %s of warm-up; each round runs the targets forward then mirrored (ABBA) "+
		"and takes the mean of each target's two runs; %s. The load generator shares the machine with what it "+
		"measures: compare the ratios within a table, not absolute numbers.\n\n",
		loop, o.duration, o.warmup, rounds)
	for _, l := range o.layouts {
		switch l {
		case pinned:
			fmt.Fprintf(w, "- pinned: the proxy alone on one CPU (taskset) at GOMAXPROCS=1; the load generator, mockllm, Redis and PostgreSQL on another, Go ones at GOMAXPROCS=1.\n")
		case unpinned:
			fmt.Fprintf(w, "- unpinned: no pinning; the proxy at GOMAXPROCS=2.\n")
		}
	}
	if slices.ContainsFunc(names, func(n string) bool { return strings.Contains(n, "redis") }) {
		fmt.Fprintf(w, "- Redis and PostgreSQL run at nice %d (as root; otherwise at 0), so that where they share a CPU they are "+
			"served first, as on machines of their own; a cluster-mode target that spills over %.0f%% of its records is not judged.\n",
			databaseNice, maxSpilledJudged*100)
	}
	fmt.Fprintln(w)
}

// writeTable prints one cell: a row per target, then the failure reasons
// of any target that had failures.
func writeTable(w io.Writer, c cell) {
	if c.spec.rate > 0 {
		fmt.Fprintf(w, "## %s, %s, %d requests a second, at most %d in flight\n\n", c.spec.layout, c.spec.name, c.spec.rate, c.spec.concurrency)
	} else {
		fmt.Fprintf(w, "## %s, %s, %d concurrent clients\n\n", c.spec.layout, c.spec.name, c.spec.concurrency)
	}
	plain, _ := c.get(plainproxy)
	bareS, _ := c.get(bare)
	dir, _ := c.get(direct)
	header := []string{"target", "rps", "p50 ms", "p99 ms", "gw p50 ms", "CPU cores", "CPU µs/req",
		"Redis CPU µs/req", "PostgreSQL CPU µs/req", "peak RSS MiB",
		"vs plainproxy", "vs bare", "vs direct", "p99 +ms vs plainproxy", "failed",
		"rps spread", "other load"}
	var rows [][]string
	for _, r := range c.rows {
		p99Added := "-"
		if _, ok := c.get(plainproxy); ok && r.name != direct {
			p99Added = fmt.Sprintf("%+.2f", msf(r.p99)-msf(plain.p99))
		}
		rows = append(rows, []string{
			r.name,
			fmt.Sprintf("%.0f", r.rps),
			fmt.Sprintf("%.2f", msf(r.p50)),
			fmt.Sprintf("%.2f", msf(r.p99)),
			num(r.gwP50, 3),
			num(r.cores, 2),
			num(r.cpuPerRequest(), 1),
			num(r.redisPerRequest(), 1),
			num(r.pgPerRequest(), 1),
			num(r.rssMiB, 1),
			pct(r.rps, plain.rps),
			pct(r.rps, bareS.rps),
			pct(r.rps, dir.rps),
			p99Added,
			failed(r.sample),
			spread(r.sample),
			fmt.Sprintf("%.2f", r.other),
		})
	}
	writeMarkdownTable(w, header, rows)
	fmt.Fprintln(w)
	for _, r := range c.rows {
		if !c.keptUp(r.sample) {
			fmt.Fprintf(w, "%s did not keep up with %d requests a second (it answered %.0f): requests waited for a free client, "+
				"and that wait is not in its latencies, which understate. Not a measurement at this rate.\n\n", r.name, c.spec.rate, r.rps)
		}
	}
	for _, r := range c.rows {
		if r.spilled > 0 {
			fmt.Fprintf(w, "%s spilled usage records to disk: %s of its requests' in its worst round. Its database did not keep up "+
				"(or failed), and the spill's encoding, file, read and replay cost gatehouse CPU: not a steady state.\n\n",
				r.name, spilledPct(r.spilled))
		}
	}
	for _, r := range c.rows {
		if r.failed == 0 {
			continue
		}
		mark := ""
		if r.errorRate() > maxErrorRate {
			mark = fmt.Sprintf(" — over %.1f%%: NOT A MEASUREMENT", maxErrorRate*100)
		}
		fmt.Fprintf(w, "Failures of %s%s:\n\n", r.name, mark)
		reasons := make([]string, 0, len(r.errs))
		for k := range r.errs {
			reasons = append(reasons, k)
		}
		slices.SortFunc(reasons, func(a, b string) int { return r.errs[b] - r.errs[a] })
		for _, k := range reasons {
			fmt.Fprintf(w, "- %d × %s\n", r.errs[k], k)
		}
		fmt.Fprintln(w)
	}
}

// writeRatios prints one row per cell with the ratios issue 16 sets goals
// for, so the whole run reads at a glance; "-" where a target it needs
// was not measured.
func writeRatios(w io.Writer, cells []cell) {
	fmt.Fprintf(w, "## Ratios\n\n")
	header := []string{"cell", "full / plainproxy rps", "full − plainproxy p99 ms", "full / plainproxy CPU/req", "full / bare rps",
		"cache hit gw p50 ms", "cache hit / miss rps", "redis / full rps", "Redis scripts / req", "Redis cmds / req",
		"leases / full rps", "leases / redis rps", "leases: Redis scripts / req",
		"base full / plainproxy rps", "full / base full rps", "full / base full CPU/req"}
	var rows [][]string
	for _, c := range cells {
		f, okF := c.get(full)
		p, okP := c.get(plainproxy)
		b, okB := c.get(bare)
		hit, okH := c.get(cacheHits)
		miss, okM := c.get(cacheMisses)
		red, okR := c.get(redisMode)
		ls, okL := c.get(leaseMode)
		base, okBase := c.get(baseFull)
		row := []string{c.label(), "-", "-", "-", "-", "-", "-", "-", "-", "-", "-", "-", "-", "-", "-", "-"}
		if okF && okP {
			row[1], row[2] = ratio(f.rps, p.rps), fmt.Sprintf("%+.2f", msf(f.p99)-msf(p.p99))
			row[3] = ratio(f.cpuPerRequest(), p.cpuPerRequest())
		}
		if okF && okB {
			row[4] = ratio(f.rps, b.rps)
		}
		if okH {
			row[5] = num(hit.gwP50, 3)
		}
		if okH && okM {
			row[6] = ratio(hit.rps, miss.rps)
		}
		if okR {
			row[8], row[9] = num(red.redisScripts, 2), num(red.redisCmds, 2)
			if okF {
				row[7] = ratio(red.rps, f.rps)
			}
		}
		if okL {
			row[12] = num(ls.redisScripts, 4)
			if okF {
				row[10] = ratio(ls.rps, f.rps)
			}
			if okR {
				row[11] = ratio(ls.rps, red.rps)
			}
		}
		if okBase {
			if okP {
				row[13] = ratio(base.rps, p.rps)
			}
			if okF {
				row[14], row[15] = ratio(f.rps, base.rps), ratio(f.cpuPerRequest(), base.cpuPerRequest())
			}
		}
		rows = append(rows, row)
	}
	writeMarkdownTable(w, header, rows)
	fmt.Fprintln(w)
}

// writeVerdicts checks each cell against issue 16's goals and DESIGN.md's
// budgets. Missing one is a finding, not a harness failure, so it changes
// no exit code.
func writeVerdicts(w io.Writer, cells []cell, rounds int) {
	fmt.Fprintf(w, "## Verdict\n\n")
	judged := false
	for _, c := range cells {
		for _, line := range verdicts(c) {
			judged = true
			fmt.Fprintf(w, "- %s: %s\n", c.label(), line)
		}
	}
	if !judged {
		fmt.Fprintln(w, "- no cell measured a target together with its baseline: nothing to judge.")
	}
	writeNoise(w, cells, rounds)
}

// verdicts are the lines of one cell's verdict, one per goal it has the
// targets for.
func verdicts(c cell) []string {
	if c.spec.rate > 0 {
		return openLoopVerdicts(c)
	}
	var out []string
	f, okF := c.get(full)
	p, okP := c.get(plainproxy)
	if okF && okP {
		r, added := f.rps/p.rps, msf(f.p99)-msf(p.p99)
		line := fmt.Sprintf("gatehouse full / plainproxy throughput = %s (goal ≥ %s)", ratio(f.rps, p.rps), ratio(minFullVsPlain, 1))
		cpu := ""
		if fc, pc := f.cpuPerRequest(), p.cpuPerRequest(); !math.IsNaN(fc) && !math.IsNaN(pc) {
			cpu = fmt.Sprintf("; proxy CPU per request %.1f vs %.1f µs", fc, pc)
		}
		if c.spec.stream {
			out = append(out, fmt.Sprintf("%s, p99 %+.2f ms%s: informational, the goal is for non-streaming", line, added, cpu))
		} else {
			out = append(out, fmt.Sprintf("%s %s; p99 %+.2f ms vs plainproxy (goal ≤ %+.2f) %s%s",
				line, met(r >= minFullVsPlain), added, maxP99VsPlain, met(added <= maxP99VsPlain), cpu))
		}
	}
	if b, ok := c.get(bare); ok && okF {
		r, added := f.rps/b.rps, msf(f.p99)-msf(b.p99)
		out = append(out, fmt.Sprintf("gatehouse full / bare throughput = %s (goal ≥ %.0f%%) %s; p99 added = %+.2f ms (goal ≤ %.0f ms) %s",
			pct(f.rps, b.rps), minFullVsBare*100, met(r >= minFullVsBare), added, maxP99Added, met(added <= maxP99Added)))
	}
	if n, ok := c.get(noLimits); ok && okP {
		if okF {
			drop := (n.rps - f.rps) / p.rps * 100
			out = append(out, fmt.Sprintf("admission control costs %.1f percentage points of throughput vs plainproxy (full %s, no limits %s; goal ≤ %.0f) %s",
				drop, pct(f.rps, p.rps), pct(n.rps, p.rps), maxAdmissionDrop, met(drop <= maxAdmissionDrop)))
		}
		if q, ok := c.get(quiet); ok {
			drop := (n.rps - q.rps) / p.rps * 100
			out = append(out, fmt.Sprintf("admission control with x-ratelimit headers on 429s only costs %.1f percentage points of throughput vs plainproxy (full, headers on 429 %s, no limits %s; goal ≤ %.0f) %s",
				drop, pct(q.rps, p.rps), pct(n.rps, p.rps), maxAdmissionDrop, met(drop <= maxAdmissionDrop)))
		}
	}
	if hit, ok := c.get(cacheHits); ok {
		line := cacheHitLatency(hit)
		if miss, ok := c.get(cacheMisses); ok {
			line += fmt.Sprintf("; hit / miss throughput = %s (goal ≥ %s) %s", ratio(hit.rps, miss.rps), ratio(minHitVsMiss, 1),
				met(hit.rps >= minHitVsMiss*miss.rps))
		}
		out = append(out, line)
	}
	if red, ok := c.get(redisMode); ok && okF {
		out = append(out, fmt.Sprintf("Redis mode / embedded throughput = %s (goal ≥ %.0f%%) %s; per request %s Redis script calls, %s commands in all (those scripts ran included)%s%s%s",
			pct(red.rps, f.rps), minRedisVsEmbedded*100, judgedUnlessSpilled(red, red.rps >= minRedisVsEmbedded*f.rps), num(red.redisScripts, 2), num(red.redisCmds, 2),
			capacity(red, f), serversCPU(red), spillWarning(c, redisMode, full)))
	}
	if red, ok := c.get(redisMode); ok {
		if br, ok := c.get(baseRedis); ok {
			out = append(out, fmt.Sprintf("gatehouse redis / base gatehouse redis throughput = %s; CPU per request %s, Redis's %s, PostgreSQL's %s (two builds in cluster mode: informational)",
				ratio(red.rps, br.rps), ratio(red.cpuPerRequest(), br.cpuPerRequest()),
				ratio(red.redisPerRequest(), br.redisPerRequest()), ratio(red.pgPerRequest(), br.pgPerRequest())))
		}
	}
	if ls, ok := c.get(leaseMode); ok && okF {
		out = append(out, fmt.Sprintf("Redis mode with leases / embedded throughput = %s; per request %s Redis script calls, %s commands in all%s%s%s",
			pct(ls.rps, f.rps), num(ls.redisScripts, 4), num(ls.redisCmds, 4), capacity(ls, f), serversCPU(ls), spillWarning(c, leaseMode, full)))
	}
	return out
}

// openLoopVerdicts are the verdicts of a cell run at a fixed rate: every
// target was sent the same requests, so the throughput goals have nothing
// to judge and the latency goals compare like with like. A latency is
// judged only when both targets kept up with the rate.
func openLoopVerdicts(c cell) []string {
	var out []string
	f, okF := c.get(full)
	// judge compares full's p99 with base's; goal is "" for a comparison
	// that has none (streams).
	judge := func(name string, base sample, limit float64, goal string) string {
		added := msf(f.p99) - msf(base.p99)
		line := fmt.Sprintf("gatehouse full p99 %+.2f ms vs %s at %d requests a second", added, name, c.spec.rate)
		if goal != "" {
			line += " (goal ≤ " + goal + ")"
		}
		if !c.keptUp(f) || !c.keptUp(base) {
			return line + ": not judged, a target did not keep up with the rate"
		}
		if goal != "" {
			line += " " + met(added <= limit)
		}
		if fc, bc := f.cpuPerRequest(), base.cpuPerRequest(); !math.IsNaN(fc) && !math.IsNaN(bc) {
			line += fmt.Sprintf("; proxy CPU per request %.1f vs %.1f µs", fc, bc)
		}
		if goal == "" {
			line += ": informational, the goal is for non-streaming"
		}
		return line
	}
	if p, ok := c.get(plainproxy); ok && okF {
		if c.spec.stream {
			out = append(out, judge(plainproxy, p, 0, ""))
		} else {
			out = append(out, judge(plainproxy, p, maxP99VsPlain, fmt.Sprintf("%+.2f", maxP99VsPlain)))
		}
	}
	if b, ok := c.get(bare); ok && okF {
		out = append(out, judge(bare, b, maxP99Added, fmt.Sprintf("%.0f ms", maxP99Added)))
	}
	if hit, ok := c.get(cacheHits); ok {
		out = append(out, cacheHitLatency(hit))
	}
	return out
}

// cacheHitLatency is the verdict on the cache hit's time inside the
// gateway, which a closed and an open loop judge alike.
func cacheHitLatency(hit sample) string {
	return fmt.Sprintf("cache hit p50 inside the gateway = %s ms (goal ≤ %.1f ms) %s; at the client %.3f ms",
		num(hit.gwP50, 3), maxCacheHitP50, met(hit.gwP50 <= maxCacheHitP50), msf(hit.p50))
}

// capacity is what a cluster verdict adds about the gateway's own CPU: a
// request's in cluster mode against embedded mode's, and the throughput
// one core of gatehouse would have at that cost, as a share of
// embedded's. Redis and PostgreSQL run on the load generator's CPU in
// benchrun, where a deployment gives them hosts of their own: the
// throughput ratio pays for their CPU too, this one does not.
func capacity(cluster, embedded sample) string {
	cc, ec := cluster.cpuPerRequest(), embedded.cpuPerRequest()
	if math.IsNaN(cc) || math.IsNaN(ec) || cc <= 0 {
		return ""
	}
	return fmt.Sprintf("; gatehouse CPU per request %.1f vs %.1f µs (%s of embedded's requests a core)", cc, ec, pct(ec, cc))
}

// serversCPU is what a cluster verdict adds about Redis's and
// PostgreSQL's CPU per request: the other half of capacity's caveat, the
// share of the load generator's core that the throughput ratio pays for.
func serversCPU(s sample) string {
	r, p := s.redisPerRequest(), s.pgPerRequest()
	if math.IsNaN(r) || math.IsNaN(p) {
		return ""
	}
	return fmt.Sprintf("; Redis %.1f µs and PostgreSQL %.1f µs of CPU a request", r, p)
}

// spillWarning is what a verdict comparing targets of c adds when any of
// them spilled usage records: the comparison then measures the spill too.
func spillWarning(c cell, names ...string) string {
	out := ""
	for _, name := range names {
		if x, ok := c.get(name); ok && x.spilled > 0 {
			out += fmt.Sprintf("; %s spilled usage records: %s", name, spilledPct(x.spilled))
		}
	}
	if out != "" {
		out += " (not a steady state: see its table)"
	}
	return out
}

// judgedUnlessSpilled is met(ok), or, when r spilled more than
// maxSpilledJudged of its records, that the goal is not judged: the
// spilled records are written to PostgreSQL after the run, so its work
// for them, on the load generator's CPU, is missing from the throughput.
func judgedUnlessSpilled(r sample, ok bool) string {
	if r.spilled > maxSpilledJudged {
		return "NOT JUDGED (records spilled: the database's work for them fell after the run)"
	}
	return met(ok)
}

// maxSpilledJudged is the most records a target may spill, per request
// in its worst round, and still have its throughput judged: a database
// that starts a run cold may fall behind for a moment.
const maxSpilledJudged = 0.01

// spilledPct is records spilled per request as a percentage.
func spilledPct(perRequest float64) string {
	return fmt.Sprintf("%.2f%%", 100*perRequest)
}

// Above these, the noise note tells the reader not to trust small differences.
const (
	noisyOther  = 0.10 // cores used by other processes during a run
	noisySpread = 0.05 // (max−min)/median of one target's rps over its runs in a cell
)

// writeNoise says how far the run can be trusted: the budgets are a few
// percent apart, so a neighbour's compile during one run, or rounds that
// disagree by more than that, decide the verdict more than gatehouse does.
func writeNoise(w io.Writer, cells []cell, rounds int) {
	var other, spread float64
	for _, c := range cells {
		for _, r := range c.rows {
			other, spread = max(other, r.other), max(spread, r.spread)
		}
	}
	switch {
	case other > noisyOther:
		fmt.Fprintf(w, "- NOISY: other processes used up to %.2f cores during a run (rps spread between runs up to %.0f%%). "+
			"Ratios within a few percent of a budget are not findings: rerun on a quiet machine.\n", other, 100*spread)
	case spread > noisySpread:
		fmt.Fprintf(w, "- NOISY: one target's rps varied by up to %.0f%% between runs with no outside load (≤ %.2f cores): "+
			"scheduling noise of a small machine. Read differences smaller than that as ties, or use more -rounds and a longer -duration.\n",
			100*spread, other)
	case rounds < 2:
		fmt.Fprintf(w, "- Noise: other processes ≤ %.2f cores, rps spread between runs ≤ %.0f%%; one round only, so each "+
			"figure rests on two runs (10–25%% apart on a 2-core machine): use -rounds 3 or more before reading a verdict.\n", other, 100*spread)
	default:
		fmt.Fprintf(w, "- Noise: low (other processes ≤ %.2f cores, rps spread between runs ≤ %.0f%%).\n", other, 100*spread)
	}
}

func met(ok bool) string {
	if ok {
		return "met"
	}
	return "MISSED"
}

// msf is d in milliseconds.
func msf(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// ratio is a/b as a factor with two decimals ("1.02×"), or "-" when
// there is no baseline to divide by.
func ratio(a, b float64) string {
	if b <= 0 || math.IsNaN(a) || math.IsNaN(b) {
		return "-"
	}
	return fmt.Sprintf("%.2f×", a/b)
}

// pct is a/b as a percentage with one decimal, or "-" when there is no
// baseline to divide by.
func pct(a, b float64) string {
	if b <= 0 || math.IsNaN(a) || math.IsNaN(b) {
		return "-"
	}
	return fmt.Sprintf("%.1f%%", 100*a/b)
}

// num formats x with prec decimals, or "-" for NaN (a value that does not
// apply, like the CPU of the proxy when there is none).
func num(x float64, prec int) string {
	if math.IsNaN(x) {
		return "-"
	}
	return fmt.Sprintf("%.*f", prec, x)
}

// spread is the rps spread over a target's runs as a percentage.
func spread(s sample) string { return fmt.Sprintf("%.0f%%", 100*s.spread) }

// failed is "0", or the count with its share of all requests.
func failed(s sample) string {
	if s.failed == 0 {
		return "0"
	}
	return fmt.Sprintf("%d (%.2f%%)", s.failed, 100*s.errorRate())
}

// writeMarkdownTable pads every column so the table lines up in a
// terminal as well as rendering as markdown. The first column is left
// aligned, the rest (numbers) right aligned.
func writeMarkdownTable(w io.Writer, header []string, rows [][]string) {
	width := make([]int, len(header))
	for _, r := range append([][]string{header}, rows...) {
		for i, s := range r {
			width[i] = max(width[i], utf8.RuneCountInString(s))
		}
	}
	line := func(cells []string) {
		var b strings.Builder
		b.WriteString("|")
		for i, s := range cells {
			pad := strings.Repeat(" ", width[i]-utf8.RuneCountInString(s))
			if i == 0 {
				b.WriteString(" " + s + pad + " |")
			} else {
				b.WriteString(" " + pad + s + " |")
			}
		}
		fmt.Fprintln(w, b.String())
	}
	line(header)
	sep := make([]string, len(header))
	for i, n := range width {
		if i == 0 {
			sep[i] = strings.Repeat("-", n)
		} else {
			sep[i] = strings.Repeat("-", n-1) + ":"
		}
	}
	line(sep)
	for _, r := range rows {
		line(r)
	}
}
