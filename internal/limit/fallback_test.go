package limit

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// flakyPrimary is a Primary that can be taken down and brought back, and
// takes carried spend (a SpendAdder).
type flakyPrimary struct {
	mu      sync.Mutex
	down    bool
	calls   int // calls of Admit and AddSpend, answered or not
	admits  int
	added   map[BudgetKey]int64
	adds    int
	settled []Actual
}

func (p *flakyPrimary) setDown(down bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.down = down
}

func (p *flakyPrimary) Admit(context.Context, Admission) (Decision, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.calls++
	if p.down {
		return Decision{}, fmt.Errorf("redis: dial: %w", ErrUnavailable)
	}
	p.admits++
	return Decision{Allowed: true, Reservation: NewReservation("r", Admission{}, time.Now())}, nil
}

func (p *flakyPrimary) Settle(_ context.Context, r Reservation, actual Actual) error {
	if r.Claim() {
		p.mu.Lock()
		p.settled = append(p.settled, actual)
		p.mu.Unlock()
	}
	return nil
}

func (p *flakyPrimary) settledCount() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.settled)
}

func (p *flakyPrimary) AddSpend(ctx context.Context, k BudgetKey, delta int64) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if err := ctx.Err(); err != nil {
		return err
	}
	p.calls++
	if p.down {
		return fmt.Errorf("redis: dial: %w", ErrUnavailable)
	}
	if p.added == nil {
		p.added = map[BudgetKey]int64{}
	}
	p.added[k] += delta
	p.adds++
	return nil
}

func (p *flakyPrimary) addedSpend() map[BudgetKey]int64 {
	p.mu.Lock()
	defer p.mu.Unlock()
	out := map[BudgetKey]int64{}
	for k, v := range p.added {
		out[k] = v
	}
	return out
}

func carried(f *Fallback) map[BudgetKey]int64 {
	c, _ := f.Owed()
	return c
}

// TestFallbackCarriesLocalSpend: what the local limiter settles while the
// primary is down is added to the primary's counters once it answers
// again, before the next admission there, once, and for every budget of
// the request; while it stays down the carry is kept.
func TestFallbackCarriesLocalSpend(t *testing.T) {
	ctx := context.Background()
	p := &flakyPrimary{down: true}
	// The clock is moved by hand and the Cooldown is an hour, so the
	// background retry (on a real timer) stays out of the way.
	clk := newClock(time.Now())
	f := &Fallback{Primary: p, Local: newEmbedded(t, Options{}), Policy: FailOpen, Replicas: 2, Cooldown: time.Hour, Now: clk.Now}
	budgets := []Budget{
		{Scope: ScopeKey, ID: "k", Limit: USD(1), Period: Month},
		{Scope: ScopeProject, ID: "p", Limit: USD(10), Period: Total},
	}
	a := Admission{Tag: "p", Budgets: budgets, Cost: USD(0.2)}
	var admitted []Reservation
	for range 4 {
		d, err := f.Admit(ctx, a)
		if err != nil {
			t.Fatal(err)
		}
		if d.Allowed {
			admitted = append(admitted, d.Reservation)
		}
	}
	// This replica's share of the key's $1 is $0.50: two worst cases.
	if len(admitted) != 2 {
		t.Fatalf("admitted %d locally, want the share's 2", len(admitted))
	}
	for _, r := range admitted {
		if err := f.Settle(ctx, r, Actual{Cost: USD(0.15)}); err != nil {
			t.Fatal(err)
		}
		if err := f.Settle(ctx, r, Actual{Cost: USD(0.15)}); err != nil { // a second settle of the same reservation
			t.Fatal(err)
		}
	}
	start, _ := Month.Span(time.Now())
	want := map[BudgetKey]int64{
		{Tag: "p", Scope: ScopeKey, ID: "k", Period: Month, Start: start}: int64(USD(0.3)),
		{Tag: "p", Scope: ScopeProject, ID: "p", Period: Total}:           int64(USD(0.3)),
	}
	if diff := cmp.Diff(want, carried(f)); diff != "" {
		t.Fatalf("carried (-want +got):\n%s", diff)
	}

	// Still down after the cooldown: the flush fails, the carry stays,
	// the request is served locally.
	clk.Advance(2 * time.Hour)
	if d, err := f.Admit(ctx, Admission{Tag: "p"}); err != nil || !d.Reservation.local {
		t.Fatalf("primary still down: %+v, %v; want a local admission", d, err)
	}
	if diff := cmp.Diff(want, carried(f)); diff != "" {
		t.Fatalf("carry after a failed flush (-want +got):\n%s", diff)
	}

	// Back: the next admission carries the spend over first.
	p.setDown(false)
	clk.Advance(2 * time.Hour)
	if d, err := f.Admit(ctx, Admission{Tag: "p"}); err != nil || d.Reservation.local {
		t.Fatalf("primary back: %+v, %v; want the primary's admission", d, err)
	}
	if diff := cmp.Diff(want, p.addedSpend()); diff != "" {
		t.Fatalf("added to the primary (-want +got):\n%s", diff)
	}
	if len(carried(f)) != 0 {
		t.Fatalf("still carried after the flush: %v", carried(f))
	}
	if err := f.Close(ctx); err != nil || p.adds != 2 {
		t.Fatalf("Close with nothing carried: %v, %d adds; want the 2 of the flush only", err, p.adds)
	}
}

