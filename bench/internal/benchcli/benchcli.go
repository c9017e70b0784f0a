// Package benchcli is what the benchmark commands (cmd/benchrun,
// cmd/balance) share on their command line: the binaries under test, the
// report file, the rounds, keeping the temp dir, and telling an interrupt
// from a failure.
package benchcli

import (
	"context"
	"errors"
	"flag"
	"path/filepath"
	"strings"
)

// Common holds the flags every benchmark command takes.
type Common struct {
	Gatehouse string // the gatehouse binary
	Mockllm   string // the mockllm binary
	Out       string // also write the report, as markdown, here
	Keep      bool   // keep the temp dir (configs and process logs)
	Rounds    int    // how many times each measurement repeats
}

// Register adds the common flags to fs: gatehouseHelp says what the
// command does without a gatehouse binary, rounds is the default number
// of rounds and roundsHelp what a round is.
func (c *Common) Register(fs *flag.FlagSet, gatehouseHelp string, rounds int, roundsHelp string) {
	fs.StringVar(&c.Gatehouse, "gatehouse", "", "gatehouse binary ("+gatehouseHelp+")")
	fs.StringVar(&c.Mockllm, "mockllm", "", "mockllm binary (required)")
	fs.StringVar(&c.Out, "out", "", "also write the report, as markdown, to this file")
	fs.BoolVar(&c.Keep, "keep", false, "keep the temp dir (configs and process logs) for inspection")
	fs.IntVar(&c.Rounds, "rounds", rounds, roundsHelp)
}

// Absolute makes the binaries, the report file and any further paths
// absolute, so they stay right when a process runs in the temp dir.
func (c *Common) Absolute(more ...*string) error {
	for _, p := range append([]*string{&c.Gatehouse, &c.Mockllm, &c.Out}, more...) {
		if *p == "" {
			continue
		}
		abs, err := filepath.Abs(*p)
		if err != nil {
			return err
		}
		*p = abs
	}
	return nil
}

// List splits a comma-separated flag value, trimming spaces and dropping
// empty items.
func List(s string) []string {
	var out []string
	for f := range strings.SplitSeq(s, ",") {
		if f = strings.TrimSpace(f); f != "" {
			out = append(out, f)
		}
	}
	return out
}

// Interrupted reports an interrupt (ctx ended) as such rather than as
// whatever error the interrupted work returned.
func Interrupted(ctx context.Context, err error) error {
	if ctx.Err() != nil {
		return errors.New("interrupted")
	}
	return err
}

// ABBA is the order of one round over n targets: each index forward, then
// mirrored, so that a drift of the machine linear over the round weighs
// on every target alike.
func ABBA(n int) []int {
	order := make([]int, 0, 2*n)
	for i := range n {
		order = append(order, i)
	}
	for i := n - 1; i >= 0; i-- {
		order = append(order, i)
	}
	return order
}
