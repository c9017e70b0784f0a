// Command benchrun is gatehouse's load benchmark. It starts mockllm, a
// plain net/http/httputil reverse proxy, and gatehouse twice (--bare and
// full stack), drives the same closed-loop load through each, and prints,
// per scenario and concurrency, throughput, latency, CPU and memory with
// ratios against the baselines measured in the same run.
//
// Ratios are the point: the load generator shares the machine with the
// processes it measures, so absolute numbers say as much about the machine
// as about gatehouse, while targets run back to back under the same
// conditions compare fairly. It runs the real binaries as processes and
// must not import the gatehouse module.
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
	"net/http"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"gatehouse/bench/internal/benchcli"
	"gatehouse/bench/internal/proc"
)

// Target names, in the order they run and are printed.
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
)

// targetFlags maps the -targets values to target names.
var targetFlags = map[string]string{"direct": direct, "plainproxy": plainproxy, "bare": bare, "full": full, "nolimits": noLimits,
	"quiet": quiet, "cache": cacheHits, "cache-miss": cacheMisses}

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
	duration, warmup time.Duration
	concurrency      []int
	scenarios        []scenario
	targets          map[string]bool // by target name
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
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()

	b, err := setup(ctx, o)
	defer func() { b.Close(o.Keep, "benchrun") }() // setup returns a bench to close even when it fails
	if err != nil {
		fmt.Fprintln(os.Stderr, "benchrun: setup:", benchcli.Interrupted(ctx, err))
		return exitSetup
	}

	runs := len(o.scenarios) * len(o.concurrency) * len(b.targets) * o.Rounds
	fmt.Fprintf(os.Stderr, "benchrun: %d runs of %s after %s of warm-up: about %s\n",
		runs, o.duration, o.warmup, (time.Duration(runs) * (o.duration + o.warmup + time.Second/2)).Round(time.Second))
	var doc bytes.Buffer
	w := io.MultiWriter(os.Stdout, &doc)
	writeHeader(w, o, b.targets)
	var cells []cell
	code := exitOK
	for _, sc := range o.scenarios {
		for _, c := range o.concurrency {
			spec := runSpec{scenario: sc, concurrency: c, warmup: o.warmup, duration: o.duration}
			cl, err := runCell(ctx, b, spec, o.Rounds)
			if err != nil {
				fmt.Fprintln(os.Stderr, "benchrun:", benchcli.Interrupted(ctx, err))
				return exitSetup
			}
			writeTable(w, cl, o.Rounds)
			if cl.tooManyErrors() {
				code = exitErrors
			}
			cells = append(cells, cl)
		}
	}
	writeVerdicts(w, cells, o.Rounds)
	if o.Out != "" {
		if err := os.WriteFile(o.Out, doc.Bytes(), 0o644); err != nil {
			fmt.Fprintln(os.Stderr, "benchrun:", err)
			return exitSetup
		}
	}
	if code == exitErrors {
		fmt.Fprintf(os.Stderr, "benchrun: FAILED: some runs had more than %.1f%% failed requests; their numbers are not measurements (see the errors under each table)\n", maxErrorRate*100)
	}
	return code
}

// interrupted replaces err by a plain statement when Ctrl-C caused it.
func parseFlags(args []string) (options, error) {
	fs := flag.NewFlagSet("benchrun", flag.ContinueOnError)
	var o options
	o.Register(fs, "without it, only direct and plainproxy run", 3, "run all targets this many times per cell, back to back, and report medians")
	fs.StringVar(&o.plainproxy, "plainproxy", "", "plainproxy binary (default: built from ./cmd/plainproxy into the temp dir)")
	fs.DurationVar(&o.duration, "duration", 10*time.Second, "timed load per target, per scenario and concurrency")
	fs.DurationVar(&o.warmup, "warmup", 2*time.Second, "discarded load before each timed run")
	conc := fs.String("concurrency", "32,256", "comma-separated numbers of concurrent clients")
	scen := fs.String("scenarios", "nonstream,stream,stream-usage", "comma-separated: nonstream, stream (the client does not ask for usage; gatehouse does), stream-usage (the client asks for usage)")
	tgts := fs.String("targets", "direct,plainproxy,bare,full", "comma-separated: direct, plainproxy, bare, full, nolimits (full without rate limits or budget: the cost of admission control), quiet (full with x-ratelimit headers on 429s only), cache (nolimits with the exact cache on: every request after the first a hit), cache-miss (the same, every request a miss)")
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
	if o.duration <= 0 || o.warmup < 0 || o.Rounds < 1 {
		return o, errors.New("-duration must be > 0, -warmup ≥ 0 and -rounds ≥ 1")
	}
	for f := range strings.SplitSeq(*conc, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n < 1 {
			return o, fmt.Errorf("-concurrency: %q is not a positive number", f)
		}
		o.concurrency = append(o.concurrency, n)
	}
	for f := range strings.SplitSeq(*scen, ",") {
		switch f = strings.TrimSpace(f); f {
		case "nonstream", "stream", "stream-usage":
			o.scenarios = append(o.scenarios, scenario{name: f, stream: f != "nonstream", usage: f == "stream-usage"})
		default:
			return o, fmt.Errorf("-scenarios: unknown scenario %q", f)
		}
	}
	o.targets = map[string]bool{}
	for f := range strings.SplitSeq(*tgts, ",") {
		name, ok := targetFlags[strings.TrimSpace(f)]
		if !ok {
			return o, fmt.Errorf("-targets: unknown target %q", f)
		}
		o.targets[name] = true
	}
	if o.Gatehouse == "" && (o.targets[bare] || o.targets[full] || o.targets[noLimits] || o.targets[quiet] || o.targets[cacheHits] || o.targets[cacheMisses]) {
		fmt.Fprintln(os.Stderr, "benchrun: no -gatehouse binary: measuring direct and plainproxy only")
		for _, t := range []string{bare, full, noLimits, quiet, cacheHits, cacheMisses} {
			delete(o.targets, t)
		}
	}
	return o, o.Absolute(&o.plainproxy)
}

