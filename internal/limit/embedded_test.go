package limit

import (
	"context"
	"errors"
	"fmt"
	"hash/maphash"
	"math"
	"math/rand/v2"
	"reflect"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// fakeClock is a settable clock safe for concurrent use.
type fakeClock struct{ ns atomic.Int64 }

func newClock(t time.Time) *fakeClock {
	c := &fakeClock{}
	c.ns.Store(t.UnixNano())
	return c
}
func (c *fakeClock) Now() time.Time          { return time.Unix(0, c.ns.Load()).UTC() }
func (c *fakeClock) Advance(d time.Duration) { c.ns.Add(int64(d)) }
func (c *fakeClock) Set(t time.Time)         { c.ns.Store(t.UnixNano()) }
func newEmbedded(t testing.TB, o Options) *Embedded {
	t.Helper()
	e, err := NewEmbedded(context.Background(), o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { e.Close(context.Background()) })
	return e
}

var t0 = time.Date(2025, 3, 14, 12, 0, 0, 0, time.UTC)

func keyRate(id string, rpm, tpm int64) Rate {
	return Rate{Scope: ScopeKey, ID: id, RPM: rpm, TPM: tpm}
}

func TestExactRPMUnderConcurrency(t *testing.T) {
	clk := newClock(t0) // frozen: no refill during the burst
	e := newEmbedded(t, Options{Now: clk.Now})
	a := Admission{Tag: "p1", Rates: []Rate{keyRate("k1", 100, 0), {Scope: ScopeProject, ID: "p1", RPM: 1000}}}
	var admitted atomic.Int64
	var wg sync.WaitGroup
	for range 500 {
		wg.Go(func() {
			d, err := e.Admit(context.Background(), a)
			if err != nil {
				t.Error(err)
			}
			if d.Allowed {
				admitted.Add(1)
			}
		})
	}
	wg.Wait()
	if got := admitted.Load(); got != 100 {
		t.Fatalf("admitted %d of 500 against rpm=100, want exactly 100", got)
	}
}

func TestRefillFakeClock(t *testing.T) {
	clk := newClock(t0)
	e := newEmbedded(t, Options{Now: clk.Now})
	a := Admission{Rates: []Rate{keyRate("k", 60, 0)}}
	ctx := context.Background()
	for i := range 60 {
		if d, _ := e.Admit(ctx, a); !d.Allowed {
			t.Fatalf("request %d refused", i)
		}
	}
	d, _ := e.Admit(ctx, a)
	if d.Allowed || d.Refused.Kind != KindRequests || d.RetryAfter != time.Second {
		t.Fatalf("61st: allowed=%v refused=%+v retry=%v, want refused requests with Retry-After 1s", d.Allowed, d.Refused, d.RetryAfter)
	}
	if d.Requests != (Quota{Limit: 60, Remaining: 0, Reset: time.Minute}) {
		t.Errorf("quota %+v", d.Requests)
	}
	clk.Advance(999 * time.Millisecond)
	if d, _ := e.Admit(ctx, a); d.Allowed {
		t.Fatal("admitted before a request's worth refilled")
	}
	clk.Advance(time.Millisecond)
	if d, _ := e.Admit(ctx, a); !d.Allowed {
		t.Fatal("refused after one second refilled one request")
	}
	if d, _ := e.Admit(ctx, a); d.Allowed {
		t.Fatal("one second refilled more than one request")
	}
	clk.Advance(30 * time.Second)
	d, _ = e.Admit(ctx, a)
	if !d.Allowed || d.Requests.Remaining != 29 {
		t.Fatalf("after 30s: allowed=%v remaining=%d, want true, 29", d.Allowed, d.Requests.Remaining)
	}
}

func TestOddLimitAdmitsExactly(t *testing.T) {
	for _, rpm := range []int64{1, 7, 13, 99, 1000} {
		e := newEmbedded(t, Options{Now: newClock(t0).Now})
		a := Admission{Rates: []Rate{keyRate("k", rpm, 0)}}
		var n int64
		for range rpm + 5 {
			if d, _ := e.Admit(context.Background(), a); d.Allowed {
				n++
			}
		}
		if n != rpm {
			t.Errorf("rpm=%d admitted %d", rpm, n)
		}
	}
}

func TestTokensSettleCorrects(t *testing.T) {
	clk := newClock(t0)
	e := newEmbedded(t, Options{Now: clk.Now})
	ctx := context.Background()
	a := Admission{Rates: []Rate{keyRate("k", 0, 1000)}, Tokens: 600}
	d1, _ := e.Admit(ctx, a)
	if !d1.Allowed || d1.Tokens.Remaining != 400 {
		t.Fatalf("first: %+v", d1)
	}
	d2, _ := e.Admit(ctx, a)
	if d2.Allowed || d2.Refused.Kind != KindTokens {
		t.Fatalf("second should be refused on tokens: %+v", d2)
	}
	if err := e.Settle(ctx, d1.Reservation, Actual{Tokens: 100}); err != nil {
		t.Fatal(err)
	}
	d3, _ := e.Admit(ctx, a)
	if !d3.Allowed || d3.Tokens.Remaining != 300 {
		t.Fatalf("after settling 600 → 100: %+v", d3)
	}
	// Under-estimates are charged too.
	if err := e.Settle(ctx, d3.Reservation, Actual{Tokens: 800}); err != nil {
		t.Fatal(err)
	}
	// 100 + 800 settled: 100 left.
	if d4, _ := e.Admit(ctx, Admission{Rates: a.Rates, Tokens: 101}); d4.Allowed {
		t.Fatalf("101 tokens admitted with 100 left: %+v", d4.Tokens)
	}
	if d5, _ := e.Admit(ctx, Admission{Rates: a.Rates, Tokens: 100}); !d5.Allowed || d5.Tokens.Remaining != 0 {
		t.Fatalf("100 tokens refused with 100 left: %+v", d5.Tokens)
	}
}

func TestTooLargeRefusals(t *testing.T) {
	e := newEmbedded(t, Options{Now: newClock(t0).Now})
	d, _ := e.Admit(context.Background(), Admission{Rates: []Rate{keyRate("k", 10, 100)}, Tokens: 101})
	if d.Allowed || !d.Refused.TooLarge || d.Refused.Kind != KindTokens || d.RetryAfter != 0 {
		t.Fatalf("%+v", d)
	}
	d, _ = e.Admit(context.Background(), Admission{
		Budgets: []Budget{{Scope: ScopeKey, ID: "k", Name: "ci-bot", Limit: USD(1), Period: Month}}, Cost: USD(1.5)})
	if d.Allowed || !d.Refused.TooLarge {
		t.Fatalf("%+v", d)
	}
	if got, want := d.Refused.Message(), "request's worst-case cost exceeds the budget of key ci-bot (month)"; got != want {
		t.Errorf("message %q, want %q", got, want)
	}
}

func TestAllOrNothing(t *testing.T) {
	e := newEmbedded(t, Options{Now: newClock(t0).Now})
	ctx := context.Background()
	rates := []Rate{keyRate("k", 10, 1000), {Scope: ScopeKeyModel, ID: KeyModelID("k", "gpt-4o"), RPM: 5}}
	budget := Budget{Scope: ScopeProject, ID: "p", Name: "acme", Limit: USD(1), Period: Month}
	a := Admission{Tag: "p", Rates: rates, Budgets: []Budget{budget}, Tokens: 100, Cost: USD(0.6)}
	if d, _ := e.Admit(ctx, a); !d.Allowed {
		t.Fatalf("first refused: %+v", d)
	}
	d, _ := e.Admit(ctx, a)
	if d.Allowed || d.Refused.Kind != KindBudget {
		t.Fatalf("second should hit the budget: %+v", d)
	}
	if got, want := d.Refused.Message(), "budget of project acme (month) exhausted"; got != want {
		t.Errorf("message %q, want %q", got, want)
	}
	if d.Refused.Code() != "budget_exceeded" {
		t.Errorf("code %q", d.Refused.Code())
	}
	if want := time.Date(2025, 4, 1, 0, 0, 0, 0, time.UTC).Sub(t0); d.RetryAfter != want {
		t.Errorf("retry after %v, want %v (period end)", d.RetryAfter, want)
	}
	// The refused request reserved nothing in the rate buckets.
	d, _ = e.Admit(ctx, Admission{Rates: rates, Tokens: 100})
	if !d.Allowed || d.Requests.Remaining != 3 || d.Tokens.Remaining != 800 {
		t.Fatalf("refused admission leaked into buckets: %+v %+v", d.Requests, d.Tokens)
	}
	if d.Requests.Limit != 5 {
		t.Errorf("binding request bucket: %+v, want the key-model one (limit 5)", d.Requests)
	}
	if got := e.Spent(ScopeProject, "p", Month, t0); got != USD(0.6) {
		t.Errorf("spent %v", got)
	}
}

func TestSettleOnce(t *testing.T) {
	e := newEmbedded(t, Options{Now: newClock(t0).Now})
	ctx := context.Background()
	b := Budget{Scope: ScopeKey, ID: "k", Limit: USD(10), Period: Day}
	d, _ := e.Admit(ctx, Admission{Budgets: []Budget{b}, Cost: USD(1)})
	r := d.Reservation
	copy := r
	for range 3 {
		e.Settle(ctx, r, Actual{Cost: USD(0.25)})
		e.Settle(ctx, copy, Actual{Cost: USD(0.25)})
		e.SettleInPlace(ctx, &copy, Actual{Cost: USD(0.5)})
	}
	if got := e.Spent(ScopeKey, "k", Day, t0); got != USD(0.25) {
		t.Fatalf("spent %v after repeated settles, want 0.250000", got)
	}
	// The zero Reservation (a refused admission) settles to nothing.
	if err := e.Settle(ctx, Reservation{}, Actual{Cost: 5}); err != nil {
		t.Fatal(err)
	}
	if err := e.SettleInPlace(ctx, &Reservation{}, Actual{Cost: 5}); err != nil {
		t.Fatal(err)
	}
	// Settled in place first: once, and its copies not again.
	d, _ = e.Admit(ctx, Admission{Budgets: []Budget{b}, Cost: USD(1)})
	r = d.Reservation
	for range 3 {
		e.SettleInPlace(ctx, &r, Actual{Cost: USD(0.5)})
		e.Settle(ctx, d.Reservation, Actual{Cost: USD(0.25)})
	}
	if got := e.Spent(ScopeKey, "k", Day, t0); got != USD(0.75) {
		t.Fatalf("spent %v after settling in place, want 0.750000", got)
	}
}

func TestFailedCallSettlesToZero(t *testing.T) {
	e := newEmbedded(t, Options{Now: newClock(t0).Now})
	ctx := context.Background()
	a := Admission{Rates: []Rate{keyRate("k", 0, 1000)}, Budgets: []Budget{{Scope: ScopeKey, ID: "k", Limit: USD(1), Period: Total}},
		Tokens: 900, Cost: USD(0.9)}
	d, _ := e.Admit(ctx, a)
	e.Settle(ctx, d.Reservation, Actual{})
	if got := e.Spent(ScopeKey, "k", Total, t0); got != 0 {
		t.Errorf("spent %v after a failed call", got)
	}
	if d, _ := e.Admit(ctx, a); !d.Allowed {
		t.Errorf("tokens not returned: %+v", d.Tokens)
	}
}

// The budget bound: settled spend never exceeds the budget plus the sum
// of what actual costs exceeded their estimates by. With estimates that
// are true worst cases the excess is zero.
func TestBudgetNeverOverspent(t *testing.T) {
	for _, over := range []Micros{0, 3000} {
		t.Run(fmt.Sprintf("underestimate=%d", over), func(t *testing.T) {
			e := newEmbedded(t, Options{})
			ctx := context.Background()
			b := Budget{Scope: ScopeKey, ID: "k", Limit: USD(1), Period: Month}
			const est = Micros(30_000) // $0.03 worst case
			var excess atomic.Int64
			var wg sync.WaitGroup
			for i := range 200 {
				wg.Go(func() {
					d, err := e.Admit(ctx, Admission{Budgets: []Budget{b}, Cost: est})
					if err != nil || !d.Allowed {
						return
					}
					act := Micros(rand.Int64N(int64(est)))
					if over > 0 && i%2 == 0 {
						act = est + over
						excess.Add(int64(over))
					}
					e.Settle(ctx, d.Reservation, Actual{Cost: act})
				})
			}
			wg.Wait()
			got := e.Spent(ScopeKey, "k", Month, time.Now())
			if bound := USD(1) + Micros(excess.Load()); got > bound {
				t.Fatalf("settled %v > bound %v", got, bound)
			}
			if got <= 0 {
				t.Fatalf("nothing spent")
			}
		})
	}
}

func TestPeriodRollover(t *testing.T) {
	cases := []struct {
		p         Period
		before    time.Time
		after     time.Time
		stillSame time.Time
	}{
		{Day, time.Date(2025, 3, 14, 23, 59, 59, 0, time.UTC), time.Date(2025, 3, 15, 0, 0, 0, 0, time.UTC), time.Date(2025, 3, 14, 0, 0, 0, 0, time.UTC)},
		{Week, time.Date(2025, 3, 16, 23, 59, 59, 0, time.UTC), time.Date(2025, 3, 17, 0, 0, 0, 0, time.UTC), time.Date(2025, 3, 10, 0, 0, 0, 0, time.UTC)},
		{Month, time.Date(2025, 1, 31, 23, 59, 59, 0, time.UTC), time.Date(2025, 2, 1, 0, 0, 0, 0, time.UTC), time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)},
		{Month, time.Date(2024, 12, 31, 23, 0, 0, 0, time.UTC), time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC), time.Date(2024, 12, 1, 0, 0, 0, 0, time.UTC)},
	}
	for _, c := range cases {
		t.Run(string(c.p)+c.before.Format("2006-01-02"), func(t *testing.T) {
			clk := newClock(c.before)
			e := newEmbedded(t, Options{Now: clk.Now})
			ctx := context.Background()
			a := Admission{Budgets: []Budget{{Scope: ScopeCustomer, ID: "c", Limit: USD(1), Period: c.p}}, Cost: USD(1)}
			d, _ := e.Admit(ctx, a)
			e.Settle(ctx, d.Reservation, Actual{Cost: USD(1)})
			clk.Set(c.stillSame)
			if d, _ := e.Admit(ctx, a); d.Allowed {
				t.Fatal("admitted in the same exhausted period")
			}
			clk.Set(c.before)
			if d, _ := e.Admit(ctx, a); d.Allowed {
				t.Fatal("admitted in the same exhausted period")
			}
			clk.Set(c.after)
			d, _ = e.Admit(ctx, a)
			if !d.Allowed {
				t.Fatalf("refused after the period rolled over: %+v", d.Refused)
			}
			// A settle of the old period's reservation lands there.
			e.sweep(clk.Now())
			if got := e.Spent(ScopeCustomer, "c", c.p, c.after); got != USD(1) {
				t.Errorf("new period spent %v", got)
			}
		})
	}
}

