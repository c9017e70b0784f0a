package redis

import (
	"context"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/rueidis"

	"gatehouse/internal/limit"
	"gatehouse/internal/store/redis/redistest"
)

// TestSettlesBatched: a batch of settles goes out as one script call per
// hash tag on a cluster and as one call on a single server; every settle
// applies once, calls whose script Redis lost (SCRIPT FLUSH) are retried
// alone, and a call sent again (a retry after a lost reply) changes
// nothing. Five projects, so on a cluster the batch spans slots and nodes.
func TestSettlesBatched(t *testing.T) {
	c := testClient(t)
	clk := newClock(t0)
	l := newLimiter(t, c, Options{Prefix: testPrefix(t, c), Now: clk.Now})
	ctx := context.Background()
	tags := []string{"p0", "p1", "p2", "p3", "p4"}
	budget := func(tag string) limit.Budget {
		return limit.Budget{Scope: limit.ScopeProject, ID: tag, Name: "batch", Limit: limit.USD(100), Period: limit.Month}
	}
	var batch []settleJob
	for i := range 150 {
		tag := tags[i%len(tags)]
		a := limit.Admission{Tag: tag, Rates: []limit.Rate{{Scope: limit.ScopeKey, ID: "k" + tag, TPM: 1e9}},
			Budgets: []limit.Budget{budget(tag)}, Tokens: 100, Cost: limit.USD(0.01)}
		d, err := l.Admit(ctx, a)
		if err != nil || !d.Allowed {
			t.Fatalf("admit: %v %+v", err, d)
		}
		job, ok := l.settleJobOf(&d.Reservation, limit.Actual{Tokens: 40, Cost: limit.USD(0.004)})
		if !ok {
			t.Fatal("no settle to send")
		}
		batch = append(batch, job)
	}
	for _, r := range onEveryNode(ctx, c, func(b rueidis.Builder) rueidis.Completed { return b.ScriptFlush().Build() }) {
		if err := r.Error(); err != nil {
			t.Fatal(err)
		}
	}
	perBatch := 1
	if c.Mode() == rueidis.ClientModeCluster {
		perBatch = len(tags)
	}
	l.settleAll(batch[:100]) // NOSCRIPT: each call retried alone, which loads the script again
	if s := l.SettleStats(); s.Calls != uint64(perBatch) || s.Settled != 100 {
		t.Fatalf("after the first batch: %d calls for %d settles, want %d for 100", s.Calls, s.Settled, perBatch)
	}
	calls := l.settleCalls(batch[100:])
	if len(calls) != perBatch {
		t.Fatalf("50 settles of %d tags make %d calls, want %d", len(tags), len(calls), perBatch)
	}
	for round, want := range []int64{1, 0} { // the second round, a retry after a lost reply: applies nothing
		for i, call := range calls {
			if n, err := l.run(ctx, &l.settle, call.keys, call.args).AsInt64(); err != nil || n != want {
				t.Fatalf("round %d, call %d: answered %d (%v), want %d", round, i, n, err, want)
			}
		}
	}
	for _, tag := range tags {
		if got, _ := l.Spent(ctx, tag, budget(tag), clk.Now()); got != 30*limit.USD(0.004) {
			t.Errorf("%s spent %v after settling 30 × $0.004, want %v", tag, got, 30*limit.USD(0.004))
		}
		if n, err := c.Do(ctx, c.B().Zcard().Key(l.ledgerKey(tag)).Build()).AsInt64(); err != nil || n != 0 {
			t.Errorf("%s's ledger holds %d reservations (%v), want none", tag, n, err)
		}
	}
}

