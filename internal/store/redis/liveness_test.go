package redis

import (
	"context"
	"errors"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/redis/rueidis"

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

// TestWatchWaitsWhileRedisAnswers drives one call's silence check by
// hand: while replies to other calls keep coming it looks again instead
// of cancelling; once none has come for the timeout it cancels with
// errSilent.
func TestWatchWaitsWhileRedisAnswers(t *testing.T) {
	var mu sync.Mutex
	var now time.Duration
	clock := func() time.Duration { mu.Lock(); defer mu.Unlock(); return now }
	advance := func(d time.Duration) { mu.Lock(); now += d; mu.Unlock() }
	v := &liveness{since: clock}
	ctx, cancel := context.WithCancelCause(context.Background())
	defer cancel(nil)
	const timeout = time.Hour // the timers never fire on their own; check runs by hand
	w := &watch{v: v, began: clock(), timeout: timeout, cancel: cancel}
	defer w.done.Store(true)
	for range 3 {
		advance(timeout - time.Minute)
		v.heard() // Redis answered someone just before the deadline
		advance(time.Minute)
		w.check()
		if ctx.Err() != nil {
			t.Fatalf("cancelled (%v) while Redis answered other calls", context.Cause(ctx))
		}
		if w.timer.Load() == nil {
			t.Fatal("no next check armed")
		}
		w.timer.Load().Stop()
	}
	advance(timeout) // silence: nothing heard for a whole timeout
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
	opt, err := rueidis.ParseURL(os.Getenv("GATEHOUSE_TEST_REDIS"))
	if err != nil {
		t.Fatal(err)
	}
	p := startProxy(t, opt.InitAddress[0])
	opt.InitAddress = []string{p.ln.Addr().String()}
	opt.DisableCache = true
	opt.DisableRetry = true
	hc, err := rueidis.NewClient(opt)
	if err != nil {
		t.Fatal(err)
	}
	defer hc.Close()
	l := newLimiter(t, hc, Options{Prefix: testPrefix(t, c), Timeout: 50 * time.Millisecond, SweepEvery: -1})
	ctx := context.Background()
	if d, err := l.Admit(ctx, rpmAdmission(100)); err != nil || !d.Allowed {
		t.Fatalf("through the proxy: %v %+v", err, d)
	}
	p.hang()
	_, err = l.Admit(ctx, rpmAdmission(100))
	if !errors.Is(err, limit.ErrUnavailable) || !errors.Is(err, errSilent) {
		t.Fatalf("Redis hung: err %v, want ErrUnavailable for its silence", err)
	}
}
