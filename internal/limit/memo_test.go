package limit

import (
	"context"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// decisionView is what a Decision tells the caller (its Reservation
// aside, whose flag and cells are the admitter's).
type decisionView struct {
	Allowed          bool
	Refused          Refusal
	RetryAfter       time.Duration
	Requests, Tokens Quota
	Budgeted         bool
	BudgetLeft       Micros
}

func viewOf(d *Decision) decisionView {
	return decisionView{d.Allowed, d.Refused, d.RetryAfter, d.Requests, d.Tokens, d.Budgeted, d.BudgetLeft}
}

// memoShapes are admissions of one key of many shapes: more than a
// Memo keeps, each differing from the first in one thing (a key whose
// limits were edited, a per-model rate, another budget), with dated and
// total budgets and a counter listed twice.
func memoShapes() []Admission {
	kr := func(rpm, tpm int64) Rate { return Rate{Scope: ScopeKey, ID: "k", Name: "key k", RPM: rpm, TPM: tpm} }
	kb := func(limit Micros, p Period) Budget {
		return Budget{Scope: ScopeKey, ID: "k", Name: "key k", Limit: limit, Period: p}
	}
	pb := Budget{Scope: ScopeProject, ID: "p", Limit: 2000, Period: Month}
	model := func(m string, rpm int64) Rate {
		return Rate{Scope: ScopeKeyModel, ID: KeyModelID("k", m), RPM: rpm}
	}
	shape := func(rs []Rate, bs ...Budget) Admission { return Admission{Tag: "p", Rates: rs, Budgets: bs} }
	return []Admission{
		shape([]Rate{kr(6, 300)}, kb(1000, Day), pb),
		shape([]Rate{kr(3, 300)}, kb(1000, Day), pb),                                       // rpm edited
		shape([]Rate{kr(6, 100)}, kb(1000, Day), pb),                                       // tpm edited
		shape([]Rate{{Scope: ScopeKey, ID: "k2", RPM: 6, TPM: 300}}, kb(1000, Day), pb),    // another key's rates
		shape([]Rate{{Scope: ScopeProject, ID: "k", RPM: 6, TPM: 300}}, kb(1000, Day), pb), // another scope's
		shape([]Rate{kr(6, 300)}, kb(450, Day), pb),                                        // budget edited
		shape([]Rate{kr(6, 300)}, kb(1000, Month), pb),                                     // its period
		shape([]Rate{kr(6, 300)}, kb(1000, Day), Budget{Scope: ScopeProject, ID: "p2", Limit: 2000, Period: Month}),
		shape([]Rate{kr(6, 300)}, kb(1000, Day), Budget{Scope: ScopeCustomer, ID: "p", Limit: 2000, Period: Month}),
		shape([]Rate{kr(6, 300)}, kb(1000, Day)),
		shape([]Rate{kr(6, 300), model("m1", 2)}, kb(1000, Day), pb),
		shape([]Rate{kr(6, 300), model("m2", 1)}, kb(1000, Total)),
		shape([]Rate{kr(6, 0), kr(4, 300)}, kb(1000, Day), kb(500, Day)),
		shape([]Rate{{Scope: ScopeProject, ID: "p", RPM: 5}}),
	}
}

// TestMemoDecidesAsWithout: admissions that carry a Memo are decided
// exactly as the same admissions without one, by an admitter of their
// own, through changing limits, more shapes than a Memo keeps, settles,
// sweeps and days (and weeks, and months) going by.
func TestMemoDecidesAsWithout(t *testing.T) {
	ctx := context.Background()
	clk := newClock(time.Date(2025, 3, 30, 23, 0, 0, 0, time.UTC)) // a Sunday: day, week and month end within the run
	with := newEmbedded(t, Options{Now: clk.Now, SweepEvery: time.Hour})
	without := newEmbedded(t, Options{Now: clk.Now, SweepEvery: time.Hour})
	memo := &Memo{}
	shapes := memoShapes()
	rng := rand.New(rand.NewPCG(1, 16))
	used, allowed := 0, 0 // admissions decided by a plan, admitted
	for i := range 4000 {
		if i%200 == 0 {
			memo = &Memo{} // as a reload's principals come with new ones: other shapes get the slots
		}
		a := shapes[rng.IntN(len(shapes))]
		a.Tokens, a.Cost = rng.Int64N(120), Micros(rng.Int64N(10))
		b := a
		a.Memo = memo
		if p, _ := memo.find(with, &a, clk.Now()); p != nil {
			used++
		}
		var dw, dn Decision
		with.AdmitInto(ctx, &a, &dw)
		without.AdmitInto(ctx, &b, &dn)
		if diff := cmp.Diff(viewOf(&dn), viewOf(&dw)); diff != "" {
			t.Fatalf("admission %d (%+v): with a Memo differs from without (-without +with):\n%s", i, b, diff)
		}
		if dw.Allowed {
			allowed++
			actual := Actual{Tokens: rng.Int64N(150), Cost: Micros(rng.Int64N(12))}
			with.Settle(ctx, dw.Reservation, actual)
			without.Settle(ctx, dn.Reservation, actual)
		}
		clk.Advance(time.Duration(rng.Int64N(int64(10 * time.Second))))
		if rng.IntN(100) == 0 {
			clk.Advance(time.Duration(rng.Int64N(int64(6 * time.Hour))))
		}
		if rng.IntN(300) == 0 {
			with.sweep(clk.Now())
			without.sweep(clk.Now())
		}
	}
	if used < 1000 || allowed < 1000 || allowed > 3500 {
		t.Fatalf("of 4000 admissions %d used a plan, %d were admitted: the Memo or the limits are not exercised", used, allowed)
	}
}

// TestMemoPlanAfterSweep: a plan whose counter was swept is not used
// (the admission counts in the counter made in its place) and is
// replaced by one holding the new counter.
func TestMemoPlanAfterSweep(t *testing.T) {
	clk := newClock(t0)
	e := newEmbedded(t, Options{Now: clk.Now, SweepEvery: time.Hour})
	ctx := context.Background()
	a := Admission{Rates: []Rate{keyRate("k", 2, 0)}, Memo: &Memo{}}
	var d Decision
	if e.AdmitInto(ctx, &a, &d); !d.Allowed {
		t.Fatal("first admission refused")
	}
	old := a.Memo.plans[0].Load()
	if old == nil || len(old.ops) != 1 {
		t.Fatalf("no plan kept by the first admission: %+v", old)
	}
	clk.Advance(time.Minute) // the bucket is full again
	e.sweep(clk.Now())
	if !old.ops[0].c.dead {
		t.Fatal("the sweep did not drop the counter")
	}
	for i, want := range []bool{true, true, false} {
		if e.AdmitInto(ctx, &a, &d); d.Allowed != want {
			t.Fatalf("admission %d after the sweep: allowed %v, want %v", i+1, d.Allowed, want)
		}
	}
	p := a.Memo.plans[0].Load()
	c := e.lookup(cellKey{kind: cellRequests, scope: ScopeKey, id: "k"}, false)
	if p == old || p.ops[0].c != c || c == nil {
		t.Fatalf("plan after the sweep holds %p, want the new counter %p", p.ops[0].c, c)
	}
	if a.Memo.plans[1].Load() != nil {
		t.Fatal("the stale plan was kept beside its replacement")
	}
}

// TestMemoPlanNewDay: a plan with a dated budget is not used on another
// UTC day (the period started over), and is replaced.
func TestMemoPlanNewDay(t *testing.T) {
	clk := newClock(time.Date(2025, 3, 14, 23, 59, 0, 0, time.UTC))
	e := newEmbedded(t, Options{Now: clk.Now, SweepEvery: time.Hour})
	ctx := context.Background()
	a := Admission{Budgets: []Budget{{Scope: ScopeKey, ID: "k", Limit: 10, Period: Day}}, Cost: 6, Memo: &Memo{}}
	var d Decision
	for i, c := range []struct {
		advance time.Duration
		want    bool
	}{{0, true}, {0, false}, {time.Minute, true}, {time.Second, false}} {
		clk.Advance(c.advance)
		if e.AdmitInto(ctx, &a, &d); d.Allowed != c.want {
			t.Fatalf("admission %d: allowed %v, want %v", i+1, d.Allowed, c.want)
		}
	}
	if p := a.Memo.plans[0].Load(); p == nil || p.day != floorDiv(clk.Now().Unix(), 86400) {
		t.Fatalf("plan of day %v, want today's", p)
	}
	if got := e.Spent(ScopeKey, "k", Day, clk.Now()); got != 6 {
		t.Fatalf("spent today %d, want 6", got)
	}
}

// TestMemoShapes: a Memo keeps the first shapes of admission up to
// memoPlans and evicts none of them for another; a plan made by another
// admitter is replaced, never used.
func TestMemoShapes(t *testing.T) {
	ctx := context.Background()
	e := newEmbedded(t, Options{Now: newClock(t0).Now})
	memo := &Memo{}
	var d Decision
	for i := range memoPlans + 2 {
		a := Admission{Rates: []Rate{keyRate("k", int64(10+i), 0)}, Memo: memo}
		e.AdmitInto(ctx, &a, &d)
	}
	for i := range memoPlans {
		if p := memo.plans[i].Load(); p == nil || p.shape.rates[0].RPM != int64(10+i) {
			t.Fatalf("slot %d holds %+v, want the plan of rpm %d", i, p, 10+i)
		}
	}
	c := e.lookup(cellKey{kind: cellRequests, scope: ScopeKey, id: "k"}, false)
	v := c.v
	other := newEmbedded(t, Options{Now: newClock(t0).Now})
	a := Admission{Rates: []Rate{keyRate("k", 10, 0)}, Memo: memo}
	if p, slot := memo.find(other, &a, t0); p != nil || slot != 0 {
		t.Fatalf("another admitter found plan %p, slot %d; want none, slot 0", p, slot)
	}
	other.AdmitInto(ctx, &a, &d)
	if p := memo.plans[0].Load(); p == nil || p.e != other {
		t.Fatal("the other admitter's plan did not replace the first one's")
	}
	if c.v != v {
		t.Fatal("the first admitter's counter was counted in by the other's admission")
	}
	if oc := other.lookup(cellKey{kind: cellRequests, scope: ScopeKey, id: "k"}, false); oc == nil || oc.v != t0.UnixNano()+6*int64(time.Second) {
		t.Fatal("the other admitter's admission was not counted in its own counter")
	}
}

// TestMemoExactUnderConcurrency: admissions of one key through its Memo,
// concurrently, reserve exactly the limit, and settle once each.
func TestMemoExactUnderConcurrency(t *testing.T) {
	clk := newClock(t0) // frozen: no refill during the burst
	e := newEmbedded(t, Options{Now: clk.Now})
	a := Admission{Tag: "p1", Rates: []Rate{keyRate("k1", 100, 0), {Scope: ScopeProject, ID: "p1", RPM: 1000}},
		Budgets: []Budget{{Scope: ScopeKey, ID: "k1", Limit: 1000, Period: Day}}, Cost: 7, Memo: &Memo{}}
	var admitted atomic.Int64
	var wg sync.WaitGroup
	for range 500 {
		wg.Go(func() {
			var d Decision
			e.AdmitInto(context.Background(), &a, &d)
			if d.Allowed {
				admitted.Add(1)
				e.Settle(context.Background(), d.Reservation, Actual{Cost: 5})
				e.Settle(context.Background(), d.Reservation, Actual{Cost: 5})
			}
		})
	}
	wg.Wait()
	if got := admitted.Load(); got != 100 {
		t.Fatalf("admitted %d, want exactly 100", got)
	}
	if got := e.Spent(ScopeKey, "k1", Day, t0); got != 500 {
		t.Fatalf("spent %d, want 500 (100 settles of 5)", got)
	}
}

// TestFlagSourceDistinct: a flagSource gives every caller a flag of its
// own, unset, across slabs and when callers race for a slab's last flags.
func TestFlagSourceDistinct(t *testing.T) {
	var s flagSource
	const goroutines, each = 8, 3*flagSlabSize + 5
	got := make([][]*atomic.Bool, goroutines)
	var wg sync.WaitGroup
	for g := range got {
		wg.Go(func() {
			for range each {
				got[g] = append(got[g], s.take())
			}
		})
	}
	wg.Wait()
	seen := make(map[*atomic.Bool]bool, goroutines*each)
	for _, flags := range got {
		for _, f := range flags {
			if seen[f] {
				t.Fatalf("flag %p given out twice", f)
			}
			if f.Load() {
				t.Fatalf("flag %p given out set", f)
			}
			seen[f] = true
		}
	}
}

// TestMemoReservationsSettleOnce: reservations admitted through a Memo
// plan (whose settled flags come from the plan's slabs, more of them
// than a slab holds) each settle exactly once, however many copies of
// each settle, concurrently; none settles another's.
func TestMemoReservationsSettleOnce(t *testing.T) {
	e := newEmbedded(t, Options{Now: newClock(t0).Now})
	ctx := context.Background()
	a := Admission{Tag: "p1", Rates: []Rate{keyRate("k1", 100_000, 0)},
		Budgets: []Budget{{Scope: ScopeKey, ID: "k1", Limit: USD(1000), Period: Day}}, Memo: &Memo{}}
	const n, copies = 3*flagSlabSize + 5, 4
	res := make([]Reservation, n)
	for i := range res {
		var d Decision
		if e.AdmitInto(ctx, &a, &d); !d.Allowed {
			t.Fatalf("admission %d refused: %+v", i, d.Refused)
		}
		res[i] = d.Reservation
	}
	if res[1].held != res[n-1].held {
		t.Fatal("the admissions did not share a Memo plan's cells: the test does not reach the plan's flags")
	}
	var wg sync.WaitGroup
	for i := range res {
		for range copies {
			r := res[i] // each goroutine settles a copy of its own
			wg.Go(func() { e.Settle(ctx, r, Actual{Cost: 1}) })
		}
	}
	wg.Wait()
	// Nothing was reserved; each settle that was not refused spent 1.
	if got := e.Spent(ScopeKey, "k1", Day, t0); got != n {
		t.Fatalf("spent %d, want %d: one settle of each reservation", got, n)
	}
	for i := range res {
		if res[i].Claim() {
			t.Fatalf("reservation %d claimed again after it settled", i)
		}
	}
}