// TestSettleReplayAppliesNothing: the same settle call run twice — the
// worker's retry when the reply to a call that ran was lost — changes
// the counters once.
func TestSettleReplayAppliesNothing(t *testing.T) {
	c := testClient(t)
	clk := newClock(t0)
	l := newLimiter(t, c, Options{Prefix: testPrefix(t, c), Now: clk.Now})
	ctx := context.Background()
	b := limit.Budget{Scope: limit.ScopeKey, ID: "k", Limit: limit.USD(1), Period: limit.Month}
	a := limit.Admission{Tag: "p", Rates: []limit.Rate{{Scope: limit.ScopeKey, ID: "k", TPM: 60_000}},
		Budgets: []limit.Budget{b}, Tokens: 600, Cost: limit.USD(0.3)}
	d, err := l.Admit(ctx, a)
	if err != nil || !d.Allowed {
		t.Fatal(err, d)
	}
	job, _ := l.settleJobOf(&d.Reservation, limit.Actual{Tokens: 100, Cost: limit.USD(0.1)})
	call := l.settleCalls([]settleJob{job})[0]
	var got []int64
	for range 2 {
		n, err := l.run(ctx, &l.settle, call.keys, call.args).AsInt64()
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, n)
	}
	if got[0] != 1 || got[1] != 0 {
		t.Fatalf("the call answered %v, want [1 0]: applied once, then already settled", got)
	}
	if spent, _ := l.Spent(ctx, "p", b, clk.Now()); spent != limit.USD(0.1) {
		t.Errorf("spent %v, want the actual 0.100000", spent)
	}
	// 100 tokens at 1,000 µs each (60,000 a minute) ahead of now.
	if v, err := c.Do(ctx, c.B().Get().Key(l.rateKey("p", "rt", limit.ScopeKey, "k")).Build()).AsInt64(); err != nil || v-clk.Now().UnixMicro() != 100_000 {
		t.Errorf("token bucket %d µs ahead (%v), want 100000", v-clk.Now().UnixMicro(), err)
	}
}