func TestSpanTable(t *testing.T) {
	for _, c := range []struct {
		p     Period
		t     time.Time
		start string
		end   time.Time
	}{
		{Day, time.Date(2025, 3, 14, 5, 0, 0, 0, time.FixedZone("x", -8*3600)), "2025-03-14", time.Date(2025, 3, 15, 0, 0, 0, 0, time.UTC)},
		{Week, time.Date(2025, 3, 14, 5, 0, 0, 0, time.UTC), "2025-03-10", time.Date(2025, 3, 17, 0, 0, 0, 0, time.UTC)},
		{Week, time.Date(2025, 3, 10, 0, 0, 0, 0, time.UTC), "2025-03-10", time.Date(2025, 3, 17, 0, 0, 0, 0, time.UTC)},
		{Week, time.Date(2025, 3, 2, 0, 0, 0, 0, time.UTC), "2025-02-24", time.Date(2025, 3, 3, 0, 0, 0, 0, time.UTC)},
		{Month, time.Date(2024, 2, 29, 0, 0, 0, 0, time.UTC), "2024-02-01", time.Date(2024, 3, 1, 0, 0, 0, 0, time.UTC)},
		{Total, time.Date(2024, 2, 29, 0, 0, 0, 0, time.UTC), "", time.Time{}},
	} {
		s, e := c.p.Span(c.t)
		if s != c.start || !e.Equal(c.end) {
			t.Errorf("%s at %v: %s %v, want %s %v", c.p, c.t, s, e, c.start, c.end)
		}
	}
	if got := Since(time.Date(2025, 3, 2, 0, 0, 0, 0, time.UTC)); got != "2025-02-24" {
		t.Errorf("Since = %s", got)
	}
}