// bench is the set of running processes and the targets they make up.
type bench struct {
	*proc.Group // the processes, in start order, and their temp dir
	targets     []target
}

// setup starts mockllm and every proxy in o.targets and checks that each
// target answers both kinds of request. The returned bench is never nil.
func setup(ctx context.Context, o options) (*bench, error) {
	b := &bench{}
	g, err := proc.NewGroup("gatehouse-bench-")
	if err != nil {
		return b, err
	}
	b.Group = g
	dir := g.Dir

	mock, err := b.Start("mockllm", o.Mockllm, "-listen", "127.0.0.1:0")
	if err != nil {
		return b, err
	}
	mockAddr, err := mock.WaitListening(ctx, readyTimeout)
	if err != nil {
		return b, err
	}
	if o.targets[direct] {
		b.targets = append(b.targets, target{name: direct, url: chatURL(mockAddr)})
	}

	if o.targets[plainproxy] {
		bin := o.plainproxy
		if bin == "" {
			if bin, err = buildPlainproxy(dir); err != nil {
				return b, err
			}
		}
		p, err := b.Start("plainproxy", bin, "-listen", "127.0.0.1:0", "-upstream", "http://"+mockAddr)
		if err != nil {
			return b, err
		}
		addr, err := p.WaitListening(ctx, readyTimeout)
		if err != nil {
			return b, err
		}
		b.targets = append(b.targets, target{name: plainproxy, url: chatURL(addr), proc: p})
	}

	addrs, err := proc.FreePorts(6)
	if err != nil {
		return b, err
	}
	for i, name := range []string{bare, full, noLimits, quiet, cacheHits, cacheMisses} {
		if !o.targets[name] {
			continue
		}
		file := "gatehouse-" + strings.NewReplacer(" ", "-", ",", "", "--", "").Replace(strings.TrimPrefix(name, "gatehouse "))
		cfg := filepath.Join(dir, file+".yaml")
		cached := name == cacheHits || name == cacheMisses
		yaml := gatehouseConfig(addrs[i], filepath.Join(dir, file+".db"), mockAddr, name != noLimits && !cached,
			name == quiet, cached)
		if err := os.WriteFile(cfg, []byte(yaml), 0o600); err != nil {
			return b, err
		}
		args := []string{"serve", "--config", cfg}
		if name == bare {
			args = append(args, "--bare")
		}
		p, err := b.Start(file, o.Gatehouse, args...)
		if err != nil {
			return b, err
		}
		if err := p.WaitReady(ctx, "http://"+addrs[i]+"/readyz", readyTimeout); err != nil {
			return b, err
		}
		tg := target{name: name, url: chatURL(addrs[i]), proc: p}
		if name == cacheMisses {
			tg.header = http.Header{"X-Gatehouse-Cache-Ttl": {"0"}}
		}
		b.targets = append(b.targets, tg)
	}
	if len(b.targets) == 0 {
		return b, errors.New("no targets to measure")
	}

	for _, tg := range b.targets {
		for _, stream := range []bool{false, true} {
			if err := probe(tg, stream); err != nil {
				return b, err
			}
		}
	}
	return b, nil
}

func chatURL(addr string) string { return "http://" + addr + "/v1/chat/completions" }