// TestFallbackCarryOnSettleAndClose: a local reservation settled after
// the primary is back is carried by the background retry, with no
// admission to trigger it; one settled while it is down is carried by
// Close. A carry that fails because its caller gave up keeps the spend
// and does not count as an outage.
func TestFallbackCarryOnSettleAndClose(t *testing.T) {
	ctx := context.Background()
	p := &flakyPrimary{down: true}
	f := &Fallback{Primary: p, Local: newEmbedded(t, Options{}), Policy: FailOpen, Cooldown: 20 * time.Millisecond}
	a := Admission{Tag: "p", Budgets: []Budget{{Scope: ScopeKey, ID: "k", Limit: USD(1), Period: Total}}, Cost: USD(0.1)}
	d1, _ := f.Admit(ctx, a)
	d2, _ := f.Admit(ctx, a)
	if !d1.Allowed || !d2.Allowed {
		t.Fatal("local admissions refused")
	}
	p.setDown(false)
	k := BudgetKey{Tag: "p", Scope: ScopeKey, ID: "k", Period: Total}
	if err := f.Settle(ctx, d1.Reservation, Actual{Cost: USD(0.05)}); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(2 * time.Second)
	for p.addedSpend()[k] != int64(USD(0.05)) {
		if time.Now().After(deadline) {
			t.Fatalf("settled after the primary came back: added %d after 2s, want the background retry to carry it", p.addedSpend()[k])
		}
		time.Sleep(5 * time.Millisecond)
	}

	canceled, cancel := context.WithCancel(ctx)
	cancel()
	f.downUntil.Store(time.Now().Add(time.Hour).UnixNano()) // degraded: nothing is carried in the background
	if err := f.Settle(ctx, d2.Reservation, Actual{Cost: USD(0.07)}); err != nil {
		t.Fatal(err)
	}
	if _, err := f.flushCarry(canceled); err == nil || errors.Is(err, ErrUnavailable) {
		t.Fatalf("carry with a canceled context: %v", err)
	}
	if f.downUntil.Load() < time.Now().Add(30*time.Minute).UnixNano() {
		t.Error("a canceled carry changed the outage")
	}
	if err := f.Close(ctx); err != nil {
		t.Fatal(err)
	}
	if got := p.addedSpend()[k]; got != int64(USD(0.12)) {
		t.Fatalf("after Close: added %d, want %d", got, USD(0.12))
	}
	if f.owed.retrying {
		t.Error("the background retry runs after Close")
	}
	if err := f.Close(ctx); err != nil {
		t.Fatalf("a second Close: %v", err)
	}
}

// TestFallbackHoldsPrimarySettles: a settlement of the primary's
// reservation that comes while the primary is down is held, not handed
// to a primary that would drop it, and handed over once an admission
// finds the primary back.
func TestFallbackHoldsPrimarySettles(t *testing.T) {
	ctx := context.Background()
	p := &flakyPrimary{}
	f := &Fallback{Primary: p, Policy: FailClosed, Cooldown: time.Hour}
	t.Cleanup(func() { f.Close(ctx) })
	d, err := f.Admit(ctx, Admission{Tag: "p"})
	if err != nil || !d.Allowed {
		t.Fatalf("primary up: %+v, %v", d, err)
	}
	p.setDown(true)
	if _, err := f.Admit(ctx, Admission{Tag: "p"}); !errors.Is(err, ErrUnavailable) {
		t.Fatalf("primary down, failing closed: %v", err)
	}
	if err := f.Settle(ctx, d.Reservation, Actual{Cost: 42}); err != nil {
		t.Fatal(err)
	}
	if _, held := f.Owed(); held != 1 || p.settledCount() != 0 {
		t.Fatalf("%d held, %d handed to the primary; want the settlement held", held, p.settledCount())
	}
	p.setDown(false)
	if _, err := f.Admit(ctx, Admission{Tag: "p"}); err != nil {
		t.Fatal(err)
	}
	if _, held := f.Owed(); held != 0 || p.settledCount() != 1 || p.settled[0].Cost != 42 {
		t.Fatalf("after the primary is back: %d held, settled %v; want the held settlement handed over", held, p.settled)
	}
}

