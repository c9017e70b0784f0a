// This file orders the runs of a cell. A shared machine drifts: a
// neighbour's build starts, a cache warms, the CPU clocks down. Within a
// round the targets run forward and then mirrored (A B B A for two,
// A B C C B A for three), and a target's figure for the round is the mean
// of its two runs, so a drift that is linear over the round weighs on
// every target alike; the report then takes the median over rounds,
// which a one-off disturbance cannot move.

package main

import (
	"context"
	"fmt"
	"os"
	"slices"
	"time"

	"gatehouse/bench/internal/benchcli"
)

// runCell measures every target for one layout, scenario and concurrency.
func runCell(ctx context.Context, targets []target, spec runSpec, rounds int) (cell, error) {
	m := meter{root: os.Getpid()}
	byName := map[string][]sample{}
	allRPS := map[string][]float64{} // every run's, for the spread
	for r := range rounds {
		runs := map[string][]sample{}
		for _, i := range benchcli.ABBA(len(targets)) {
			tg := targets[i]
			s, err := measure(ctx, tg, spec, m)
			if err != nil {
				return cell{}, fmt.Errorf("%s %s c=%d %s: %w", spec.layout, spec.name, spec.concurrency, tg.name, err)
			}
			spilled := ""
			if s.spilled > 0 {
				spilled = "  usage records spilled " + spilledPct(s.spilled)
			}
			fmt.Fprintf(os.Stderr, "  %-8s %-12s c=%-4d round %d/%d  %-30s %9.0f rps  p99 %7.2f ms  %d failed  other load %.2f cores%s\n",
				spec.layout, spec.name, spec.concurrency, r+1, rounds, tg.name, s.rps, msf(s.p99), s.failed, s.other, spilled)
			runs[tg.name] = append(runs[tg.name], s)
			allRPS[tg.name] = append(allRPS[tg.name], s.rps)
			if tg.proc != nil {
				waitIdle(ctx, tg.proc.Pid(), 3*time.Second)
			}
		}
		for _, tg := range targets {
			byName[tg.name] = append(byName[tg.name], mean(runs[tg.name]))
		}
	}
	fmt.Fprintln(os.Stderr)
	c := cell{spec: spec}
	for _, tg := range targets {
		s := median(byName[tg.name])
		s.spread = spreadOf(allRPS[tg.name])
		c.rows = append(c.rows, row{name: tg.name, sample: s})
	}
	return c, nil
}

// spreadOf is (max − min) / median of a target's rps over all its runs
// (two per round): how far the runs the medians come from disagree, which
// one round already shows.
func spreadOf(rps []float64) float64 {
	if len(rps) == 0 {
		return 0
	}
	lo, hi := slices.Min(rps), slices.Max(rps)
	m := middle(slices.Clone(rps))
	if m <= 0 {
		return 0
	}
	return (hi - lo) / m
}

// mean combines the runs of one target in one round (its A and its
// mirrored A): counts are summed, error reasons merged, measurements
// averaged, and the noise indicator (other load), the peak memory and the
// records spilled take the larger.
func mean(runs []sample) sample {
	if len(runs) == 1 {
		return runs[0]
	}
	out := sample{errs: map[string]int{}}
	n := float64(len(runs))
	var p50, p99 time.Duration
	for _, s := range runs {
		out.requests += s.requests
		out.failed += s.failed
		for k, v := range s.errs {
			out.errs[k] += v
		}
		out.rps += s.rps / n
		p50 += s.p50 / time.Duration(len(runs))
		p99 += s.p99 / time.Duration(len(runs))
		out.gwP50 += s.gwP50 / n
		out.redisCmds += s.redisCmds / n
		out.redisScripts += s.redisScripts / n
		out.cores += s.cores / n
		out.redisCores += s.redisCores / n
		out.pgCores += s.pgCores / n
		out.rssMiB = max(out.rssMiB, s.rssMiB)
		out.other = max(out.other, s.other)
		out.spilled = max(out.spilled, s.spilled) // NaN stays NaN
	}
	out.p50, out.p99 = p50, p99
	return out
}
