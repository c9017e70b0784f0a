// Command streams measures what holding many concurrent streams costs a
// proxy (issue 16): it starts mockllm (streams of -events events, -gap
// apart), gatehouse with the full stack (embedded mode, a key with limits
// and a budget, usage records) and the plain reverse proxy in front of the
// same mockllm, then for each count N opens N streaming chat completions
// at once against each target and reports, per target, the streams that
// completed, the resident memory each open stream cost the target process,
// and the time to the first event: the burst's, and that of probe streams
// opened one at a time while all N are open.
//
// Every run starts the target afresh, so its idle memory is a process
// that has served one request and no burst yet, and its peak (VmHWM, reset
// just before the burst) is that run's alone. Targets run in ABBA order
// within each round and the report shows medians over rounds, with ratios
// against the plain proxy measured in the same run: the absolute figures
// are the machine's as much as the proxy's.
//
// Like the other benchmark commands it runs the real binaries and must not
// import the gatehouse module.
//
// Usage (from bench/):
//
//	go run ./cmd/streams -gatehouse ../bin/gatehouse -mockllm ../bin/mockllm
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"gatehouse/bench/internal/benchcli"
)

// Exit codes, as benchrun's.
const (
	exitOK         = 0
	exitIncomplete = 1 // some stream did not complete: the figures are not a measurement of equals
	exitSetup      = 2
)

type options struct {
	benchcli.Common
	plainproxy string
	before     string // an older gatehouse binary, for the before target
	counts     []int
	targets    []targetSpec
	events     int
	gap        time.Duration
	nofile     uint64
	dials      int
	probes     int
	quick      bool
	command    []string
}

func main() { os.Exit(run()) }

func run() int {
	o, err := parseFlags(os.Args[1:])
	if err != nil {
		fmt.Fprintln(os.Stderr, "streams:", err)
		return exitSetup
	}
	o.command = append([]string{"go", "run", "./cmd/streams"}, os.Args[1:]...)
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()

	h, err := newHarness(ctx, o)
	defer h.close()
	if err != nil {
		fmt.Fprintln(os.Stderr, "streams:", benchcli.Interrupted(ctx, err))
		return exitSetup
	}
	res, err := h.runAll(ctx)
	if err != nil {
		fmt.Fprintln(os.Stderr, "streams:", benchcli.Interrupted(ctx, err))
		return exitSetup
	}
	var b strings.Builder
	writeReport(&b, o, h.nofile, res)
	fmt.Print(b.String())
	if o.Out != "" {
		if err := os.WriteFile(o.Out, []byte(b.String()), 0o644); err != nil {
			fmt.Fprintln(os.Stderr, "streams:", err)
			return exitSetup
		}
	}
	for _, c := range res {
		for _, r := range c.rows {
			if r.incomplete > 0 {
				return exitIncomplete
			}
		}
	}
	return exitOK
}

func parseFlags(args []string) (options, error) {
	var o options
	fs := flag.NewFlagSet("streams", flag.ContinueOnError)
	o.Register(fs, "required for the full and before targets", 3, "ABBA rounds per count; the report shows medians")
	fs.StringVar(&o.plainproxy, "plainproxy", "", "plainproxy binary (default: built from ./cmd/plainproxy)")
	fs.StringVar(&o.before, "before", "", "an older gatehouse binary, run with the full config as the before target")
	counts := fs.String("n", "1000,10000", "concurrent streams per run, comma-separated")
	targets := fs.String("targets", "plainproxy,full", "targets: plainproxy, full, full-h1 (full on gatehouse's own HTTP/1.x engine), before, before-h1 (before on the engine), each optionally +KEY=VALUE… for its environment (full+GOGC=50)")
	fs.IntVar(&o.events, "events", 50, "data events per stream before [DONE] (role, content…, finish, usage)")
	fs.DurationVar(&o.gap, "gap", 20*time.Millisecond, "time between content events; the streams' length, and so the window the probes have, is about (events − 3) × gap")
	fs.IntVar(&o.probes, "probes", 200, "streams of one content chunk opened one at a time while all N are open, for the TTFE goal (0: none)")
	fs.Uint64Var(&o.nofile, "nofile", 0, "RLIMIT_NOFILE for the harness and every process it starts (default: 3 per stream of the largest count plus 4096)")
	fs.IntVar(&o.dials, "dials", 0, "at most this many streams opening a connection and writing their request at once (0: all N at once)")
	fs.BoolVar(&o.quick, "quick", false, "a short run: -n 1000 -rounds 1 unless set")
	if err := fs.Parse(args); err != nil {
		return o, err
	}
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	if o.quick {
		if !set["n"] {
			*counts = "1000"
		}
		if !set["rounds"] {
			o.Rounds = 1
		}
	}
	var err error
	if o.counts, err = parseCounts(*counts); err != nil {
		return o, err
	}
	if o.targets, err = parseTargets(*targets); err != nil {
		return o, err
	}
	if o.Mockllm == "" {
		return o, errors.New("-mockllm is required")
	}
	for _, t := range o.targets {
		if (t.kind == kindFull || t.kind == kindFullH1) && o.Gatehouse == "" {
			return o, fmt.Errorf("target %s needs -gatehouse", t.name)
		}
		if (t.kind == kindBefore || t.kind == kindBeforeH1) && o.before == "" {
			return o, fmt.Errorf("target %s needs -before", t.name)
		}
	}
	if o.events < 4 {
		return o, errors.New("-events must be at least 4 (role, one content, finish and usage events)")
	}
	if o.gap <= 0 {
		return o, errors.New("-gap must be positive")
	}
	if o.dials < 0 {
		return o, errors.New("-dials must not be negative")
	}
	if o.probes < 0 {
		return o, errors.New("-probes must not be negative")
	}
	if o.Rounds < 1 {
		return o, errors.New("-rounds must be at least 1")
	}
	if o.nofile == 0 {
		o.nofile = uint64(3*maxOf(o.counts) + 4096)
	}
	return o, o.Absolute(&o.plainproxy, &o.before)
}

func maxOf(xs []int) int {
	m := 0
	for _, x := range xs {
		m = max(m, x)
	}
	return m
}
