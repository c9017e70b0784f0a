package redis

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/rueidis"

	"gatehouse/internal/limit"
	"gatehouse/internal/store/redis/redistest"
)

// leaseReplica is one "replica": its own client, Limiter and Leaser, all
// on one Redis and one key prefix.
type leaseReplica struct {
	rl *Limiter
	l  *limit.Leaser
}

func newLeaseReplicas(t *testing.T, n int, clk *fakeClock, spend limit.SpendStore, o limit.LeaseOptions) (rueidis.Client, string, []leaseReplica) {
	t.Helper()
	var first rueidis.Client
	var prefix string
	var out []leaseReplica
	for i := range n {
		c := testClient(t)
		if i == 0 {
			first, prefix = c, testPrefix(t, c)
		}
		rl := newLimiter(t, c, Options{Prefix: prefix, Now: clk.Now, Timeout: 10 * time.Second, Spend: spend, SweepEvery: -1})
		lo := o
		lo.Now = clk.Now
		if lo.Every == 0 {
			lo.Every = -1
		}
		l := limit.NewLeaser(rl, lo)
		t.Cleanup(func() { l.Close(context.Background()) })
		out = append(out, leaseReplica{rl, l})
	}
	return first, prefix, out
}

// getInt reads an integer key; 0 when absent.
func getInt(t *testing.T, c rueidis.Client, key string) int64 {
	t.Helper()
	v, err := c.Do(context.Background(), c.B().Get().Key(key).Build()).AsInt64()
	if rueidis.IsRedisNil(err) {
		return 0
	}
	if err != nil {
		t.Fatal(err)
	}
	return v
}

const (
	leaseRPM = 300     // a request is 200 ms of a 60 s bucket: exact in µs
	leaseTPM = 600_000 // a token is 100 µs
)

func leaseTestAdmission() limit.Admission {
	return limit.Admission{Tag: "proj_1",
		Rates: []limit.Rate{
			{Scope: limit.ScopeKey, ID: "key_1", RPM: leaseRPM, TPM: leaseTPM},
			{Scope: limit.ScopeProject, ID: "proj_1", TPM: leaseTPM},
		},
		Budgets: []limit.Budget{
			{Scope: limit.ScopeKey, ID: "key_1", Limit: limit.USD(5), Period: limit.Month},
			{Scope: limit.ScopeProject, ID: "proj_1", Limit: limit.USD(5), Period: limit.Total},
		},
		Tokens: 100, Cost: 2000}
}

// Three replicas hammer one key at once with time standing still: they
// admit no more than the limit, and once every request has settled and
// every lease has gone back, Redis's buckets and budgets and the durable
// record hold exactly what was admitted and spent.
func TestLeaseThreeReplicasExact(t *testing.T) {
	clk := newClock(t0)
	spend := &memSpend{}
	c, prefix, reps := newLeaseReplicas(t, 3, clk, spend, limit.LeaseOptions{Fraction: 0.05, Go: func(f func()) { go f() }})
	a := leaseTestAdmission()
	var admitted, tokens, cost atomic.Int64
	var wg sync.WaitGroup
	for g := range 12 {
		rep := reps[g%3]
		wg.Go(func() {
			for i := 0; ; i++ {
				d, err := rep.l.Admit(context.Background(), a)
				if err != nil {
					t.Error(err)
					return
				}
				if !d.Allowed {
					if d.Refused.Kind != limit.KindRequests {
						t.Errorf("refused by %s, want requests", d.Refused.Kind)
					}
					return
				}
				admitted.Add(1)
				act := limit.Actual{Tokens: int64(10 + (g*7+i)%90), Cost: limit.Micros(100 + (g*13+i)%1900)}
				tokens.Add(act.Tokens)
				cost.Add(int64(act.Cost))
				if err := rep.l.Settle(context.Background(), d.Reservation, act); err != nil {
					t.Error(err)
				}
			}
		})
	}
	wg.Wait()
	if n := admitted.Load(); n > leaseRPM || n < leaseRPM-3*15 {
		t.Errorf("admitted %d with time standing still, want at most the limit %d (and no fewer than it less three leases)", n, leaseRPM)
	}
	var ready, waited int64
	for _, r := range reps {
		if err := r.l.Close(context.Background()); err != nil {
			t.Fatal(err)
		}
		if err := r.rl.Close(context.Background()); err != nil {
			t.Fatal(err)
		}
		st := r.l.Stats()
		ready, waited = ready+st.Ready, waited+st.Waited
	}
	t.Logf("admitted %d: %d from leases alone, %d waited for Redis", admitted.Load(), ready, waited)
	now := clk.Now().UnixMicro()
	start, _ := limit.Month.Span(clk.Now())
	got := map[string]int64{
		"requests (µs)":       getInt(t, c, prefix+"{proj_1}:rq:key:key_1") - now,
		"key tokens (µs)":     getInt(t, c, prefix+"{proj_1}:rt:key:key_1") - now,
		"project tokens (µs)": getInt(t, c, prefix+"{proj_1}:rt:project:proj_1") - now,
		"key budget":          getInt(t, c, prefix+"{proj_1}:b:key:month:"+start+":key_1"),
		"project budget":      getInt(t, c, prefix+"{proj_1}:b:project:total::proj_1"),
		"durable record":      spend.total(),
	}
	want := map[string]int64{
		"requests (µs)":       admitted.Load() * 200_000,
		"key tokens (µs)":     tokens.Load() * 100,
		"project tokens (µs)": tokens.Load() * 100,
		"key budget":          cost.Load(),
		"project budget":      cost.Load(),
		"durable record":      2 * cost.Load(), // two budgets, each recorded
	}
	for k, w := range want {
		if got[k] != w {
			t.Errorf("%s: Redis holds %d, want %d", k, got[k], w)
		}
	}
}

