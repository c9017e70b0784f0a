package redis

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"gatehouse/internal/limit"
)

// A batch answers each admission exactly what admitScript answers it
// one after the other, and leaves Redis as they would: the same
// counters, TTLs and ledger. The admissions share buckets and budgets,
// so later ones see what earlier ones reserved; limits are tight enough
// that many are refused.
func TestAdmitBatchMatchesOneByOne(t *testing.T) {
	c := testClient(t)
	ctx := context.Background()
	prefix := testPrefix(t, c)
	clk := newClock(time.Now().UTC().Truncate(time.Millisecond))
	plain := newLimiter(t, c, Options{Prefix: prefix, Now: clk.Now, SweepEvery: -1})
	durable := newLimiter(t, c, Options{Prefix: prefix, Now: clk.Now, SweepEvery: -1, Spend: &memSpend{}})
	do := redisDo(t, c)
	var admitted, refused, lost int
	for seed := range uint64(400) {
		r := rand.New(rand.NewPCG(seed, 16))
		l := plain
		if seed%2 == 1 {
			l = durable
		}
		now := clk.Now().UnixMicro()
		// A pool of limits the admissions draw from: the same bucket or
		// budget has the same limit in each.
		rpm := []int64{1, 2, 3, 5, 100}[r.IntN(5)]
		tpm := []int64{10, 1_000, 50_000, 1e9}[r.IntN(4)]
		// Half the batches with room for most of them, so that many fit
		// whole (admitAllScript's case), some only to the microsecond.
		roomy := seed%4 < 2
		if roomy {
			rpm, tpm = []int64{6, 20, 1000}[r.IntN(3)], 1e9
		}
		room := int64(40)
		if roomy {
			room = 120
		}
		budgets := []limit.Budget{
			// Multiples of every cost below: exact fits are frequent.
			{Scope: limit.ScopeKey, ID: "k0", Limit: limit.Micros(50_000 * r.Int64N(room)), Period: limit.Month},
			{Scope: limit.ScopeProject, ID: "p", Limit: limit.Micros(50_000 * r.Int64N(room+20)), Period: limit.Total},
			{Scope: limit.ScopeKey, ID: "k1", Limit: 1<<53 - 1, Period: limit.Day},
		}
		var setup [][]string
		for _, id := range []string{"k0", "k1"} {
			for _, kind := range []string{"rq", "rt"} {
				k := l.rateKey("a", kind, limit.ScopeKey, id)
				switch r.IntN(4) {
				case 3:
					// Room for none, one or two more requests, to the
					// microsecond or one microsecond either side of it.
					tat := now + window - int64(r.IntN(3))*int64(rateMicros(1, rpm)) + int64(r.IntN(3)) - 1
					setup = append(setup, []string{"SET", k, strconv.FormatInt(tat, 10), "PX", strconv.FormatInt(max(tat-now, 0)/1000+1000, 10)})
				case 1:
					setup = append(setup, []string{"SET", k, strconv.FormatInt(now-r.Int64N(window), 10), "PX", "5000"})
				case 2:
					tat := now + r.Int64N(window)
					setup = append(setup, []string{"SET", k, strconv.FormatInt(tat, 10), "PX", strconv.FormatInt((tat-now)/1000+1000, 10)})
				}
			}
		}
		for i := range budgets {
			if r.IntN(3) > 0 {
				start, end := budgets[i].Period.Span(clk.Now())
				// A multiple of the costs, or a micro-dollar either side
				// of one: fits to the micro-dollar, and just short.
				used := 50_000*r.Int64N(30) + int64(r.IntN(3)) - 1
				set := []string{"SET", l.budgetKey("a", &budgets[i], start), strconv.FormatInt(max(used, 0), 10)}
				if !end.IsZero() && r.IntN(2) == 0 {
					// An expiry other than the one an admission would
					// set: the batch must leave it alone, as one would.
					set = append(set, "PXAT", strconv.FormatInt(end.Add(budgetGrace).UnixMilli()+r.Int64N(1e7), 10))
				}
				setup = append(setup, set)
			}
		}
		setup = append(setup, []string{"ZADD", l.ledgerKey("a"), "5", "other"}, []string{"HSET", l.ledgerHash("a"), "other", "1"})
		markerLost := l == durable && r.IntN(6) == 0
		if l == durable && !markerLost {
			setup = append(setup, []string{"SET", l.seededKey("a"), "1"})
		}

		var calls []*admitCall
		withBudgets := false
		for range 2 + r.IntN(7) {
			a := limit.Admission{Tag: "a", Tokens: []int64{0, 1, 300, 20_000}[r.IntN(4)], Cost: limit.Micros([]int64{0, 50_000, 100_000, 250_000}[r.IntN(4)])}
			for _, id := range []string{"k0", "k1"} {
				if r.IntN(3) > 0 {
					a.Rates = append(a.Rates, limit.Rate{Scope: limit.ScopeKey, ID: id, RPM: rpm, TPM: tpm})
				}
			}
			for i := range budgets {
				if r.IntN(2) == 0 {
					a.Budgets = append(a.Budgets, budgets[i])
				}
			}
			if len(a.Rates)+len(a.Budgets) == 0 {
				a.Rates = []limit.Rate{{Scope: limit.ScopeKey, ID: "k0", RPM: rpm}}
			}
			withBudgets = withBudgets || len(a.Budgets) > 0
			calls = append(calls, l.prepare(a, clk.Now()))
		}

		var one [][]int64
		var states [3]map[string]keyState
		for run := range 3 {
			deleteMatching(c, prefix+"*")
			for _, cmd := range setup {
				do(cmd...)
			}
			var outs [][]int64
			var err error
			switch run {
			case 0:
				for _, call := range calls {
					out, err := l.run(ctx, &l.admit, call.keys, call.args).AsIntSlice()
					if err != nil {
						t.Fatalf("seed %d: one by one: %v", seed, err)
					}
					one = append(one, out)
				}
			case 1:
				// admitBatchScript alone, each admission decided on its own.
				keys, args := batchArgs(calls, now)
				var out []int64
				if out, err = l.run(ctx, &l.admitBatch, keys, args).AsIntSlice(); err == nil {
					if len(out) == 1 && out[0] == -1 {
						err = errCountersLost
					} else {
						outs, err = splitReplies(out, calls)
					}
				}
			case 2:
				// As a batch goes: admitAllScript when all fit, else
				// admitBatchScript.
				outs, err = l.batchReplies(ctx, calls)
			}
			if run > 0 {
				if markerLost && withBudgets {
					if !errors.Is(err, errCountersLost) {
						t.Errorf("seed %d, run %d: seeded marker missing: %v, want errCountersLost", seed, run, err)
					}
					lost++
				} else {
					if err != nil {
						t.Fatalf("seed %d, run %d: %v", seed, run, err)
					}
					for i := range calls {
						if !slices.Equal(outs[i], one[i]) {
							t.Errorf("seed %d, run %d, admission %d of %d: batch answered %v, one by one %v", seed, run, i, len(calls), outs[i], one[i])
						}
						if run == 2 && outs[i][0] == 1 {
							admitted++
						} else if run == 2 {
							refused++
						}
					}
				}
			}
			states[run] = snapshot(t, c, prefix)
		}
		if markerLost && withBudgets {
			// Nothing may change: compare with the state set up.
			deleteMatching(c, prefix+"*")
			for _, cmd := range setup {
				do(cmd...)
			}
			states[0] = snapshot(t, c, prefix)
		}
		for run := 1; run < 3; run++ {
			if len(states[0]) != len(states[run]) {
				t.Errorf("seed %d, run %d: %d keys one by one, %d after the batch", seed, run, len(states[0]), len(states[run]))
			}
			for k, want := range states[0] {
				got, ok := states[run][k]
				if !ok || got.value != want.value || (got.pttl < 0) != (want.pttl < 0) || got.pttl > want.pttl+100 || got.pttl < want.pttl-100 {
					t.Errorf("seed %d, run %d: %s: %+v after the batch, %+v one by one", seed, run, k, got, want)
				}
			}
		}
	}
	if admitted < 100 || refused < 100 || lost < 5 {
		t.Errorf("%d admitted, %d refused, %d batches with the marker lost: the cases miss some", admitted, refused, lost)
	}
}

