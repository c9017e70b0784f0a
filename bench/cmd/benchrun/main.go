// Command benchrun is gatehouse's standing load benchmark (issue 16's
// `make bench`). It starts mockllm, a plain net/http/httputil reverse
// proxy and gatehouse in several configurations, drives the same
// closed-loop load through each, and prints, per layout, scenario and
// concurrency, throughput, latency, CPU and memory with ratios against the
// baselines measured in the same run, then the goals as verdicts.
//
// Ratios are the point: the load generator shares the machine with the
// processes it measures, so absolute numbers say as much about the machine
// as about gatehouse, while targets measured in ABBA order within each
// round compare fairly. It runs the real binaries as processes and must
// not import the gatehouse module.
//
// Usage (from bench/):
//
//	go run ./cmd/benchrun -gatehouse ../bin/gatehouse -mockllm ../bin/mockllm
package main

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"gatehouse/bench/internal/benchcli"
)

// Target names, as the report prints them.
const (
	direct     = "direct"
	plainproxy = "plainproxy"
	bare       = "gatehouse --bare"
	full       = "gatehouse full"
	// noLimits is the full stack with a key that has no rate limits or
	// budget, so admission control has nothing to check: full against it
	// is what admission costs.
	noLimits = "gatehouse no limits"
	// quiet is full with limits.headers: refusals: admitted responses
	// carry no x-ratelimit-* headers, so full against quiet is what the
	// six headers cost and quiet against noLimits the rest of admission.
	quiet = "gatehouse full, headers on 429"
	// cacheHits is noLimits with the exact cache on: the load repeats one
	// request, so after the first every request is a hit, and cacheHits
	// against noLimits is the hit path against the upstream path.
	cacheHits = "gatehouse cache hits"
	// cacheMisses is the same config with every request a miss: they
	// carry x-gatehouse-cache-ttl: 0, so the cache is read (and has
	// nothing) but nothing is stored. cacheHits against it is the
	// issue's hit path against the miss path.
	cacheMisses = "gatehouse cache misses"
	// redisMode is full in cluster mode: limits and budgets checked in a
	// Redis the harness starts, keys and usage records in a PostgreSQL
	// it starts. Against full (embedded mode) it is what a cluster costs.
	redisMode = "gatehouse redis"
	// leaseMode is redisMode with limits.lease on: each admission comes
	// out of batches taken from Redis in the background, so against
	// redisMode it is what the per-request round trips cost.
	leaseMode = "gatehouse redis, leases"
	// baseFull is full served by another gatehouse binary (-base), in
	// the same rounds: two builds compared side by side, each against
	// the same plainproxy runs.
	baseFull = "base gatehouse full"
	// baseRedis is redisMode served by the -base binary: two builds
	// compared in cluster mode, on the same Redis and PostgreSQL.
	baseRedis = "base gatehouse redis"
)

// targetFlags lists the -targets values and their target names, in the
// order targets run (forward, then mirrored: see abba) and are printed.
var targetFlags = []struct{ flag, name string }{
	{"direct", direct}, {"plainproxy", plainproxy}, {"bare", bare}, {"full", full},
	{"nolimits", noLimits}, {"quiet", quiet}, {"cache", cacheHits}, {"cache-miss", cacheMisses},
	{"redis", redisMode}, {"redis-lease", leaseMode}, {"base-full", baseFull},
	{"base-redis", baseRedis},
}

// gatehouseTargets are the targets that need the gatehouse binary.
var gatehouseTargets = []string{bare, full, noLimits, quiet, cacheHits, cacheMisses, redisMode, leaseMode, baseFull, baseRedis}

// maxErrorRate is the failure rate above which a run is not a measurement.
const maxErrorRate = 0.001

// Exit codes.
const (
	exitOK     = 0
	exitErrors = 1 // some run failed more than maxErrorRate of its requests
	exitSetup  = 2 // a process did not start, a flag was wrong, or Ctrl-C
)

// readyTimeout bounds the wait for each process to accept requests.
const readyTimeout = 15 * time.Second

type options struct {
	benchcli.Common
	plainproxy       string
	base             string // the gatehouse binary of the base-full target
	duration, warmup time.Duration
	layouts          []string
	concurrency      []int
	rate             int // requests a second in an open loop; 0 for the closed loop
	scenarios        []scenario
	targets          map[string]bool // by target name
	profiles         string          // directory for CPU profiles; "" keeps none
	command          []string        // the command line, for the report's header
	dir              string          // the directory it ran in, for the same
	version          string          // what the gatehouse binary says it is, for the same
}

func main() { os.Exit(run()) }