// gatehouseConfig is the config both gatehouse instances run with. The
// key's limits and budget are far out of reach so that the full stack
// does all its admission work without ever refusing; caching is off
// because a cache hit would skip the upstream the baselines must call.
func gatehouseConfig(listen, sqlite, mockAddr string, limits, quietHeaders, cached bool) string {
	key := "  - {key: " + benchKey + ", project: bench}\n"
	if limits {
		key = "  - {key: " + benchKey + ", project: bench, rpm: 100000000, tpm: 1000000000000, budget: {usd: 1000000000, period: total}}\n"
	}
	if quietHeaders {
		key += "limits: {headers: refusals}\n"
	}
	return fmt.Sprintf(`# Generated by bench/cmd/benchrun.
listen: %s
storage: {sqlite: %s}
log: {level: info}
providers:
  - {name: mock, type: openai-compatible, base_url: http://%s/v1, api_key: sk-mock}
models:
  - name: gpt-4o-mini
    targets: [{provider: mock, model: gpt-4o-mini}]
keys:
%scache:
  exact: {enabled: %t}
  semantic: {enabled: false}
`, listen, sqlite, mockAddr, key, cached)
}

// buildPlainproxy builds the baseline proxy from this module; it works
// when benchrun is started from inside bench/, as `make bench` does.
func buildPlainproxy(dir string) (string, error) {
	bin := filepath.Join(dir, "plainproxy")
	out, err := exec.Command("go", "build", "-o", bin, "gatehouse/bench/cmd/plainproxy").CombinedOutput()
	if err != nil {
		return "", fmt.Errorf("build plainproxy (run from bench/ or pass -plainproxy): %w\n%s", err, out)
	}
	return bin, nil
}

// probe sends one request so that a misconfigured target fails setup with
// its answer and log, instead of producing a table of errors.
func probe(tg target, stream bool) error {
	req, err := http.NewRequest(http.MethodPost, tg.url, bytes.NewReader(requestBody(scenario{stream: stream})))
	if err != nil {
		return err
	}
	req.Header.Set("Authorization", "Bearer "+benchKey)
	req.Header.Set("Content-Type", "application/json")
	for k, v := range tg.header {
		req.Header[k] = v
	}
	resp, err := (&http.Client{Timeout: 10 * time.Second}).Do(req)
	var body []byte
	if err == nil {
		body, err = io.ReadAll(resp.Body)
		resp.Body.Close()
	}
	switch {
	case err != nil:
	case resp.StatusCode != http.StatusOK:
		err = fmt.Errorf("HTTP %d: %s", resp.StatusCode, snippet(body))
	case stream && !bytes.Contains(body, []byte("data: [DONE]")):
		err = fmt.Errorf("stream ended without data: [DONE]: %s", snippet(body))
	default:
		return nil
	}
	err = fmt.Errorf("probe %s (stream=%t): %w", tg.name, stream, err)
	if tg.proc != nil {
		err = fmt.Errorf("%w\n--- last lines of %s ---\n%s", err, tg.proc.Log, tg.proc.Tail(20))
	}
	return err
}

// runCell measures every target for one scenario and concurrency. Each
// round runs all targets back to back, starting one target further along
// each time, so that slow drifts in machine load (thermal, other tenants)
// spread over all targets rather than landing on whichever runs last.
func runCell(ctx context.Context, b *bench, spec runSpec, rounds int) (cell, error) {
	targets := b.targets
	m := meter{pids: []int{os.Getpid()}}
	for _, p := range b.Procs() {
		m.pids = append(m.pids, p.Pid())
	}
	byName := map[string][]sample{}
	for r := range rounds {
		for i := range targets {
			tg := targets[(i+r)%len(targets)]
			s, err := measure(ctx, tg, spec, m)
			if err != nil {
				return cell{}, fmt.Errorf("%s c=%d %s: %w", spec.name, spec.concurrency, tg.name, err)
			}
			fmt.Fprintf(os.Stderr, "  %-9s c=%-4d round %d/%d  %-16s %9.0f rps  p99 %7.2f ms  %d failed  other load %.2f cores\n",
				spec.name, spec.concurrency, r+1, rounds, tg.name, s.rps, msf(s.p99), s.failed, s.other)
			byName[tg.name] = append(byName[tg.name], s)
			if tg.proc != nil {
				waitIdle(ctx, tg.proc.Pid(), 3*time.Second)
			}
		}
	}
	fmt.Fprintln(os.Stderr)
	c := cell{spec: spec}
	for _, tg := range targets {
		c.rows = append(c.rows, row{name: tg.name, sample: median(byName[tg.name])})
	}
	return c, nil
}