// holdCalls makes l's admission calls wait until the test lets them go,
// and reports each call's size as it starts.
func holdCalls(l *Limiter) (started <-chan int, release func()) {
	sizes := make(chan int, 100)
	gate := make(chan struct{})
	var once sync.Once
	l.beforeCall = func(n int) {
		sizes <- n
		<-gate
	}
	return sizes, func() { once.Do(func() { close(gate) }) }
}

// waitQueued waits until n admissions of tag wait behind its call.
func waitQueued(t *testing.T, l *Limiter, tag string, n int) {
	t.Helper()
	q := l.queueOf(tag)
	for range 10_000 {
		q.mu.Lock()
		have := len(q.pending)
		q.mu.Unlock()
		if have >= n {
			return
		}
		time.Sleep(time.Millisecond)
	}
	t.Fatalf("%d admissions never queued", n)
}

// Admissions that arrive while their tag's call is in flight go to
// Redis together, in one call, after it; each is decided on its own.
func TestAdmissionsQueueBehindACallInFlight(t *testing.T) {
	c := testClient(t)
	clk := newClock(t0)
	l := newLimiter(t, c, Options{Prefix: testPrefix(t, c), Now: clk.Now, SettleDelay: -1})
	started, release := holdCalls(l)
	defer release()
	b := limit.Budget{Scope: limit.ScopeProject, ID: "p", Limit: 1_000_000, Period: limit.Month}
	a := limit.Admission{Tag: "p", Rates: []limit.Rate{{Scope: limit.ScopeKey, ID: "k", RPM: 10}}, Budgets: []limit.Budget{b}, Cost: 30_000}
	const n = 20
	decisions := make([]limit.Decision, n+1)
	errs := make([]error, n+1)
	var wg sync.WaitGroup
	wg.Go(func() { decisions[0], errs[0] = l.Admit(context.Background(), a) })
	if got := <-started; got != 1 {
		t.Fatalf("first call carries %d admissions, want 1", got)
	}
	for i := 1; i <= n; i++ {
		wg.Go(func() { decisions[i], errs[i] = l.Admit(context.Background(), a) })
	}
	waitQueued(t, l, "p", n)
	release()
	if got := <-started; got != n {
		t.Errorf("second call carries %d admissions, want the %d queued", got, n)
	}
	wg.Wait()
	allowed := 0
	for i, d := range decisions {
		if errs[i] != nil {
			t.Fatalf("admission %d: %v", i, errs[i])
		}
		if d.Allowed {
			allowed++
			continue
		}
		if d.Refused.Kind != limit.KindRequests || d.Refused.ID != "k" || d.RetryAfter <= 0 {
			t.Errorf("admission %d refused for %+v, retry after %v; want the key's rpm, with a retry-after", i, d.Refused, d.RetryAfter)
		}
	}
	if allowed != 10 {
		t.Errorf("%d of %d admitted against rpm 10, want 10", allowed, n+1)
	}
	if st := l.AdmitStats(); st.Calls != 2 || st.Queued != n {
		t.Errorf("%d calls, %d admissions queued; want 2 and %d", st.Calls, st.Queued, n)
	}
	ctx := context.Background()
	start, _ := limit.Month.Span(t0)
	if spent, err := c.Do(ctx, c.B().Get().Key(l.budgetKey("p", &b, start)).Build()).AsInt64(); err != nil || spent != 10*30_000 {
		t.Errorf("budget counter holds %d (%v), want the 10 admissions' 300000", spent, err)
	}
	if held, err := c.Do(ctx, c.B().Zcard().Key(l.ledgerKey("p")).Build()).AsInt64(); err != nil || held != 10 {
		t.Errorf("ledger holds %d reservations (%v), want 10", held, err)
	}
}