// TestSettleBatchesThreeReplicasExact: three replicas admit and settle
// 300 requests concurrently against shared per-minute and budget limits,
// each settling in batches (up to 32, waiting for more); once all have
// closed, Redis's counters hold exactly what the requests used — the
// budget their actual cost, the token bucket their actual tokens, the
// request bucket one per admission — and the ledgers nothing. The clock
// stands still, so no refill blurs the sums, and 60,000 tokens a minute
// make one token exactly 1,000 µs of the bucket.
func TestSettleBatchesThreeReplicasExact(t *testing.T) {
	c := testClient(t)
	clk := newClock(t0)
	prefix := testPrefix(t, c)
	o := Options{Prefix: prefix, Now: clk.Now, SettleBatch: 32, SettleDelay: time.Hour, SweepEvery: -1}
	ls := []*Limiter{newLimiter(t, c, o), newLimiter(t, c, o), newLimiter(t, c, o)}
	b := limit.Budget{Scope: limit.ScopeProject, ID: "p", Limit: limit.USD(1000), Period: limit.Month}
	a := limit.Admission{Tag: "p", Rates: []limit.Rate{
		{Scope: limit.ScopeKey, ID: "k", RPM: 10_000, TPM: 60_000_000},
		{Scope: limit.ScopeProject, ID: "p", TPM: 60_000_000},
	}, Budgets: []limit.Budget{b}, Tokens: 500, Cost: limit.USD(0.05)}
	var tokens, cost, admitted atomic.Int64
	var wg sync.WaitGroup
	for i := range 300 {
		wg.Go(func() {
			l := ls[i%3]
			d, err := l.Admit(context.Background(), a)
			if err != nil || !d.Allowed {
				t.Errorf("admit %d: %v %+v", i, err, d)
				return
			}
			admitted.Add(1)
			// Mostly under the estimate, some over it.
			r := rand.New(rand.NewPCG(uint64(i), 7))
			act := limit.Actual{Tokens: int64(r.IntN(560)), Cost: limit.Micros(r.IntN(55_000))}
			tokens.Add(act.Tokens)
			cost.Add(int64(act.Cost))
			if err := l.Settle(context.Background(), d.Reservation, act); err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	var calls uint64
	for _, l := range ls {
		if err := l.Close(context.Background()); err != nil {
			t.Fatal(err)
		}
		s := l.SettleStats()
		if s.Lost != 0 {
			t.Errorf("%d settles lost", s.Lost)
		}
		calls += s.Calls
	}
	// A batch closes at 32 settles or at Close; with the delay an hour,
	// never by the clock: at most 300/32 + 3 calls (one partial batch per
	// worker and replica).
	if max := uint64(300/32 + 3*2); calls > max || calls == 0 {
		t.Errorf("%d script calls for 300 settles, want 1 to %d", calls, max)
	}
	ctx := context.Background()
	if got, _ := ls[0].Spent(ctx, "p", b, clk.Now()); int64(got) != cost.Load() {
		t.Errorf("budget holds %d µ$, the requests cost %d", got, cost.Load())
	}
	now := clk.Now().UnixMicro()
	for _, k := range []string{ls[0].rateKey("p", "rt", limit.ScopeKey, "k"), ls[0].rateKey("p", "rt", limit.ScopeProject, "p")} {
		v, err := c.Do(ctx, c.B().Get().Key(k).Build()).AsInt64()
		if err != nil || v-now != tokens.Load() {
			t.Errorf("%s: %d µs ahead (%v), want the %d tokens used at 1 µs each", k, v-now, err, tokens.Load())
		}
	}
	if v, err := c.Do(ctx, c.B().Get().Key(ls[0].rateKey("p", "rq", limit.ScopeKey, "k")).Build()).AsInt64(); err != nil || v-now != admitted.Load()*6000 {
		t.Errorf("request bucket %d µs ahead (%v), want %d admissions at 6,000 µs each", v-now, err, admitted.Load())
	}
	if n, err := c.Do(ctx, c.B().Zcard().Key(ls[0].ledgerKey("p")).Build()).AsInt64(); err != nil || n != 0 {
		t.Errorf("the ledger holds %d reservations (%v), want none", n, err)
	}
}

// TestFullSettleQueueWaits: with the worker held and the queue full, a
// settle waits for room instead of being dropped, is counted as having
// waited, and is applied once the worker goes on; no settle is lost.
func TestFullSettleQueueWaits(t *testing.T) {
	c := testClient(t)
	clk := newClock(t0)
	l := newLimiter(t, c, Options{Prefix: testPrefix(t, c), Now: clk.Now, SettleQueue: 2, SettleBatch: 1, SettleDelay: -1, SettleWait: time.Hour})
	held, release := make(chan struct{}), make(chan struct{})
	var once sync.Once
	l.beforeFlush = func() {
		once.Do(func() { close(held) })
		<-release
	}
	ctx := context.Background()
	b := limit.Budget{Scope: limit.ScopeKey, ID: "k", Limit: limit.USD(10), Period: limit.Total}
	a := limit.Admission{Tag: "p", Budgets: []limit.Budget{b}, Cost: limit.USD(0.5)}
	var ds []limit.Decision
	for range 5 {
		d, err := l.Admit(ctx, a)
		if err != nil || !d.Allowed {
			t.Fatal(err, d)
		}
		ds = append(ds, d)
	}
	// The first settle is taken by each of the two workers at most; wait
	// until one holds a batch, then fill the queue.
	if err := l.Settle(ctx, ds[0].Reservation, limit.Actual{Cost: limit.USD(0.1)}); err != nil {
		t.Fatal(err)
	}
	<-held
	settled := make(chan error, 4)
	for _, d := range ds[1:] {
		go func() { settled <- l.Settle(ctx, d.Reservation, limit.Actual{Cost: limit.USD(0.1)}) }()
	}
	// Two workers may each hold one settle and the queue two more: at
	// least one of the four goroutines must wait for room.
	for l.SettleStats().Waited == 0 {
		time.Sleep(time.Millisecond) // a condition to reach, not a race: nothing is released before it holds
	}
	close(release)
	for range 4 {
		if err := <-settled; err != nil {
			t.Fatalf("a settle of a full queue failed: %v", err)
		}
	}
	if err := l.Close(ctx); err != nil {
		t.Fatal(err)
	}
	s := l.SettleStats()
	if s.Lost != 0 || s.Settled != 5 {
		t.Fatalf("stats %+v: want 5 settled, none lost", s)
	}
	if got, _ := l.Spent(ctx, "p", b, clk.Now()); got != limit.USD(0.5) {
		t.Fatalf("spent %v, want 5 × 0.100000", got)
	}
}

// TestSettleDroppedLoudly: when the queue stays full past SettleWait (a
// Redis that does not keep up, here a worker held), the settle is given
// up on with an error, OnSettleLost is told, and the counter says so; the
// reservation's estimate stays counted (the safe side).
func TestSettleDroppedLoudly(t *testing.T) {
	c := testClient(t)
	clk := newClock(t0)
	var lostErrs atomic.Int64
	l := newLimiter(t, c, Options{Prefix: testPrefix(t, c), Now: clk.Now, SettleQueue: 1, SettleBatch: 1, SettleDelay: -1,
		SettleWait: time.Millisecond, OnSettleLost: func(error) { lostErrs.Add(1) }})
	release := make(chan struct{})
	held := make(chan struct{}, 2)
	l.beforeFlush = func() {
		held <- struct{}{}
		<-release
	}
	ctx := context.Background()
	b := limit.Budget{Scope: limit.ScopeKey, ID: "k", Limit: limit.USD(10), Period: limit.Total}
	a := limit.Admission{Tag: "p", Budgets: []limit.Budget{b}, Cost: limit.USD(0.5)}
	var errs []error
	var n int
	// Both workers held with one settle each, the queue holding one: the
	// next settle finds no room.
	for i := 0; ; i++ {
		d, err := l.Admit(ctx, a)
		if err != nil || !d.Allowed {
			t.Fatal(err, d)
		}
		n++
		if err := l.Settle(ctx, d.Reservation, limit.Actual{Cost: limit.USD(0.1)}); err != nil {
			errs = append(errs, err)
			break
		}
		if i < 2 {
			<-held // a worker holds it; the queue is empty again
		}
		if i > 3 {
			t.Fatal("the queue never filled")
		}
	}
	close(release)
	if err := l.Close(ctx); err != nil {
		t.Fatal(err)
	}
	if len(errs) != 1 || lostErrs.Load() != 1 || l.SettleStats().Lost != 1 || l.SettleStats().Waited != 1 {
		t.Fatalf("errors %v, OnSettleLost %d times, stats %+v: want one settle lost after waiting", errs, lostErrs.Load(), l.SettleStats())
	}
	// n admissions of 0.5, n-1 settled at 0.1, one left at its estimate.
	want := limit.USD(0.1)*limit.Micros(n-1) + limit.USD(0.5)
	if got, _ := l.Spent(ctx, "p", b, clk.Now()); got != want {
		t.Fatalf("spent %v, want %v", got, want)
	}
}

// TestSettleCommandsPerRequest counts, on a private Redis, the commands
// and script calls 200 admit-and-settle cycles cost with settles
// batched: one admission call each, and settle calls a small share of
// one each, as the batches allow.
func TestSettleCommandsPerRequest(t *testing.T) {
	t.Setenv("GATEHOUSE_TEST_REDIS", redistest.Start(t))
	c := testClient(t)
	clk := newClock(t0)
	l := newLimiter(t, c, Options{Prefix: testPrefix(t, c), Now: clk.Now, SettleBatch: 50, SettleDelay: time.Hour, SweepEvery: -1})
	ctx := context.Background()
	b := limit.Budget{Scope: limit.ScopeKey, ID: "k", Limit: limit.USD(1000), Period: limit.Month}
	a := limit.Admission{Tag: "p", Rates: []limit.Rate{{Scope: limit.ScopeKey, ID: "k", RPM: 1e6, TPM: 1e9}},
		Budgets: []limit.Budget{b}, Tokens: 100, Cost: limit.USD(0.01)}
	if d, err := l.Admit(ctx, a); err != nil || !d.Allowed { // registers the tag
		t.Fatal(err, d)
	} else {
		l.Settle(ctx, d.Reservation, limit.Actual{Tokens: 100, Cost: limit.USD(0.01)})
	}
	before := scriptCalls(t, c)
	for range 200 {
		d, err := l.Admit(ctx, a)
		if err != nil || !d.Allowed {
			t.Fatal(err, d)
		}
		if err := l.Settle(ctx, d.Reservation, limit.Actual{Tokens: 40, Cost: limit.USD(0.004)}); err != nil {
			t.Fatal(err)
		}
	}
	if err := l.Close(ctx); err != nil {
		t.Fatal(err)
	}
	after := scriptCalls(t, c)
	got := after - before
	// 200 admissions, and the 201 settles in batches of at most 50 (the
	// first settle may go out alone when the worker takes it at once).
	if got < 200+201/50 || got > 200+201/50+3 {
		t.Fatalf("%d script calls for 200 admit-and-settle cycles, want 200 admissions + 5 to 7 settle calls", got)
	}
}

// scriptCalls is how many EVAL and EVALSHA calls Redis has run.
func scriptCalls(t *testing.T, c rueidis.Client) int64 {
	t.Helper()
	m := commandCalls(t, c)
	return m["evalsha"] + m["eval"]
}