// gatedPrimary is a down Primary whose calls wait at a gate, so a test
// can hold one call in flight and see what the others do meanwhile. A
// call that comes while another waits is counted as an overlap and fails
// at once (waiting would hang the test rather than fail it).
type gatedPrimary struct {
	entered  chan struct{} // one send per call that waits, on arrival
	gate     chan struct{} // closed to let the calls return
	mu       sync.Mutex
	calls    int
	inflight int
	overlaps int
}

func (p *gatedPrimary) Admit(context.Context, Admission) (Decision, error) {
	p.mu.Lock()
	p.calls++
	if p.inflight > 0 {
		p.overlaps++
		p.mu.Unlock()
		return Decision{}, fmt.Errorf("redis: silent: %w", ErrUnavailable)
	}
	p.inflight++
	gate := p.gate
	p.mu.Unlock()
	p.entered <- struct{}{}
	<-gate
	p.mu.Lock()
	p.inflight--
	p.mu.Unlock()
	return Decision{}, fmt.Errorf("redis: silent: %w", ErrUnavailable)
}

// open lets the calls waiting now return, and sets a new one.
func (p *gatedPrimary) open() {
	p.mu.Lock()
	defer p.mu.Unlock()
	close(p.gate)
	p.gate = make(chan struct{})
}

func (p *gatedPrimary) Settle(context.Context, Reservation, Actual) error { return nil }