// run returns the exit code, so that every deferred cleanup has run before
// main exits.
func run() int {
	o, err := parseFlags(os.Args[1:])
	if err != nil {
		fmt.Fprintln(os.Stderr, "benchrun:", err)
		return exitSetup
	}
	o.command = append([]string{"go", "run", "./cmd/benchrun"}, os.Args[1:]...)
	o.dir, _ = os.Getwd()
	o.version = gatehouseVersion(o.Gatehouse)
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()

	h, err := newHarness(o)
	defer h.close() // newHarness returns a harness to close even when it fails
	if err != nil {
		fmt.Fprintln(os.Stderr, "benchrun: setup:", err)
		return exitSetup
	}

	runs := len(o.layouts) * len(o.scenarios) * len(o.concurrency) * len(h.targetNames()) * o.Rounds * 2
	fmt.Fprintf(os.Stderr, "benchrun: %d runs of %s after %s of warm-up: about %s\n",
		runs, o.duration, o.warmup, (time.Duration(runs) * (o.duration + o.warmup + time.Second/2)).Round(time.Second))
	var doc bytes.Buffer
	w := io.MultiWriter(os.Stdout, &doc)
	writeHeader(w, o, h.targetNames())
	var cells []cell
	code := exitOK
	for _, layout := range o.layouts {
		lc, err := h.runLayout(ctx, w, layout)
		cells = append(cells, lc...)
		if err != nil {
			fmt.Fprintln(os.Stderr, "benchrun:", benchcli.Interrupted(ctx, err))
			return exitSetup
		}
	}
	if slices.ContainsFunc(cells, cell.tooManyErrors) {
		code = exitErrors
	}
	writeRatios(w, cells)
	writeVerdicts(w, cells, o.Rounds)
	if o.Out != "" {
		if err := os.WriteFile(o.Out, doc.Bytes(), 0o644); err != nil {
			fmt.Fprintln(os.Stderr, "benchrun:", err)
			return exitSetup
		}
	}
	if o.profiles != "" {
		fmt.Fprintf(os.Stderr, "benchrun: CPU profiles in %s (go tool pprof -top FILE)\n", o.profiles)
	}
	if code == exitErrors {
		fmt.Fprintf(os.Stderr, "benchrun: FAILED: some runs had more than %.1f%% failed requests; their numbers are not measurements (see the errors under each table)\n", maxErrorRate*100)
	}
	return code
}

// runLayout measures every scenario and concurrency in one layout,
// printing each cell's table as it is done.
func (h *harness) runLayout(ctx context.Context, w io.Writer, layout string) ([]cell, error) {
	pl, err := place(layout, h.cpus)
	if err != nil {
		return nil, err
	}
	if err := pl.apply(); err != nil {
		return nil, err
	}
	fmt.Fprintf(os.Stderr, "benchrun: layout %s\n", layout)
	if err := h.startServices(ctx, pl); err != nil {
		return nil, fmt.Errorf("setup (%s): %w", layout, benchcli.Interrupted(ctx, err))
	}
	defer h.services.Stop()
	var cells []cell
	for _, sc := range h.o.scenarios {
		targets, err := h.startTargets(ctx, pl, sc)
		if err != nil {
			return cells, fmt.Errorf("setup (%s, %s): %w", layout, sc.name, benchcli.Interrupted(ctx, err))
		}
		for _, c := range h.o.concurrency {
			spec := runSpec{scenario: sc, layout: layout, concurrency: c, rate: h.o.rate, warmup: h.o.warmup, duration: h.o.duration}
			cl, err := runCell(ctx, targets, spec, h.o.Rounds)
			if err != nil {
				return cells, err
			}
			writeTable(w, cl)
			cells = append(cells, cl)
		}
		// Stopped, the proxies write their CPU profiles of this scenario.
		h.proxies.Stop()
	}
	return cells, nil
}

