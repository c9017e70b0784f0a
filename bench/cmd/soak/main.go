// Command soak runs gatehouse for a long while at a steady mixed load —
// streamed and plain chat completions, streams the client abandons,
// requests refused by a rate limit, requests that fail over from a flaky
// upstream to a steady one, the Messages dialect — with a config reload
// every minute, and checks that nothing accumulates: goroutines, open
// files and heap return to where they were before the load, and every
// request the client sent has exactly one usage record.
//
//	soak -gatehouse bin/gatehouse -mockllm bin/mockllm [-duration 20m] [-rate 40] [-out FILE]
//
// It exits non-zero when a check fails, so `make soak` is a test.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"syscall"
	"time"

	"gatehouse/bench/internal/benchcli"
)

type options struct {
	benchcli.Common
	duration time.Duration // the load phase
	warmup   time.Duration // load before the baseline is taken
	rate     int           // requests started per second
	reload   time.Duration // SIGHUP interval
	sample   time.Duration // how often the gateway's gauges are read
}

func parseFlags(args []string) (options, error) {
	var o options
	fs := flag.NewFlagSet("soak", flag.ContinueOnError)
	o.Register(fs, "required", 1, "unused")
	fs.DurationVar(&o.duration, "duration", 20*time.Minute, "how long the steady load runs")
	fs.DurationVar(&o.warmup, "warmup", time.Minute, "load before the baseline is read, so pools and caches are full")
	fs.IntVar(&o.rate, "rate", 40, "requests started per second")
	fs.DurationVar(&o.reload, "reload", time.Minute, "how often the config is reloaded (SIGHUP) during the load")
	fs.DurationVar(&o.sample, "sample", 10*time.Second, "how often goroutines, open files and memory are read")
	quick := fs.Bool("quick", false, "a two-minute run (warm-up 20s, reload every 30s) to try the harness")
	if err := fs.Parse(args); err != nil {
		return o, err
	}
	if *quick {
		o.duration, o.warmup, o.reload, o.sample = 2*time.Minute, 20*time.Second, 30*time.Second, 5*time.Second
	}
	switch {
	case o.Gatehouse == "" || o.Mockllm == "":
		return o, errors.New("-gatehouse and -mockllm are required")
	case o.duration <= 0 || o.warmup < 0 || o.reload <= 0 || o.sample <= 0:
		return o, errors.New("-duration, -reload and -sample must be positive, -warmup not negative")
	case o.rate < 1 || o.rate > 2000:
		return o, errors.New("-rate must be 1 to 2000 requests a second")
	}
	return o, o.Absolute()
}

func main() {
	o, err := parseFlags(os.Args[1:])
	if err != nil {
		fmt.Fprintln(os.Stderr, "soak:", err)
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	rep, err := run(ctx, o)
	if rep != nil {
		text := rep.markdown()
		fmt.Print(text)
		if o.Out != "" {
			if werr := os.WriteFile(o.Out, []byte(text), 0o644); werr != nil && err == nil {
				err = werr
			}
		}
		if err == nil && !rep.passed() {
			err = errors.New("a check failed (see the report)")
		}
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "soak:", err)
		os.Exit(1)
	}
}
