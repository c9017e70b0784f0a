package redis

// When is Redis unavailable? Options.Timeout is there to notice a Redis
// that is gone or hung, so the failure policy can take over. It used to
// bound each admission's wait, and under load that measured the wrong
// thing: the reply to an admission reaches its request only after the
// client's writer and reader goroutines and then the request's own have
// each had their turn on a CPU, and on a saturated gateway that queueing
// grew with the number of requests in flight — 4–10 ms at the median
// with 32 clients, 50–118 ms with 256 on the shared 2-core bench
// machine, and Redis started above everything else in priority changed
// nothing. Past 250 ms up to four fifths of the requests were refused
// with 503 while Redis kept answering hundreds of admissions a second
// (BENCHMARKS.md, "Without leases: settles batched, and the 503s under
// load").
//
// So an admission now fails for want of Redis when Redis has been silent
// for Options.Timeout while it waited: no reply to any call of this
// replica (an admission or a settle) in that time, less the time the
// check itself ran late (the replica had no CPU, so the silence was its
// own). A late reply while
// others arrive is waited for, up to maxWaitFactor × Options.Timeout in
// all (a Redis that answers, but too slowly to serve, still fails
// requests rather than holding them for ever). A Redis that is gone is
// noticed as soon as before: at once when the connection breaks, and
// within Options.Timeout (at most twice that, for a call that started
// just after the last reply) when it hangs.

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"sync/atomic"
	"time"
)

// maxWaitFactor bounds an admission's wait while Redis is answering:
// eight timeouts (2 s by default).
const maxWaitFactor = 8

// liveness tracks when this replica last heard from Redis. Its clock is
// monotonic time since start (the Limiter's Options.Now is wall time for
// the counters, which tests move by hand).
type liveness struct {
	start time.Time
	last  atomic.Int64 // nanoseconds since start of the last reply
	// since reads the clock; time.Since(start) unless a test sets it.
	since func() time.Duration
}

func newLiveness() *liveness {
	v := &liveness{start: time.Now()}
	v.since = func() time.Duration { return time.Since(v.start) }
	return v
}

// heard records a reply from Redis: any reply, an error reply too (an
// error from Redis is Redis answering).
func (v *liveness) heard() { v.last.Store(int64(v.since())) }

// silence is how long Redis has been silent for a call that began at
// began: since its last reply, or since began if that was later.
func (v *liveness) silence(began time.Duration) time.Duration {
	return v.since() - max(time.Duration(v.last.Load()), began)
}

var (
	errSilent = errors.New("no reply from Redis")
	errSlow   = errors.New("no reply to this call, though Redis answers others")
)

// callContext is the context of one call on the request path: cancelled,
// with errSilent as its cause, once Redis has been silent for timeout
// while the call waits, and with errSlow once it has waited
// maxWaitFactor × timeout in all. The watch's release frees its timer.
//
// One context and one timer a call: the cap on the whole wait is the
// watch's to check too, where a context.WithTimeoutCause of its own
// cost every admission a second context, a second timer and a cause
// error formatted in advance (BENCHMARKS.md, "Cluster mode's spill").
func (v *liveness) callContext(parent context.Context, timeout time.Duration) (context.Context, *watch) {
	ctx, cancel := context.WithCancelCause(parent)
	began := v.since()
	w := &watch{v: v, began: began, timeout: timeout, capAt: began + maxWaitFactor*timeout, cancel: cancel}
	w.arm(timeout)
	return ctx, w
}

// watch is the silence check of one call.
type watch struct {
	v       *liveness
	began   time.Duration
	timeout time.Duration
	capAt   time.Duration // when the call has waited maxWaitFactor × timeout
	cancel  context.CancelCauseFunc
	done    atomic.Bool
	timer   atomic.Pointer[time.Timer]
	// due is when the armed check should run, and excused the silence
	// not blamed on Redis so far: the time checks ran late.
	due, excused time.Duration
}

// release ends the watch once its call has its reply (or has failed).
func (w *watch) release() {
	w.done.Store(true)
	w.timer.Load().Stop()
	w.cancel(nil)
}

// arm runs check after d.
func (w *watch) arm(d time.Duration) {
	w.due = w.v.since() + d
	w.timer.Store(time.AfterFunc(d, w.check))
}

// check cancels the call if Redis has been silent for the timeout, and
// otherwise looks again when it would have been.
func (w *watch) check() {
	if w.done.Load() {
		return
	}
	// A check that runs late says this process was not running (the
	// machine's other work had its CPUs): the silence of that stretch is
	// the process's own, not Redis's.
	if late := w.v.since() - w.due; late > 0 {
		w.excused += late
	}
	s := w.v.silence(w.began) - w.excused
	if s >= w.timeout {
		// A timer's function runs ahead of the goroutines already waiting
		// for a CPU, among them those holding Redis's replies: on a
		// saturated replica the silence would be its own. Let them run
		// first, then look again.
		runtime.Gosched()
		s = w.v.silence(w.began) - w.excused
	}
	if s >= w.timeout {
		w.cancel(fmt.Errorf("%w for %v", errSilent, w.timeout))
		return
	}
	now := w.v.since()
	if now >= w.capAt {
		w.cancel(fmt.Errorf("%w within %v", errSlow, w.capAt-w.began))
		return
	}
	w.arm(min(w.timeout-s, w.capAt-now))
}
