package redis

import (
	"math/rand/v2"
	"reflect"
	"slices"
	"testing"
	"time"

	"gatehouse/internal/limit"
)

// TestShapesMatchAFreshLook: admissions and settles that find their shape
// in their Memo name the same counters, with the same arguments, as
// those that find them anew — across shapes that take turns in one Memo
// (more than it keeps), duplicate listings, and days, weeks and months
// that start over — and the Memo does serve the repeats.
func TestShapesMatchAFreshLook(t *testing.T) {
	c := testClient(t)
	start := time.Date(2026, 1, 30, 22, 0, 0, 0, time.UTC) // two midnights and a month's end ahead
	clk := newClock(start)
	l := newLimiter(t, c, Options{Prefix: testPrefix(t, c), Now: clk.Now, SweepEvery: -1})
	other := newLimiter(t, c, Options{Prefix: testPrefix(t, c) + "o:", Now: clk.Now, SweepEvery: -1})
	r := rand.New(rand.NewPCG(7, 11))
	budgets := []limit.Budget{
		{Scope: limit.ScopeKey, ID: "k0", Limit: 5_000_000, Period: limit.Day},
		{Scope: limit.ScopeProject, ID: "p", Limit: 9_000_000, Period: limit.Month},
		{Scope: limit.ScopeKey, ID: "k0", Limit: 7_000_000, Period: limit.Total},
		{Scope: limit.ScopeKey, ID: "k0", Limit: 5_000_000, Period: limit.Day}, // listed twice
		{Scope: limit.ScopeCustomer, ID: "c", Limit: 1_000_000, Period: limit.Week},
	}
	memo := new(limit.Memo)
	var served int
	for i := range 400 {
		clk.Advance(time.Duration(r.IntN(20)) * time.Minute)
		a := limit.Admission{Tag: "p", Tokens: []int64{0, 1, 300, 20_000}[r.IntN(4)],
			Cost: limit.Micros([]int64{0, 50_000, 250_000}[r.IntN(3)]), Memo: memo}
		shapeNo := r.IntN(6) // more shapes than a Memo keeps
		for j, id := range []string{"k0", "k1", "k0"} {
			if shapeNo>>j&1 == 1 || j == 0 {
				a.Rates = append(a.Rates, limit.Rate{Scope: limit.ScopeKey, ID: id, RPM: int64(100 + shapeNo), TPM: 50_000})
			}
		}
		for j := range budgets {
			if (shapeNo+j)%3 != 0 {
				a.Budgets = append(a.Budgets, budgets[j])
			}
		}
		now := clk.Now()
		before, _ := memo.Aside().(*shapes)
		var had []*shape
		if before != nil {
			for k := range before.slots {
				had = append(had, before.slots[k].Load())
			}
		}
		lim := l
		if i%7 == 0 {
			lim = other // a Memo shared by two limiters: each uses its own shapes
		}
		got := lim.prepare(a, now)
		if s := lim.shapeOf(&a, now); slices.Contains(had, s) {
			served++
		}
		fresh := a
		fresh.Memo = nil
		want := lim.prepare(fresh, now)
		if !reflect.DeepEqual(got.keys, want.keys) || !reflect.DeepEqual(got.refs, want.refs) || got.nr != want.nr || got.nb != want.nb {
			t.Fatalf("admission %d at %v: kept shape gave keys %q refs %+v; a fresh look %q %+v", i, now, got.keys, got.refs, want.keys, want.refs)
		}
		for k := range got.args {
			if k != 4 && got.args[k] != want.args[k] { // 4: the reservation's id, new each time
				t.Fatalf("admission %d: argument %d is %q, a fresh look gives %q", i, k, got.args[k], want.args[k])
			}
		}

		// The settle, a while later (perhaps the next day): its counters
		// are those of the admission's day.
		clk.Advance(time.Duration(r.IntN(3)) * time.Hour)
		res := limit.NewReservation(got.id, a, now)
		job, ok := lim.settleJobOf(&res, limit.Actual{Tokens: a.Tokens + 5, Cost: 1})
		freshRes := limit.NewReservation(got.id, fresh, now)
		wantJob, wantOK := lim.settleJobOf(&freshRes, limit.Actual{Tokens: a.Tokens + 5, Cost: 1})
		if ok != wantOK || !reflect.DeepEqual(job, wantJob) {
			t.Fatalf("settle %d: kept shape gave %+v %v; a fresh look %+v %v", i, job, ok, wantJob, wantOK)
		}
		if len(a.Budgets) > 0 && !slices.Equal(job.budgets, got.keys[got.nr:got.nr+got.nb]) {
			t.Fatalf("settle %d charges %q, its admission reserved in %q", i, job.budgets, got.keys[got.nr:got.nr+got.nb])
		}
	}
	if served < 100 {
		t.Errorf("the Memo served %d of 400 admissions their shape; want most repeats served", served)
	}
}