func parseFlags(args []string) (options, error) {
	fs := flag.NewFlagSet("benchrun", flag.ContinueOnError)
	var o options
	o.Register(fs, "without it, only direct and plainproxy run", 3, "rounds per cell; each runs every target twice, in ABBA order, and the report shows medians over rounds")
	fs.StringVar(&o.plainproxy, "plainproxy", "", "plainproxy binary (default: built from ./cmd/plainproxy into the temp dir)")
	fs.StringVar(&o.base, "base", "", "another gatehouse binary, for the base-full target (e.g. main's build, to compare with -gatehouse's)")
	fs.DurationVar(&o.duration, "duration", 5*time.Second, "timed load per run (each target runs twice per round)")
	fs.DurationVar(&o.warmup, "warmup", time.Second, "discarded load before each timed run")
	lay := fs.String("layout", "pinned,unpinned", "comma-separated: pinned (the proxy alone on one CPU at GOMAXPROCS=1, load and upstream on another; needs taskset), unpinned (no pinning, the proxy at GOMAXPROCS=2)")
	conc := fs.String("concurrency", "32,256", "comma-separated numbers of concurrent clients (with -rate: of requests in flight at most)")
	fs.IntVar(&o.rate, "rate", 0, "open loop: send this many requests a second to every target, whatever its answers, instead of each client's next request when its last is answered; latencies are then compared at one rate, throughput is not judged (0: closed loop)")
	scen := fs.String("scenarios", "nonstream,stream-usage", "comma-separated: nonstream, stream (the client does not ask for usage; gatehouse does), stream-usage (the client asks for usage)")
	tgts := fs.String("targets", "plainproxy,bare,full,cache,cache-miss,redis", "comma-separated: direct (no proxy), plainproxy, bare, full, nolimits (full without rate limits or budget: the cost of admission control), quiet (full with x-ratelimit headers on 429s only), cache (nolimits with the exact cache on: every request after the first a hit), cache-miss (the same, every request a miss), redis (full in cluster mode: Redis and PostgreSQL, both started by the harness), redis-lease (redis with limits.lease on), base-full (full served by the -base binary), base-redis (redis served by the -base binary)")
	fs.StringVar(&o.profiles, "profiles", "", "keep a CPU profile of every proxy per layout and scenario in this directory (LAYOUT-SCENARIO-TARGET.pprof)")
	quick := fs.Bool("quick", false, "smoke test: -duration 1s -warmup 200ms -rounds 1 unless set explicitly")
	if err := fs.Parse(args); err != nil {
		return o, err
	}
	if fs.NArg() > 0 {
		return o, fmt.Errorf("unexpected arguments %q", fs.Args())
	}
	if *quick {
		set := map[string]bool{}
		fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
		if !set["duration"] {
			o.duration = time.Second
		}
		if !set["warmup"] {
			o.warmup = 200 * time.Millisecond
		}
		if !set["rounds"] {
			o.Rounds = 1
		}
	}

	if o.Mockllm == "" {
		return o, errors.New("-mockllm is required")
	}
	if o.duration <= 0 || o.warmup < 0 || o.Rounds < 1 || o.rate < 0 {
		return o, errors.New("-duration must be > 0, -warmup ≥ 0, -rounds ≥ 1 and -rate ≥ 0")
	}
	for _, f := range benchcli.List(*lay) {
		if f != pinned && f != unpinned {
			return o, fmt.Errorf("-layout: unknown layout %q (pinned, unpinned)", f)
		}
		o.layouts = append(o.layouts, f)
	}
	for _, f := range benchcli.List(*conc) {
		n, err := strconv.Atoi(f)
		if err != nil || n < 1 {
			return o, fmt.Errorf("-concurrency: %q is not a positive number", f)
		}
		o.concurrency = append(o.concurrency, n)
	}
	for _, f := range benchcli.List(*scen) {
		switch f {
		case "nonstream", "stream", "stream-usage":
			o.scenarios = append(o.scenarios, scenario{name: f, stream: f != "nonstream", usage: f == "stream-usage"})
		default:
			return o, fmt.Errorf("-scenarios: unknown scenario %q", f)
		}
	}
	o.targets = map[string]bool{}
	for _, f := range benchcli.List(*tgts) {
		name := targetName(f)
		if name == "" {
			return o, fmt.Errorf("-targets: unknown target %q", f)
		}
		o.targets[name] = true
	}
	if len(o.layouts) == 0 || len(o.concurrency) == 0 || len(o.scenarios) == 0 || len(o.targets) == 0 {
		return o, errors.New("-layout, -concurrency, -scenarios and -targets must each name at least one")
	}
	if o.Gatehouse == "" && slices.ContainsFunc(gatehouseTargets, func(t string) bool { return o.targets[t] }) {
		fmt.Fprintln(os.Stderr, "benchrun: no -gatehouse binary: measuring direct and plainproxy only")
		for _, t := range gatehouseTargets {
			delete(o.targets, t)
		}
	}
	if (o.targets[baseFull] || o.targets[baseRedis]) && o.base == "" {
		return o, errors.New("-targets base-full and base-redis need -base, the other gatehouse binary")
	}
	if o.profiles != "" {
		if err := os.MkdirAll(o.profiles, 0o755); err != nil {
			return o, fmt.Errorf("-profiles: %w", err)
		}
	}
	return o, o.Absolute(&o.plainproxy, &o.profiles, &o.base)
}

// targetName is the target a -targets value names, or "".
func targetName(flag string) string {
	for _, t := range targetFlags {
		if t.flag == flag {
			return t.name
		}
	}
	return ""
}

// targetFlag is the -targets value of a target name, which also names its
// files (configs, logs, profiles).
func targetFlag(name string) string {
	for _, t := range targetFlags {
		if t.name == name {
			return t.flag
		}
	}
	return ""
}

// profilePath is where the CPU profile of one proxy in one layout and
// scenario goes, or "" when profiles are not kept.
func (o options) profilePath(layout, scenario, target string) string {
	if o.profiles == "" {
		return ""
	}
	return filepath.Join(o.profiles, layout+"-"+scenario+"-"+targetFlag(target)+".pprof")
}

// gatehouseVersion is what `gatehouse version` prints (the release and
// commit make build stamps), so a report names the code it measured; ""
// without a binary or an answer.
func gatehouseVersion(bin string) string {
	if bin == "" {
		return ""
	}
	out, err := exec.Command(bin, "version").Output()
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(out))
}

// commandLine quotes args for a POSIX shell where they need it, so the
// report's header can be pasted back into one.
func commandLine(args []string) string {
	q := make([]string, len(args))
	for i, a := range args {
		if a != "" && strings.Trim(a, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_=.,/:+@%") == "" {
			q[i] = a
		} else {
			q[i] = "'" + strings.ReplaceAll(a, "'", `'\''`) + "'"
		}
	}
	return strings.Join(q, " ")
}