// The overshoot bound, reached: three replicas each hold a lease when the
// minute turns and the bucket refills, so the minute after admits the
// whole limit plus the three leases (R × L), and no more.
func TestLeaseOvershootBound(t *testing.T) {
	clk := newClock(t0)
	_, _, reps := newLeaseReplicas(t, 3, clk, nil, limit.LeaseOptions{Fraction: 0.05, Go: func(f func()) { f() }})
	a := limit.Admission{Tag: "proj_1", Rates: []limit.Rate{{Scope: limit.ScopeKey, ID: "key_1", RPM: leaseRPM}}}
	const lease = leaseRPM * 5 / 100
	for _, r := range reps { // each takes one request and a full lease after it
		if d, err := r.l.Admit(context.Background(), a); err != nil || !d.Allowed {
			t.Fatal(d, err)
		}
	}
	clk.Advance(limit.Window)
	total := 0
	for _, r := range reps {
		for {
			d, err := r.l.Admit(context.Background(), a)
			if err != nil {
				t.Fatal(err)
			}
			if !d.Allowed {
				break
			}
			total++
		}
	}
	if total != leaseRPM+3*lease {
		t.Errorf("admitted %d in the minute after, want the limit plus three leases: %d", total, leaseRPM+3*lease)
	}
}

// The same, with the three replicas admitting concurrently while the
// clock moves: never more than the limit's refill plus R × L.
func TestLeaseOvershootConcurrent(t *testing.T) {
	clk := newClock(t0)
	_, _, reps := newLeaseReplicas(t, 3, clk, nil, limit.LeaseOptions{Fraction: 0.05, Go: func(f func()) { go f() }})
	a := limit.Admission{Tag: "proj_1", Rates: []limit.Rate{{Scope: limit.ScopeKey, ID: "key_1", RPM: leaseRPM}}}
	const lease = leaseRPM * 5 / 100
	for _, r := range reps {
		if d, err := r.l.Admit(context.Background(), a); err != nil || !d.Allowed {
			t.Fatal(d, err)
		}
	}
	clk.Advance(limit.Window)
	var admitted atomic.Int64
	var wg sync.WaitGroup
	const steps = 10 // the clock moves 10 × 1 s while they admit
	for g := range 9 {
		r := reps[g%3]
		wg.Go(func() {
			for range 400 {
				d, err := r.l.Admit(context.Background(), a)
				if err != nil {
					t.Error(err)
					return
				}
				if d.Allowed {
					admitted.Add(1)
				}
				if g == 0 && admitted.Load()%40 == 0 && clk.Now().Sub(t0) < limit.Window+steps*time.Second {
					clk.Advance(time.Second)
				}
			}
		})
	}
	wg.Wait()
	elapsed := clk.Now().Sub(t0) - limit.Window
	refill := int64(elapsed * leaseRPM / limit.Window)
	bound := leaseRPM + refill + 3*lease
	if n := admitted.Load(); n > bound {
		t.Errorf("admitted %d over %s, above the bound: limit %d + refill %d + 3 leases of %d = %d", n, elapsed, leaseRPM, refill, lease, bound)
	} else {
		t.Logf("admitted %d over %s; bound %d", n, elapsed, bound)
	}
}