// An admission whose request ends while it waits is not sent if its
// batch has not gone yet, and is released if it has: its reservation
// would never be settled otherwise.
func TestAbandonedAdmissionsAreReleased(t *testing.T) {
	c := testClient(t)
	clk := newClock(t0)
	l := newLimiter(t, c, Options{Prefix: testPrefix(t, c), Now: clk.Now, SettleDelay: -1})
	started, release := holdCalls(l)
	b := limit.Budget{Scope: limit.ScopeProject, ID: "p", Limit: 10_000_000, Period: limit.Month}
	a := limit.Admission{Tag: "p", Budgets: []limit.Budget{b}, Cost: 1_000}
	admit := func(ctx context.Context) chan error {
		done := make(chan error, 1)
		go func() {
			d, err := l.Admit(ctx, a)
			if err == nil && !d.Allowed {
				err = fmt.Errorf("refused: %+v", d.Refused)
			}
			done <- err
		}()
		return done
	}
	first := admit(context.Background())
	<-started
	// Queued, and gone before its batch goes: never sent.
	ctx1, cancel1 := context.WithCancel(context.Background())
	gone := admit(ctx1)
	waitQueued(t, l, "p", 1)
	cancel1()
	if err := <-gone; !errors.Is(err, context.Canceled) {
		t.Fatalf("abandoned admission: %v, want context.Canceled", err)
	}
	// Gone while its batch is in flight: reserved, then released.
	ctx2, cancel2 := context.WithCancel(context.Background())
	inFlight := admit(ctx2)
	stays := admit(context.Background())
	waitQueued(t, l, "p", 3)
	l.beforeCall = func(n int) {
		if n == 2 {
			cancel2() // the batch of the two still waiting
			if err := <-inFlight; !errors.Is(err, context.Canceled) {
				t.Errorf("admission abandoned in flight: %v, want context.Canceled", err)
			}
		}
	}
	release()
	for i, done := range []chan error{first, stays} {
		if err := <-done; err != nil {
			t.Errorf("admission %d: %v", i, err)
		}
	}
	if calls, batched := l.admitCalls.Load(), l.admitBatched.Load(); calls != 2 || batched != 2 {
		t.Errorf("%d calls, %d admissions batched; want 2 and 2 (the one gone before its batch left out)", calls, batched)
	}
	waitSettled(t, l, "p", b, t0, 2_000)
}