// Admissions touching the same counters in different orders must not
// deadlock, and the sweeper may run meanwhile.
func TestNoDeadlockWithSweeper(t *testing.T) {
	clk := newClock(t0)
	e := newEmbedded(t, Options{Now: clk.Now})
	ctx := context.Background()
	var wg sync.WaitGroup
	stop := make(chan struct{})
	wg.Go(func() {
		for {
			select {
			case <-stop:
				return
			default:
				clk.Advance(time.Second)
				e.sweep(clk.Now())
			}
		}
	})
	var admits sync.WaitGroup
	for i := range 8 {
		admits.Go(func() {
			rs := []Rate{keyRate("a", 1e6, 0), keyRate("b", 1e6, 0), keyRate("c", 1e6, 0)}
			if i%2 == 1 {
				rs[0], rs[2] = rs[2], rs[0]
			}
			for range 2000 {
				d, _ := e.Admit(ctx, Admission{Rates: rs, Budgets: []Budget{{Scope: ScopeKey, ID: "a", Limit: 1e12, Period: Day}}, Cost: 1})
				e.Settle(ctx, d.Reservation, Actual{Cost: 1})
			}
		})
	}
	done := make(chan struct{})
	go func() { admits.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		t.Fatal("admissions stuck: deadlock?")
	}
	close(stop)
	wg.Wait()
}

// memSpend is an in-memory SpendStore.
type memSpend struct {
	mu   sync.Mutex
	m    map[BudgetKey]int64
	fail error
	adds int
	// during runs as AddSpend starts, before the store's lock.
	during func()
}

func (s *memSpend) LoadSpend(_ context.Context, since string) (map[BudgetKey]int64, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := map[BudgetKey]int64{}
	for k, v := range s.m {
		if k.Start == "" || k.Start >= since {
			out[k] = v
		}
	}
	return out, nil
}