// TestFallbackClosedProbes: failing closed, the outage ends with the
// first admission the primary answers, not a Cooldown later (an hour
// here), and while it is degraded one admission at a time asks the
// primary: the others are refused without calling it.
func TestFallbackClosedProbes(t *testing.T) {
	ctx := context.Background()
	p := &flakyPrimary{}
	var reports int
	f := &Fallback{Primary: p, Policy: FailClosed, Cooldown: time.Hour, OnDegraded: func(error) { reports++ }}
	t.Cleanup(func() { f.Close(ctx) })
	p.setDown(true)
	for i := range 3 {
		if _, err := f.Admit(ctx, Admission{Tag: "p"}); !errors.Is(err, ErrUnavailable) {
			t.Fatalf("admission %d, primary down: %v", i, err)
		}
	}
	if reports != 1 {
		t.Errorf("outage reported %d times, want once (probes that fail are not news)", reports)
	}
	p.setDown(false)
	if d, err := f.Admit(ctx, Admission{Tag: "p"}); err != nil || !d.Allowed {
		t.Fatalf("first admission with the primary back: %+v, %v; want it admitted", d, err)
	}
	if f.Degraded() {
		t.Error("still degraded after the primary answered")
	}

	g := &gatedPrimary{entered: make(chan struct{}, 1), gate: make(chan struct{})}
	f2 := &Fallback{Primary: g, Policy: FailClosed, Cooldown: time.Hour}
	t.Cleanup(func() { f2.Close(ctx) })
	close(g.gate) // the first failure degrades at once
	if _, err := f2.Admit(ctx, Admission{}); !errors.Is(err, ErrUnavailable) {
		t.Fatal(err)
	}
	<-g.entered
	g.gate = make(chan struct{})
	probed := make(chan error)
	go func() {
		_, err := f2.Admit(ctx, Admission{})
		probed <- err
	}()
	<-g.entered // the probe waits on the primary
	for i := range 50 {
		if _, err := f2.Admit(ctx, Admission{}); !errors.Is(err, ErrUnavailable) {
			t.Fatalf("admission %d during the probe: %v", i, err)
		}
	}
	close(g.gate)
	if err := <-probed; !errors.Is(err, ErrUnavailable) {
		t.Fatalf("probe: %v", err)
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.calls != 2 || g.overlaps != 0 {
		t.Errorf("primary called %d times, %d of them during another call; want 2 (the failure, then one probe while 50 others were refused), none overlapping", g.calls, g.overlaps)
	}
}

// TestFallbackOpenProbes: failing open, the outage ends with the first
// probe the primary answers, an eighth of the Cooldown after the failure
// rather than a whole Cooldown; that probe first carries the spend
// settled locally and then hands over the held settlements. While the
// primary stays dead, a probe that fails falls back to the local limiter,
// is not reported again, and the next probe comes a Cooldown later: until
// then no admission waits on the primary.
func TestFallbackOpenProbes(t *testing.T) {
	ctx := context.Background()
	clk := newClock(time.Now())
	p := &flakyPrimary{}
	var reports int
	const cooldown = time.Minute
	f := &Fallback{Primary: p, Local: newEmbedded(t, Options{}), Policy: FailOpen, Cooldown: cooldown, Now: clk.Now, OnDegraded: func(error) { reports++ }}
	t.Cleanup(func() { f.Close(ctx) })
	before, err := f.Admit(ctx, Admission{Tag: "p"})
	if err != nil || before.Reservation.local {
		t.Fatalf("primary up: %+v, %v", before, err)
	}
	p.setDown(true)
	a := Admission{Tag: "p", Budgets: []Budget{{Scope: ScopeKey, ID: "k", Limit: USD(100), Period: Total}}, Cost: USD(0.1)}
	local := func(what string) Decision {
		t.Helper()
		d, err := f.Admit(ctx, a)
		if err != nil || !d.Allowed || !d.Reservation.local {
			t.Fatalf("%s: %+v, %v; want a local admission", what, d, err)
		}
		return d
	}
	calls := func() int {
		p.mu.Lock()
		defer p.mu.Unlock()
		return p.calls
	}
	d := local("the failure")
	if err := f.Settle(ctx, d.Reservation, Actual{Cost: USD(0.05)}); err != nil {
		t.Fatal(err)
	}
	if err := f.Settle(ctx, before.Reservation, Actual{Cost: 7}); err != nil {
		t.Fatal(err)
	}
	for range 5 {
		local("before the first probe is due")
	}
	if got := calls(); got != 2 {
		t.Fatalf("primary asked %d times, want 2 (one admission up, the failure): no probe before an eighth of the Cooldown", got)
	}

	clk.Advance(cooldown / 8)
	local("the first probe, primary dead")
	for range 5 {
		local("after a failed probe")
	}
	clk.Advance(cooldown - time.Nanosecond)
	local("a Cooldown after the failed probe, less a nanosecond")
	if got := calls(); got != 3 {
		t.Fatalf("primary asked %d times, want 3: one probe (its carry failing) in the Cooldown after the first", got)
	}
	if !f.Degraded() || reports != 1 {
		t.Fatalf("degraded %v, outage reported %d times; want still degraded, reported once", f.Degraded(), reports)
	}

	p.setDown(false)
	clk.Advance(time.Nanosecond)
	d, err = f.Admit(ctx, a)
	if err != nil || !d.Allowed || d.Reservation.local {
		t.Fatalf("the probe due with the primary back: %+v, %v; want the primary's admission", d, err)
	}
	if f.Degraded() {
		t.Error("still degraded after the primary answered")
	}
	k := BudgetKey{Tag: "p", Scope: ScopeKey, ID: "k", Period: Total}
	if got := p.addedSpend()[k]; got != int64(USD(0.05)) {
		t.Errorf("carried into the primary %d, want the %d settled locally", got, USD(0.05))
	}
	if _, held := f.Owed(); held != 0 || p.settledCount() != 1 {
		t.Errorf("%d settlements still held, %d handed over; want the one held handed over", held, p.settledCount())
	}
	for i := range 3 {
		if d, err := f.Admit(ctx, a); err != nil || d.Reservation.local {
			t.Fatalf("admission %d after the outage: %+v, %v; want the primary's", i, d, err)
		}
	}
	if got := calls(); got != 8 {
		t.Errorf("primary asked %d times, want 8 (the probe's carry and admission, and the 3 after it)", got)
	}
	if reports != 1 {
		t.Errorf("outage reported %d times, want once", reports)
	}
}

// TestFallbackOpenProbesOneAtATime: failing open, while a probe waits on
// a dead primary the other admissions are served locally without asking
// it, and a probe that fails is served locally too.
func TestFallbackOpenProbesOneAtATime(t *testing.T) {
	ctx := context.Background()
	clk := newClock(time.Now())
	g := &gatedPrimary{entered: make(chan struct{}, 1), gate: make(chan struct{})}
	f := &Fallback{Primary: g, Local: newEmbedded(t, Options{}), Policy: FailOpen, Cooldown: time.Hour, Now: clk.Now}
	t.Cleanup(func() { f.Close(ctx) })
	failed := make(chan Decision)
	admit := func() {
		d, err := f.Admit(ctx, Admission{})
		if err != nil {
			t.Error(err)
		}
		failed <- d
	}
	go admit()
	<-g.entered
	g.open()
	if d := <-failed; !d.Allowed || !d.Reservation.local {
		t.Fatalf("the failure: %+v, want a local admission", d)
	}
	clk.Advance(time.Hour / 8)
	go admit()
	<-g.entered // the probe waits on the primary
	for i := range 50 {
		d, err := f.Admit(ctx, Admission{})
		if err != nil || !d.Allowed || !d.Reservation.local {
			t.Fatalf("admission %d during the probe: %+v, %v; want a local admission", i, d, err)
		}
	}
	g.open()
	if d := <-failed; !d.Allowed || !d.Reservation.local {
		t.Fatalf("the failed probe: %+v, want a local admission", d)
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.calls != 2 || g.overlaps != 0 {
		t.Errorf("primary called %d times, %d of them during another call; want 2 (the failure, one probe while 50 others were served locally), none overlapping", g.calls, g.overlaps)
	}
}