// A lease unused for Idle goes back to Redis at the next sweep; Close
// gives back the rest. Time is the fake clock's.
func TestLeaseIdleAndClose(t *testing.T) {
	clk := newClock(t0)
	c, prefix, reps := newLeaseReplicas(t, 1, clk, nil, limit.LeaseOptions{Fraction: 0.1, Idle: 30 * time.Second, Go: func(f func()) { f() }})
	l := reps[0].l
	ctx := context.Background()
	a := limit.Admission{Tag: "p", Budgets: []limit.Budget{{Scope: limit.ScopeKey, ID: "k", Limit: 1_000_000, Period: limit.Total}}, Cost: 500}
	key := prefix + "{p}:b:key:total::k"
	d, err := l.Admit(ctx, a)
	if err != nil || !d.Allowed {
		t.Fatal(d, err)
	}
	if err := l.Settle(ctx, d.Reservation, limit.Actual{Cost: 120}); err != nil {
		t.Fatal(err)
	}
	if got := getInt(t, c, key); got != 500+100_000 {
		t.Fatalf("budget counter %d after the first admission, want its estimate and a lease: %d", got, 500+100_000)
	}
	clk.Advance(30*time.Second - time.Microsecond)
	if err := l.Sweep(ctx); err != nil {
		t.Fatal(err)
	}
	// The settle's 380 below the estimate went above a lease's size: the
	// sweep handed them back, and kept the lease.
	if got := getInt(t, c, key); got != 120+100_000 {
		t.Errorf("budget counter %d before Idle, want the cost and the lease kept: %d", got, 120+100_000)
	}
	clk.Advance(time.Microsecond)
	if err := l.Sweep(ctx); err != nil {
		t.Fatal(err)
	}
	if got := getInt(t, c, key); got != 120 {
		t.Errorf("budget counter %d after Idle, want the actual cost alone (120)", got)
	}
	d, err = l.Admit(ctx, a)
	if err != nil || !d.Allowed {
		t.Fatal(d, err)
	}
	l.Settle(ctx, d.Reservation, limit.Actual{Cost: 30})
	if err := l.Close(ctx); err != nil {
		t.Fatal(err)
	}
	if got := getInt(t, c, key); got != 150 {
		t.Errorf("budget counter %d after Close, want 150", got)
	}
}

// With leases, steady state sends Redis nothing per request: over many
// admissions and settles the script calls are the few refills.
func TestLeaseCommandsPerRequest(t *testing.T) {
	c, err := NewClient(redistest.Start(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	rl := newLimiter(t, c, Options{Prefix: testPrefix(t, c), SweepEvery: -1})
	l := limit.NewLeaser(rl, limit.LeaseOptions{Every: -1, Go: func(f func()) { f() }})
	t.Cleanup(func() { l.Close(context.Background()) })
	ctx := context.Background()
	a := rpmAdmission(1e6)
	a.Budgets = []limit.Budget{{Scope: limit.ScopeKey, ID: "key_1", Limit: limit.USD(1e6), Period: limit.Month}}
	a.Cost = 1000
	l.Admit(ctx, a) // scripts cached, leases taken
	before := commandCalls(t, c)
	const n = 2000
	for range n {
		d, err := l.Admit(ctx, a)
		if err != nil || !d.Allowed {
			t.Fatalf("%v %+v", err, d.Refused)
		}
		l.Settle(ctx, d.Reservation, limit.Actual{Tokens: 10, Cost: 1000})
	}
	after := commandCalls(t, c)
	var calls int64
	for k, v := range after {
		calls += v - before[k]
	}
	calls-- // the INFO that read the first counts
	// A lease is 5% of each limit: the request bucket (1e6 a minute, a
	// lease of 50,000) never runs low; nothing else does either.
	if calls > 2 {
		t.Errorf("%d admissions sent Redis %d commands, want none but a refill or two (%v)", n, calls, after)
	}
	t.Logf("%d admissions and settles: %d Redis commands", n, calls)
}

// Three replicas on the Redis Cluster: every exchange's keys share the
// tag's slot (the cluster would refuse them with CROSSSLOT otherwise).
func TestLeaseOnRedisCluster(t *testing.T) {
	url := redistest.ClusterURL(t)
	for _, tc := range []struct {
		name string
		run  func(*testing.T)
	}{
		{"ThreeReplicasExact", TestLeaseThreeReplicasExact},
		{"OvershootBound", TestLeaseOvershootBound},
		{"IdleAndClose", TestLeaseIdleAndClose},
		{"RebuildsLostBudgets", TestLeaseRebuildsLostBudgets},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Setenv("GATEHOUSE_TEST_REDIS", url)
			tc.run(t)
		})
	}
}