// A batch that finds its tag's counters lost has them rebuilt from the
// durable record, then runs again.
func TestBatchReseedsLostCounters(t *testing.T) {
	c := testClient(t)
	clk := newClock(t0)
	start, _ := limit.Month.Span(t0)
	spend := &memSpend{m: map[limit.BudgetKey]int64{{Tag: "p", Scope: limit.ScopeProject, ID: "p", Period: limit.Month, Start: start}: 700_000}}
	l := newLimiter(t, c, Options{Prefix: testPrefix(t, c), Now: clk.Now, Spend: spend})
	if _, err := l.Seed(context.Background()); err != nil {
		t.Fatal(err)
	}
	started, release := holdCalls(l)
	b := limit.Budget{Scope: limit.ScopeProject, ID: "p", Limit: 1_000_000, Period: limit.Month}
	a := limit.Admission{Tag: "p", Budgets: []limit.Budget{b}, Cost: 100_000}
	var wg sync.WaitGroup
	allowed := make(chan bool, 5)
	for i := range 5 {
		wg.Go(func() {
			d, err := l.Admit(context.Background(), a)
			if err != nil {
				t.Errorf("admission: %v", err)
			}
			allowed <- d.Allowed
		})
		if i == 0 {
			<-started
		}
	}
	waitQueued(t, l, "p", 4)
	l.beforeCall = func(n int) {
		if n == 4 {
			// Redis loses the tag's counters between the two calls.
			deleteMatching(c, l.prefix+"{p}:*")
		}
	}
	release()
	wg.Wait()
	close(allowed)
	n := 0
	for ok := range allowed {
		if ok {
			n++
		}
	}
	// 700,000 spent of a 1,000,000 budget, 100,000 an admission: the
	// first fits; its reservation, not in the record yet, is lost with
	// the counters (as Seed says), and three of the batch fit on the
	// 700,000 rebuilt. Had the batch run on the lost counter, all would.
	if n != 4 {
		t.Errorf("%d of 5 admitted, want 4: the lost counter was not rebuilt from the record", n)
	}
}

// When Redis goes, every admission of a batch fails as unavailable, so
// the failure policy applies to each.
func TestBatchFailsWhole(t *testing.T) {
	c, p := proxiedClient(t)
	l := newLimiter(t, c, Options{Prefix: testPrefix(t, c), Timeout: 200 * time.Millisecond})
	started, release := holdCalls(l)
	a := rpmAdmission(1000)
	errs := make(chan error, 4)
	for i := range 4 {
		go func() {
			_, err := l.Admit(context.Background(), a)
			errs <- err
		}()
		if i == 0 {
			<-started
		}
	}
	waitQueued(t, l, a.Tag, 3)
	p.cut()
	release()
	for range 4 {
		if err := <-errs; !errors.Is(err, limit.ErrUnavailable) {
			t.Errorf("admission with Redis gone: %v, want limit.ErrUnavailable", err)
		}
	}
}

// A tag's key names, made once and kept, are the names the key functions
// make, before and after the kept names reach their bound and start over.
func TestKeyNamesKept(t *testing.T) {
	l := &Limiter{prefix: "gh:"}
	q := l.queueOf("p{1}")
	if q.tag != "p_1_" || q.ledger != l.ledgerKey("p_1_") || q.seeded != l.seededKey("p_1_") {
		t.Fatalf("tag %q, ledger %q, marker %q", q.tag, q.ledger, q.seeded)
	}
	b := limit.Budget{Scope: limit.ScopeKey, ID: "k:x", Period: limit.Month}
	for i := range 2*maxKeyNames + 10 {
		id := fmt.Sprint("k", i%(maxKeyNames+3))
		if got, want := l.name(q, keyName{kind: "rq", scope: limit.ScopeKey, id: id}), l.rateKey("p_1_", "rq", limit.ScopeKey, id); got != want {
			t.Fatalf("rate name %q, want %q", got, want)
		}
		start := fmt.Sprint("2026-", i%12)
		if got, want := l.name(q, keyName{kind: "b", scope: b.Scope, period: b.Period, start: start, id: b.ID}), l.budgetKey("p_1_", &b, start); got != want {
			t.Fatalf("budget name %q, want %q", got, want)
		}
		if len(q.names) > maxKeyNames {
			t.Fatalf("%d names kept, bound %d", len(q.names), maxKeyNames)
		}
	}
}