func (s *memSpend) AddSpend(_ context.Context, d map[BudgetKey]int64) error {
	if s.during != nil {
		s.during()
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.fail != nil {
		return s.fail
	}
	s.adds++
	if s.m == nil {
		s.m = map[BudgetKey]int64{}
	}
	for k, v := range d {
		s.m[k] += v
	}
	return nil
}

func TestSpendPersistedAndReloaded(t *testing.T) {
	st := &memSpend{}
	clk := newClock(t0)
	ctx := context.Background()
	e, err := NewEmbedded(ctx, Options{Now: clk.Now, Spend: st, FlushEvery: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	b := []Budget{{Scope: ScopeKey, ID: "k", Limit: USD(1), Period: Month}, {Scope: ScopeProject, ID: "p", Limit: USD(5), Period: Total}}
	for range 3 {
		d, _ := e.Admit(ctx, Admission{Tag: "p", Budgets: b, Cost: USD(0.2)})
		e.Settle(ctx, d.Reservation, Actual{Cost: USD(0.1)})
	}
	st.fail = errors.New("disk full")
	if err := e.Flush(ctx); err == nil {
		t.Fatal("flush to a failing store succeeded")
	}
	st.fail = nil
	if err := e.Close(ctx); err != nil {
		t.Fatal(err)
	}
	want := map[BudgetKey]int64{
		{Tag: "p", Scope: ScopeKey, ID: "k", Period: Month, Start: "2025-03-01"}: 300_000,
		{Tag: "p", Scope: ScopeProject, ID: "p", Period: Total}:                  300_000,
	}
	if diff := cmp.Diff(want, st.m); diff != "" {
		t.Fatalf("persisted (-want +got):\n%s", diff)
	}
	e2 := newEmbedded(t, Options{Now: clk.Now, Spend: st})
	if got := e2.Spent(ScopeKey, "k", Month, t0); got != USD(0.3) {
		t.Errorf("after restart key spent %v", got)
	}
	d, _ := e2.Admit(ctx, Admission{Tag: "p", Budgets: b, Cost: USD(0.71)})
	if d.Allowed {
		t.Error("restart forgot the spend: 0.30 + 0.71 > 1.00 admitted")
	}
}

func TestShareAndFallback(t *testing.T) {
	a := Admission{Rates: []Rate{keyRate("k", 100, 5)}, Budgets: []Budget{{Limit: USD(1)}}}
	s := Share(a, 3)
	if s.Rates[0].RPM != 33 || s.Rates[0].TPM != 1 || s.Budgets[0].Limit != 333_333 {
		t.Errorf("share: %+v %+v", s.Rates, s.Budgets)
	}
	if a.Rates[0].RPM != 100 {
		t.Error("Share changed its argument")
	}

	down := &stubAdmitter{err: fmt.Errorf("redis: dial: %w", ErrUnavailable)}
	ctx := context.Background()
	closed := &Fallback{Primary: &stubAdmitter{err: down.err}, Policy: FailClosed}
	if _, err := closed.Admit(ctx, a); !errors.Is(err, ErrUnavailable) {
		t.Errorf("fail closed: err %v", err)
	}
	local := newEmbedded(t, Options{Now: newClock(t0).Now})
	open := &Fallback{Primary: down, Local: local, Policy: FailOpen, Replicas: 4}
	n := 0
	for range 40 {
		d, err := open.Admit(ctx, Admission{Rates: []Rate{keyRate("k", 100, 0)}})
		if err != nil {
			t.Fatal(err)
		}
		if d.Allowed {
			n++
			if err := open.Settle(ctx, d.Reservation, Actual{}); err != nil {
				t.Fatal(err)
			}
		}
	}
	if n != 25 {
		t.Errorf("fail open admitted %d, want this replica's share 25", n)
	}
	if down.calls != 1 || down.settles != 0 {
		t.Errorf("primary called %d times, settled %d: cooldown not honoured", down.calls, down.settles)
	}
}

type stubAdmitter struct {
	err            error
	calls, settles int
}

func (s *stubAdmitter) Admit(context.Context, Admission) (Decision, error) {
	s.calls++
	return Decision{}, s.err
}
func (s *stubAdmitter) Settle(context.Context, Reservation, Actual) error { s.settles++; return nil }

func TestMicros(t *testing.T) {
	for _, c := range []struct {
		m    Micros
		want string
	}{{0, "0.000000"}, {1, "0.000001"}, {USD(1.5), "1.500000"}, {-2_500_000, "-2.500000"}, {-1, "-0.000001"}, {123_456_789, "123.456789"}, {1_000_000_000_000, "1000000.000000"}} {
		if got := c.m.String(); got != c.want {
			t.Errorf("%d: %q, want %q", c.m, got, c.want)
		}
	}
	// Against a plain formatting of the same figure, across the range.
	for _, m := range []Micros{math.MinInt64, math.MinInt64 + 1, -999_999, 9, 10, 99_999, 100_000, 999_999, 1_000_000, 1_000_001, 7_654_321_012, math.MaxInt64} {
		u, sign := uint64(m), ""
		if m < 0 {
			u, sign = -u, "-"
		}
		if got, want := m.String(), fmt.Sprintf("%s%d.%06d", sign, u/1e6, u%1e6); got != want {
			t.Errorf("%d: %q, want %q", int64(m), got, want)
		}
	}
	if USD(0.1)+USD(0.2) != USD(0.3) {
		t.Error("micro-dollars do not add exactly")
	}
}

// TestBudgetLeft: a decision tells what the tightest budget has left
// after the admission, its reservation included; a refusal reserves
// nothing; no budget says so.
func TestBudgetLeft(t *testing.T) {
	e := newEmbedded(t, Options{})
	ctx := context.Background()
	key := Budget{Scope: ScopeKey, ID: "k", Limit: USD(1), Period: Month}
	project := Budget{Scope: ScopeProject, ID: "p", Limit: USD(0.5), Period: Month}
	for i, want := range []struct {
		budgets []Budget
		allowed bool
		left    Micros
	}{
		{[]Budget{key}, true, USD(0.7)},
		{[]Budget{key, project}, true, USD(0.2)}, // the project's 0.5 minus 0.3
		{[]Budget{key, project}, false, USD(0.2)},
		{nil, true, 0},
	} {
		d, err := e.Admit(ctx, Admission{Budgets: want.budgets, Cost: USD(0.3)})
		if err != nil {
			t.Fatal(err)
		}
		if d.Allowed != want.allowed || d.BudgetLeft != want.left || d.Budgeted != (want.budgets != nil) {
			t.Fatalf("admission %d: allowed %v budgeted %v left %v; want %v %v", i, d.Allowed, d.Budgeted, d.BudgetLeft, want.allowed, want.left)
		}
	}
}

// TestSpentMakesNoCounter: reading a budget no request has touched since
// start answers the persisted spend and leaves no counter behind (the
// admin API reads whole pages of idle records); once admissions make the
// counter, reads follow it.
func TestSpentMakesNoCounter(t *testing.T) {
	st := &memSpend{m: map[BudgetKey]int64{{Tag: "p", Scope: ScopeKey, ID: "k", Period: Month, Start: "2025-03-01"}: 400_000}}
	e := newEmbedded(t, Options{Now: newClock(t0).Now, Spend: st, FlushEvery: time.Hour})
	counters := func() int {
		n := 0
		for i := range e.shards {
			e.shards[i].mu.RLock()
			n += len(e.shards[i].m)
			e.shards[i].mu.RUnlock()
		}
		return n
	}
	if got := e.Spent(ScopeKey, "k", Month, t0); got != USD(0.4) {
		t.Fatalf("persisted spend read as %v, want 0.400000", got)
	}
	if got := e.Spent(ScopeCustomer, "idle", Day, t0); got != 0 {
		t.Fatalf("untouched budget read as %v", got)
	}
	if n := counters(); n != 0 {
		t.Fatalf("reads made %d counters", n)
	}
	ctx := context.Background()
	d, _ := e.Admit(ctx, Admission{Tag: "p", Budgets: []Budget{{Scope: ScopeKey, ID: "k", Limit: USD(1), Period: Month}}, Cost: USD(0.2)})
	if !d.Allowed {
		t.Fatalf("%+v", d)
	}
	if got := e.Spent(ScopeKey, "k", Month, t0); got != USD(0.6) {
		t.Fatalf("spent with a reservation in flight %v, want 0.600000", got)
	}
}

// TestCounterListedTwiceReservedOnce: a rate or a budget an admission
// lists twice is one counter, reserved in once.
func TestCounterListedTwiceReservedOnce(t *testing.T) {
	e := newEmbedded(t, Options{})
	ctx := context.Background()
	rate := Rate{Scope: ScopeKey, ID: "k", RPM: 2}
	budget := Budget{Scope: ScopeProject, ID: "p", Limit: 2, Period: Month}
	for _, c := range []struct {
		name string
		a    Admission
	}{
		{"rate", Admission{Rates: []Rate{rate, rate}}},
		{"budget", Admission{Budgets: []Budget{budget, budget}, Cost: 1}},
		// the duplicate dropped mid-list: the budget after it moves up
		{"rate twice, then a budget", Admission{Rates: []Rate{keyRate("k2", 100, 0), keyRate("k2", 100, 0)},
			Budgets: []Budget{{Scope: ScopeProject, ID: "p2", Limit: 2, Period: Month}}, Cost: 1}},
	} {
		for i, want := range []bool{true, true, false} {
			d, err := e.Admit(ctx, c.a)
			if err != nil || d.Allowed != want {
				t.Fatalf("%s, admission %d: allowed %v (%v), want %v", c.name, i+1, d.Allowed, err, want)
			}
		}
	}
}

// TestOpsArrayEmptied: an op array goes back to the pool holding no
// counter and no key, whether the admission fitted in it or outgrew it.
func TestOpsArrayEmptied(t *testing.T) {
	e := newEmbedded(t, Options{})
	for _, n := range []int{1, 3, maxOps, maxOps + 1, 2 * maxOps} {
		a := Admission{Budgets: []Budget{{Scope: ScopeKey, ID: "dup", Limit: 100, Period: Day}, {Scope: ScopeKey, ID: "dup", Limit: 100, Period: Day}}}
		for i := range n {
			a.Rates = append(a.Rates, Rate{Scope: ScopeKey, ID: fmt.Sprint("k", i), RPM: 1000})
		}
		buf := new([maxOps]op)
		ops := e.ops(&a, time.Now(), buf[:])
		if len(ops) != n+1 {
			t.Fatalf("%d rates and a budget listed twice: %d ops, want %d", n, len(ops), n+1)
		}
		e.lockAll(ops)
		for i := range ops {
			ops[i].c.mu.Unlock()
		}
		e.putOps(buf, ops)
		for i := range buf {
			if buf[i] != (op{}) {
				t.Fatalf("%d rates: op %d left as %+v", n, i, buf[i])
			}
		}
	}
}

// TestSettleKeptCounters: settling through the counters an admission
// kept gives what looking them up gives — past the number kept, after
// the sweeper replaced a counter, and never on another admitter's.
func TestSettleKeptCounters(t *testing.T) {
	ctx := context.Background()
	t.Run("more rates than kept", func(t *testing.T) {
		e := newEmbedded(t, Options{Now: newClock(t0).Now})
		var a Admission
		for i := range maxKept + 2 {
			a.Rates = append(a.Rates, keyRate(fmt.Sprint("k", i), 0, 1000))
		}
		a.Tokens = 600
		d, _ := e.Admit(ctx, a)
		e.Settle(ctx, d.Reservation, Actual{Tokens: 100})
		for _, r := range a.Rates {
			if d, _ := e.Admit(ctx, Admission{Rates: []Rate{r}, Tokens: 900}); !d.Allowed || d.Tokens.Remaining != 0 {
				t.Errorf("%s: %+v after settling 600 → 100, want 900 admitted", r.ID, d.Tokens)
			}
		}
	})
	t.Run("token bucket swept and made again", func(t *testing.T) {
		clk := newClock(t0)
		e := newEmbedded(t, Options{Now: clk.Now})
		a := Admission{Rates: []Rate{keyRate("k", 0, 1000)}, Tokens: 600}
		first, _ := e.Admit(ctx, a)
		clk.Advance(2 * Window)
		e.sweep(clk.Now()) // full again: dropped
		if d, _ := e.Admit(ctx, a); !d.Allowed {
			t.Fatalf("second: %+v", d)
		}
		e.Settle(ctx, first.Reservation, Actual{Tokens: 100}) // lands on the new bucket, as a lookup would
		if d, _ := e.Admit(ctx, Admission{Rates: a.Rates, Tokens: 900}); !d.Allowed || d.Tokens.Remaining != 0 {
			t.Errorf("%+v, want 900 admitted (1000 − 600 + 500)", d.Tokens)
		}
	})
	t.Run("budget swept and made again", func(t *testing.T) {
		clk := newClock(t0)
		e := newEmbedded(t, Options{Now: clk.Now})
		a := Admission{Budgets: []Budget{{Scope: ScopeKey, ID: "k", Limit: USD(10), Period: Day}}, Cost: USD(1)}
		first, _ := e.Admit(ctx, a)
		clk.Advance(24 * time.Hour)
		e.sweep(clk.Now()) // the day ended: dropped
		clk.Set(t0)
		if d, _ := e.Admit(ctx, a); !d.Allowed {
			t.Fatalf("second: %+v", d)
		}
		e.Settle(ctx, first.Reservation, Actual{Cost: USD(0.25)})
		if got := e.Spent(ScopeKey, "k", Day, t0); got != USD(0.25) {
			t.Errorf("spent %v, want 0.250000 (the new counter's 1 corrected by −0.75)", got)
		}
	})
	t.Run("another admitter", func(t *testing.T) {
		e1, e2 := newEmbedded(t, Options{Now: newClock(t0).Now}), newEmbedded(t, Options{Now: newClock(t0).Now})
		a := Admission{Rates: []Rate{keyRate("k", 0, 1000)}, Tokens: 600}
		d, _ := e1.Admit(ctx, a)
		e2.Settle(ctx, d.Reservation, Actual{Tokens: 100})
		if d, _ := e1.Admit(ctx, Admission{Rates: a.Rates, Tokens: 401}); d.Allowed {
			t.Errorf("e1's bucket corrected by e2's settle: %+v", d.Tokens)
		}
	})
}

// TestCellKeyOrder: compare is the lexicographic order of (kind, scope,
// ID, period, start), every field deciding when the ones before it tie;
// the locking order of admissions rests on it being a total order.
func TestCellKeyOrder(t *testing.T) {
	var keys []cellKey
	for _, kind := range []cellKind{cellRequests, cellBudget} {
		for _, scope := range []Scope{ScopeKey, ScopeProject} {
			for _, id := range []string{"a", "b"} {
				for _, p := range []Period{Day, Month} {
					for _, start := range []string{"2026-01", "2026-02"} {
						keys = append(keys, cellKey{kind: kind, scope: scope, id: id, period: p, start: start})
					}
				}
			}
		}
	}
	// The loops nest in field order, each over ascending values ("day" <
	// "month", "key" < "project"), so keys is in ascending order.
	for i := range keys {
		for j := range keys {
			if got, want := keys[i].compare(&keys[j]), sign(i-j); got != want {
				t.Fatalf("%+v compared with %+v: %d, want %d", keys[i], keys[j], got, want)
			}
		}
	}
}

func sign(n int) int { return min(max(n, -1), 1) }

// TestHintedCounterSwept: a counter the sweeper removed after an
// owner's hint kept it is not counted in: the admission finds the one
// made in its place, the hint keeps that one from then on, and the
// limit holds exactly across the change.
func TestHintedCounterSwept(t *testing.T) {
	e := newEmbedded(t, Options{Now: newClock(t0).Now})
	ctx := context.Background()
	a := Admission{Rates: []Rate{keyRate("k", 2, 0)}}
	if d, _ := e.Admit(ctx, a); !d.Allowed {
		t.Fatal("first admission refused")
	}
	key := cellKey{kind: cellRequests, scope: ScopeKey, id: "k"}
	old := e.lookup(key, false)
	// What sweep does to a counter, leaving the hint as it is.
	s := &e.shards[maphash.String(e.seed, "k")%nShards]
	s.mu.Lock()
	old.mu.Lock()
	old.dead = true
	delete(s.m, key)
	old.mu.Unlock()
	s.mu.Unlock()
	v := old.v
	for i, want := range []bool{true, true, false} {
		if d, _ := e.Admit(ctx, a); d.Allowed != want {
			t.Fatalf("admission %d after the sweep: allowed %v, want %v", i+1, d.Allowed, want)
		}
	}
	if old.v != v {
		t.Fatalf("the removed counter was counted in: %d, was %d", old.v, v)
	}
	c := e.lookup(key, false)
	if c == nil || c == old {
		t.Fatal("no new counter made in place of the removed one")
	}
	s.mu.RLock()
	h := s.hints["k"]
	s.mu.RUnlock()
	if h == nil || h.n != 1 || h.cells[0] != c {
		t.Fatalf("hint after the sweep: %+v, want the new counter", h)
	}
}

// TestHintAcrossShapes: admissions of one owner that list different
// counters (a per-model rate for each model) each count in their own,
// whatever the owner's hint holds from the others.
func TestHintAcrossShapes(t *testing.T) {
	e := newEmbedded(t, Options{Now: newClock(t0).Now})
	ctx := context.Background()
	model := func(m string) Admission {
		return Admission{Rates: []Rate{keyRate("k", 3, 0), {Scope: ScopeKeyModel, ID: KeyModelID("k", m), RPM: 1}},
			Budgets: []Budget{{Scope: ScopeKey, ID: "k", Limit: 100, Period: Day}}, Cost: 1}
	}
	for i, c := range []struct {
		model string
		want  bool
	}{{"m1", true}, {"m2", true}, {"m1", false}, {"m2", false}, {"m3", true}, {"m4", false}} {
		d, err := e.Admit(ctx, model(c.model))
		if err != nil || d.Allowed != c.want {
			t.Fatalf("admission %d (%s): allowed %v (%v), want %v", i+1, c.model, d.Allowed, err, c.want)
		}
	}
	if got := e.Spent(ScopeKey, "k", Day, t0); got != 3 {
		t.Fatalf("key budget spent %d, want 3 (three admissions)", got)
	}
}

// TestSpendFoundByCounter: spend settled on a kept counter goes to the
// pending entry found by the counter, and every settle lands in the
// store exactly once: across flushes (the entry found last belongs to a
// batch already written), a failed flush (its batch merged back with
// what came meanwhile), and admissions of one counter under two tags.
func TestSpendFoundByCounter(t *testing.T) {
	st := &memSpend{}
	clk := newClock(t0)
	ctx := context.Background()
	e := newEmbedded(t, Options{Now: clk.Now, Spend: st, FlushEvery: time.Hour})
	b := []Budget{{Scope: ScopeProject, ID: "p", Limit: USD(100), Period: Total}}
	settle := func(tag string, usd float64) {
		t.Helper()
		d, err := e.Admit(ctx, Admission{Tag: tag, Budgets: b, Cost: USD(1)})
		if err != nil || !d.Allowed {
			t.Fatalf("admit: %v %+v", err, d)
		}
		if e.held(&d.Reservation, true, 0) == nil {
			t.Fatal("the admission kept no counter: the test needs one")
		}
		if err := e.Settle(ctx, d.Reservation, Actual{Cost: USD(usd)}); err != nil {
			t.Fatal(err)
		}
	}
	settle("a", 0.1)
	settle("a", 0.2)
	settle("b", 0.4) // the same counter, another tag
	settle("a", 0.8)
	if err := e.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	settle("a", 1) // after a flush: a new entry, not the written one
	st.fail = errors.New("disk full")
	// Settled while the failing batch is being written: merged into it
	// after, and the entry it went to is then no longer pending.
	st.during = func() { settle("a", 2) }
	if err := e.Flush(ctx); err == nil {
		t.Fatal("flush to a failing store succeeded")
	}
	st.during = nil
	settle("a", 16)
	settle("b", 4)
	st.fail = nil
	if err := e.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	settle("a", 8) // after the merge: its entries are found afresh
	if err := e.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	want := map[BudgetKey]int64{
		{Tag: "a", Scope: ScopeProject, ID: "p", Period: Total}: 28_100_000,
		{Tag: "b", Scope: ScopeProject, ID: "p", Period: Total}: 4_400_000,
	}
	if diff := cmp.Diff(want, st.m); diff != "" {
		t.Fatalf("persisted (-want +got):\n%s", diff)
	}
}

// TestSettleUnderCancelledContext: Embedded is a ContextFreeSettler, so
// the server hands it a request's context even after the client has
// gone: the settlement must land all the same (tokens and spend).
func TestSettleUnderCancelledContext(t *testing.T) {
	st := &memSpend{}
	clk := newClock(t0)
	e := newEmbedded(t, Options{Now: clk.Now, Spend: st, FlushEvery: time.Hour})
	a := Admission{Tag: "p", Rates: []Rate{keyRate("k", 0, 1000)}, Tokens: 600,
		Budgets: []Budget{{Scope: ScopeKey, ID: "k", Limit: USD(1), Period: Total}}, Cost: USD(0.5)}
	d, _ := e.Admit(context.Background(), a)
	if !d.Allowed {
		t.Fatalf("refused: %+v", d)
	}
	ctx, cancel := context.WithCancelCause(context.Background())
	cancel(errors.New("client went away"))
	if err := e.Settle(ctx, d.Reservation, Actual{Tokens: 100, Cost: USD(0.1)}); err != nil {
		t.Fatal(err)
	}
	if got := e.Spent(ScopeKey, "k", Total, t0); got != USD(0.1) {
		t.Errorf("spent %v after settling 0.1 under a cancelled context", got)
	}
	if d2, _ := e.Admit(context.Background(), Admission{Rates: a.Rates, Tokens: 900}); !d2.Allowed {
		t.Errorf("900 tokens refused with 900 left after settling 600 → 100: %+v", d2.Tokens)
	}
	if err := e.Flush(context.Background()); err != nil {
		t.Fatal(err)
	}
	if got := st.m[BudgetKey{Tag: "p", Scope: ScopeKey, ID: "k", Period: Total}]; got != 100_000 {
		t.Errorf("persisted %d micros, want 100000", got)
	}
}

// TestAdmitInto: AdmitInto writes the whole Decision over whatever the
// caller's held (a refusal with a budget's remainder, here), the same
// Decision Admit returns for the same state of the counters, and its
// reservation settles as Admit's does.
func TestAdmitInto(t *testing.T) {
	now := t0
	clock := func() time.Time { return now }
	into, plain := newEmbedded(t, Options{Now: clock}), newEmbedded(t, Options{Now: clock})
	ctx := context.Background()
	budget := Budget{Scope: ScopeKey, ID: "k", Limit: USD(1), Period: Total}
	// What a Decision held before: a valid reservation (another key's)
	// and quotas of another admission.
	earlier, err := newEmbedded(t, Options{Now: clock}).Admit(ctx, Admission{Tag: "q", Rates: []Rate{keyRate("other", 5, 50)}, Tokens: 5})
	if err != nil || !earlier.Reservation.Valid() {
		t.Fatalf("earlier admission: %v %+v", err, earlier)
	}
	for i, a := range []Admission{
		{Tag: "p", Rates: []Rate{keyRate("k", 2, 1000)}, Tokens: 400},
		{Tag: "p", Rates: []Rate{keyRate("k", 2, 1000)}, Budgets: []Budget{budget}, Tokens: 400, Cost: USD(0.4)},
		{Tag: "p", Rates: []Rate{keyRate("k", 2, 1000)}, Tokens: 400}, // over the rpm: refused
		{Tag: "p", Budgets: []Budget{budget}, Cost: USD(0.7)},         // over the budget: refused
	} {
		stale := Decision{Refused: Refusal{Scope: ScopeCustomer, ID: "c", Kind: KindBudget, TooLarge: true},
			RetryAfter: time.Hour, Requests: Quota{Limit: 9, Remaining: 9}, Tokens: Quota{Limit: 7, Remaining: 3, Reset: time.Second},
			Budgeted: true, BudgetLeft: 5, Reservation: earlier.Reservation}
		d := stale
		if err := into.AdmitInto(ctx, &a, &d); err != nil {
			t.Fatal(err)
		}
		want, err := plain.Admit(ctx, a)
		if err != nil {
			t.Fatal(err)
		}
		if d.Reservation.Valid() != want.Reservation.Valid() || !reflect.DeepEqual(d.Reservation.Admission, want.Reservation.Admission) {
			t.Fatalf("admission %d: reservation %+v, Admit's %+v", i, d.Reservation, want.Reservation)
		}
		d.Reservation, want.Reservation = Reservation{}, Reservation{}
		if !reflect.DeepEqual(d, want) {
			t.Fatalf("admission %d: AdmitInto wrote %+v, Admit returned %+v", i, d, want)
		}
	}
}

// TestSettleReadsClockOnlyForOverrun: settling reads the clock only
// when the call used more tokens than were reserved (the bucket then
// refills from now); a call that used fewer, or as many, is settled
// without it, and the bucket is corrected all the same.
func TestSettleReadsClockOnlyForOverrun(t *testing.T) {
	clk := newClock(t0)
	var reads atomic.Int64
	now := func() time.Time { reads.Add(1); return clk.Now() }
	e := newEmbedded(t, Options{Now: now, SweepEvery: time.Hour})
	ctx := context.Background()
	a := Admission{Rates: []Rate{keyRate("k", 0, 6000)}, Budgets: []Budget{{Scope: ScopeKey, ID: "k", Limit: USD(1), Period: Day}}, Tokens: 1000, Cost: 5}
	settle := func(used int64) (clockReads int64) {
		t.Helper()
		d, err := e.Admit(ctx, a)
		if err != nil || !d.Allowed {
			t.Fatalf("admit: %v %+v", err, d)
		}
		before := reads.Load()
		if err := e.Settle(ctx, d.Reservation, Actual{Tokens: used, Cost: 3}); err != nil {
			t.Fatal(err)
		}
		return reads.Load() - before
	}
	if n := settle(400); n != 0 {
		t.Errorf("settling fewer tokens than reserved read the clock %d times, want 0", n)
	}
	if n := settle(1000); n != 0 {
		t.Errorf("settling the tokens reserved read the clock %d times, want 0", n)
	}
	clk.Advance(30 * time.Second) // the bucket is full again: an overrun counts from now
	if n := settle(1600); n != 1 {
		t.Errorf("settling more tokens than reserved read the clock %d times, want 1", n)
	}
	// 1,600 used of 6,000 a minute, counted from now: 4,400 left.
	d, _ := e.Admit(ctx, Admission{Rates: a.Rates, Tokens: 0})
	if d.Tokens.Remaining != 4400 {
		t.Errorf("after an overrun settled from now: %d tokens left, want 4400", d.Tokens.Remaining)
	}
	if got := e.Spent(ScopeKey, "k", Day, clk.Now()); got != 9 {
		t.Errorf("spent %d micros, want 9 (three settles of 3)", got)
	}
}

// TestBindingQuotas: the Requests and Tokens of an admitted Decision are
// its binding buckets — of all its rates' buckets, the one with the
// least left, then the lowest limit, then the first in the counters'
// order — as the same admissions find each bucket alone, in a random
// run of admissions of some of a key's rates each (so that buckets of
// one limit are in different states), settles and time going by.
func TestBindingQuotas(t *testing.T) {
	ctx := context.Background()
	rng := rand.New(rand.NewPCG(3, 5))
	ties := 0 // checks where two buckets had as much left
	for run := range 60 {
		clk := newClock(t0)
		e := newEmbedded(t, Options{Now: clk.Now})
		var rates []Rate
		for i := range 2 + rng.IntN(3) {
			scope := []Scope{ScopeKey, ScopeProject, ScopeKeyModel}[rng.IntN(3)]
			rates = append(rates, Rate{Scope: scope, ID: fmt.Sprint("id", i), RPM: 3 + int64(rng.IntN(2))*3, TPM: 500 + int64(rng.IntN(2))*500})
		}
		// Each rate alone.
		alone := make([]*Embedded, len(rates))
		for i := range alone {
			alone[i] = newEmbedded(t, Options{Now: clk.Now})
		}
		for step := range 40 {
			var some []Rate
			var which []int
			for i, r := range rates {
				if rng.IntN(3) > 0 {
					some, which = append(some, r), append(which, i)
				}
			}
			a := Admission{Rates: some, Tokens: int64(rng.IntN(200))}
			d, _ := e.Admit(ctx, a)
			if !d.Allowed {
				clk.Advance(time.Duration(rng.IntN(20)) * time.Second)
				continue
			}
			used := Actual{Tokens: a.Tokens / int64(1+rng.IntN(2))}
			e.Settle(ctx, d.Reservation, used)
			// Each alone, in the counters' order (kind, scope, ID).
			slices.SortFunc(which, func(i, j int) int {
				if c := strings.Compare(string(rates[i].Scope), string(rates[j].Scope)); c != 0 {
					return c
				}
				return strings.Compare(rates[i].ID, rates[j].ID)
			})
			var wantReq, wantTok Quota
			var left []int64
			for _, i := range which {
				da, _ := alone[i].Admit(ctx, Admission{Rates: rates[i : i+1], Tokens: a.Tokens})
				if !da.Allowed {
					t.Fatalf("run %d step %d: rate %+v alone refused what all admitted", run, step, rates[i])
				}
				alone[i].Settle(ctx, da.Reservation, used)
				wantReq, wantTok = binding(wantReq, da.Requests), binding(wantTok, da.Tokens)
				left = append(left, da.Requests.Remaining)
			}
			slices.Sort(left)
			if len(left) != len(slices.Compact(left)) {
				ties++
			}
			if d.Requests != wantReq || d.Tokens != wantTok {
				t.Fatalf("run %d step %d, rates %+v: quotas %+v %+v, want %+v %+v", run, step, some, d.Requests, d.Tokens, wantReq, wantTok)
			}
			clk.Advance(time.Duration(rng.IntN(3)) * time.Second)
		}
	}
	if ties < 50 {
		t.Errorf("only %d admissions had request buckets with as much left: the run tests little", ties)
	}
}

// binding is the bucket that binds more of cur (none when its Limit is
// 0) and q, cur among equals.
func binding(cur, q Quota) Quota {
	switch {
	case q.Limit == 0:
		return cur
	case cur.Limit == 0, q.Remaining < cur.Remaining, q.Remaining == cur.Remaining && q.Limit < cur.Limit:
		return q
	}
	return cur
}