// When Redis lost a tag's budget counters, an exchange rebuilds them from
// the durable record before taking a lease against them.
func TestLeaseRebuildsLostBudgets(t *testing.T) {
	clk := newClock(t0)
	spend := &memSpend{}
	start, _ := limit.Month.Span(clk.Now())
	bk := limit.BudgetKey{Tag: "proj_1", Scope: limit.ScopeKey, ID: "key_1", Period: limit.Month, Start: start}
	spend.AddSpend(context.Background(), map[limit.BudgetKey]int64{bk: 4_000_000})
	c, prefix, reps := newLeaseReplicas(t, 1, clk, spend, limit.LeaseOptions{Go: func(f func()) { f() }})
	a := limit.Admission{Tag: "proj_1", Budgets: []limit.Budget{{Scope: limit.ScopeKey, ID: "key_1", Limit: limit.USD(5), Period: limit.Month}}, Cost: 2000}
	d, err := reps[0].l.Admit(context.Background(), a)
	if err != nil || !d.Allowed {
		t.Fatal(d, err)
	}
	key := prefix + "{proj_1}:b:key:month:" + start + ":key_1"
	// The record's 4 dollars, then this request and a lease (5% of the
	// limit) after it.
	if got, want := getInt(t, c, key), int64(4_000_000+2000+250_000); got != want {
		t.Errorf("counter %d, want the rebuilt %d", got, want)
	}
	if d.BudgetLeft != limit.USD(1)-2000 {
		t.Errorf("budget left %s, want %s", d.BudgetLeft, limit.USD(1)-2000)
	}
}

// A budget of zero admits what costs nothing and refuses anything else,
// with leases as without.
func TestLeaseZeroBudget(t *testing.T) {
	clk := newClock(t0)
	_, _, reps := newLeaseReplicas(t, 1, clk, nil, limit.LeaseOptions{Go: func(f func()) { f() }})
	a := limit.Admission{Tag: "p", Budgets: []limit.Budget{{Scope: limit.ScopeKey, ID: "k", Limit: 0, Period: limit.Day}}}
	if d, err := reps[0].l.Admit(context.Background(), a); err != nil || !d.Allowed {
		t.Fatalf("free request: %+v, %v", d, err)
	}
	a.Cost = 1
	d, err := reps[0].l.Admit(context.Background(), a)
	if err != nil || d.Allowed || d.Refused.Kind != limit.KindBudget || !d.Refused.TooLarge {
		t.Fatalf("paid request: %+v, %v: want a budget refusal, too large", d, err)
	}
}

// Redis goes away under leases: the batches keep admitting with no
// error (a short outage goes unnoticed), then admissions fail with
// ErrUnavailable and the failure policy applies — closed refuses, open
// admits this replica's share.
func TestLeaseRedisDownPolicies(t *testing.T) {
	c, p := proxiedClient(t)
	rl := newLimiter(t, c, Options{Prefix: testPrefix(t, testClient(t)), Timeout: 200 * time.Millisecond, SweepEvery: -1})
	l := limit.NewLeaser(rl, limit.LeaseOptions{Fraction: 0.1, Every: -1, Go: func(f func()) { f() }})
	defer l.Close(context.Background())
	ctx := context.Background()
	a := limit.Admission{Tag: "p", Rates: []limit.Rate{{Scope: limit.ScopeKey, ID: "k", RPM: 100}}}
	if d, err := l.Admit(ctx, a); err != nil || !d.Allowed { // takes 1 and a batch of 10
		t.Fatalf("through the proxy: %v %+v", err, d)
	}
	p.close()
	for i := range 10 {
		if d, err := l.Admit(ctx, a); err != nil || !d.Allowed {
			t.Fatalf("request %d from the batch with Redis gone: %v %+v", i, err, d)
		}
	}
	if _, err := l.Admit(ctx, a); !errors.Is(err, limit.ErrUnavailable) {
		t.Fatalf("batch spent, Redis gone: err %v, want ErrUnavailable", err)
	}
	closed := &limit.Fallback{Primary: l, Policy: limit.FailClosed}
	if _, err := closed.Admit(ctx, a); !errors.Is(err, limit.ErrUnavailable) {
		t.Fatalf("fail closed: %v", err)
	}
	local, err := limit.NewEmbedded(ctx, limit.Options{Now: newClock(t0).Now})
	if err != nil {
		t.Fatal(err)
	}
	defer local.Close(ctx)
	open := &limit.Fallback{Primary: l, Local: local, Policy: limit.FailOpen, Replicas: 4}
	n := 0
	for range 100 {
		d, err := open.Admit(ctx, a)
		if err != nil {
			t.Fatal(err)
		}
		if d.Allowed {
			n++
			open.Settle(ctx, d.Reservation, limit.Actual{})
		}
	}
	if n != 25 {
		t.Errorf("fail open admitted %d, want this replica's share 25", n)
	}
}
