package redis

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"gatehouse/internal/limit"
)

// TestSilenceCountsFromTheLastReply: the silence a call sees runs from
// Redis's last reply, or from the call's start when that came later (an
// idle replica's first call is not failed for the quiet before it).
func TestSilenceCountsFromTheLastReply(t *testing.T) {
	var now time.Duration
	v := &liveness{since: func() time.Duration { return now }}
	now = 10 * time.Second
	began := v.since() // a call starts after ten quiet seconds
	now += 100 * time.Millisecond
	if got := v.silence(began); got != 100*time.Millisecond {
		t.Fatalf("silence %v, want 100ms: counted from the call's start", got)
	}
	v.heard() // a reply to another call
	now += 200 * time.Millisecond
	if got := v.silence(began); got != 200*time.Millisecond {
		t.Fatalf("silence %v, want 200ms: counted from the last reply", got)
	}
}

// fakeMono is a monotonic clock a test moves by hand.
type fakeMono struct {
	mu  sync.Mutex
	now time.Duration
}

func (c *fakeMono) since() time.Duration    { c.mu.Lock(); defer c.mu.Unlock(); return c.now }
func (c *fakeMono) set(t time.Duration)     { c.mu.Lock(); c.now = t; c.mu.Unlock() }
func (c *fakeMono) advance(d time.Duration) { c.mu.Lock(); c.now += d; c.mu.Unlock() }

// newTestWatch is a watch on a hand-moved clock whose timers never fire
// by themselves (an hour): the test runs check.
func newTestWatch(t *testing.T) (*watch, *fakeMono, context.Context) {
	clk := &fakeMono{now: time.Minute}
	v := &liveness{since: clk.since}
	ctx, cancel := context.WithCancelCause(context.Background())
	w := &watch{v: v, began: clk.since(), timeout: time.Hour, capAt: clk.since() + maxWaitFactor*time.Hour, cancel: cancel}
	w.arm(w.timeout)
	t.Cleanup(w.release)
	return w, clk, ctx
}

// TestWatchWaitsWhileRedisAnswers: while replies to other calls keep
// coming, each check looks again later instead of cancelling; once none
// has come for the timeout, the check cancels with errSilent.
func TestWatchWaitsWhileRedisAnswers(t *testing.T) {
	w, clk, ctx := newTestWatch(t)
	for range 3 {
		clk.set(w.due - time.Minute)
		w.v.heard() // Redis answered someone a minute before the check
		clk.set(w.due)
		w.timer.Load().Stop()
		w.check()
		if ctx.Err() != nil {
			t.Fatalf("cancelled (%v) while Redis answered other calls", context.Cause(ctx))
		}
	}
	clk.set(w.due) // a whole timeout since the last reply
	w.timer.Load().Stop()
	w.check()
	if !errors.Is(context.Cause(ctx), errSilent) {
		t.Fatalf("cause %v, want errSilent", context.Cause(ctx))
	}
}

// TestWatchGivesUpAtTheCap: a call whose reply does not come while
// Redis answers others is cancelled with errSlow once it has waited
// maxWaitFactor timeouts, the last check armed to run exactly then.
func TestWatchGivesUpAtTheCap(t *testing.T) {
	w, clk, ctx := newTestWatch(t)
	for ctx.Err() == nil {
		if clk.since() > w.capAt {
			t.Fatalf("still waiting %v after the cap", clk.since()-w.capAt)
		}
		clk.set(w.due)
		w.v.heard() // Redis answers someone just as each check runs
		w.timer.Load().Stop()
		w.check()
	}
	if !errors.Is(context.Cause(ctx), errSlow) || clk.since() != w.capAt {
		t.Fatalf("cause %v at %v, want errSlow at the cap %v", context.Cause(ctx), clk.since(), w.capAt)
	}
}

// TestWatchExcusesItsOwnLateness: a check that runs long after it was
// due (the process had no CPU) does not blame Redis for that stretch.
func TestWatchExcusesItsOwnLateness(t *testing.T) {
	w, clk, ctx := newTestWatch(t)
	clk.advance(w.timeout / 2)
	w.v.heard()
	clk.set(w.due + 10*time.Minute) // the check runs ten minutes late
	w.timer.Load().Stop()
	w.check()
	if ctx.Err() != nil {
		t.Fatalf("cancelled (%v): half a timeout of Redis's silence, the rest the process's own", context.Cause(ctx))
	}
	clk.set(w.due) // on time now, and Redis still silent: a whole timeout of its own
	w.timer.Load().Stop()
	w.check()
	if !errors.Is(context.Cause(ctx), errSilent) {
		t.Fatalf("cause %v, want errSilent", context.Cause(ctx))
	}
}

// TestHungRedisIsUnavailable: a Redis that accepts the call but never
// answers (a hung server, a network that drops everything) makes Admit
// fail with limit.ErrUnavailable, the failure policy's cue, naming the
// silence.
func TestHungRedisIsUnavailable(t *testing.T) {
	c := testClient(t)
	hc, p := proxiedClient(t)
	l := newLimiter(t, hc, Options{Prefix: testPrefix(t, c), Timeout: 50 * time.Millisecond, SweepEvery: -1})
	ctx := context.Background()
	if d, err := l.Admit(ctx, rpmAdmission(100)); err != nil || !d.Allowed {
		t.Fatalf("through the proxy: %v %+v", err, d)
	}
	p.hang()
	_, err := l.Admit(ctx, rpmAdmission(100))
	if !errors.Is(err, limit.ErrUnavailable) || !errors.Is(err, errSilent) {
		t.Fatalf("Redis hung: err %v, want ErrUnavailable for its silence", err)
	}
}
