package main

import (
	"context"
	"errors"
	"time"
)

// pacing drives the gateway's background writers by request count rather
// than by wall-clock timers. scripts/bench-instructions needs it: under
// valgrind a request takes a hundred times its usual wall time, so a
// 200 ms timer fires every few requests instead of every few hundred, and
// how much store writing lands in a count would move with the machine's
// load. The zero value is production: every writer on its own timer.
//
// Paced, the usage sink writes a transaction whenever sinkBatch records
// are queued (its own timer set beyond any run), and the spend log, the
// keys' last-used times, the key cache's refresh and the admitter's sweep
// never tick: the caller writes spend with flushSpend, as often as it
// chooses. Only embedded mode is paced; cluster mode keeps its timers.
type pacing struct {
	// sinkBatch is the records per usage-record transaction; 0 leaves
	// the sink on its timer.
	sinkBatch int
	// manual stops the timers of the spend log, the key touches, the key
	// cache's refresh and the sweep (they still write on close).
	manual bool
}

// paceNever is a timer period no run reaches: a paced writer's timer.
const paceNever = 1000 * time.Hour

// or returns never when the pacing is manual, else d (0: the default).
func (p pacing) or(d time.Duration) time.Duration {
	if p.manual {
		return paceNever
	}
	return d
}

// flushSpend writes the settled spend now: what a paced gateway's spend
// log would have written at its tick. A bare proxy has none.
func (g *gateway) flushSpend(ctx context.Context) error {
	if g.st == nil || g.st.limiter == nil {
		return nil
	}
	f, ok := g.st.limiter.admitter.(interface{ Flush(context.Context) error })
	if !ok {
		return errors.New("the admitter keeps no spend log to flush")
	}
	return f.Flush(ctx)
}
