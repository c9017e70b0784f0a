package limit

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// counterStore is a LeaseStore on plain counters of units used: the
// exchange semantics of the Redis script with time standing still (no
// refill), so every unit is accounted for.
type counterStore struct {
	mu       sync.Mutex
	used     map[LeaseCounter]int64
	recorded map[BudgetKey]int64
	ran      map[string]bool
	down     atomic.Bool
	calls    atomic.Int64 // Lease calls that reached the store
	admits   atomic.Int64 // Admit calls
}

func newCounterStore() *counterStore {
	return &counterStore{used: map[LeaseCounter]int64{}, recorded: map[BudgetKey]int64{}, ran: map[string]bool{}}
}

func (s *counterStore) Lease(_ context.Context, tag, id string, ops []LeaseOp) (LeaseReply, error) {
	if s.down.Load() {
		return LeaseReply{}, ErrUnavailable
	}
	s.calls.Add(1)
	s.mu.Lock()
	defer s.mu.Unlock()
	rep := LeaseReply{Granted: make([]int64, len(ops)), Free: make([]int64, len(ops))}
	if s.ran[tag+id] {
		return rep, nil
	}
	s.ran[tag+id] = true
	seen := map[LeaseCounter]bool{}
	for _, op := range ops {
		c := op.Counter
		c.End = time.Time{}
		if seen[c] {
			panic("counter listed twice in one exchange: " + c.ID)
		}
		seen[c] = true
		s.used[c] = max(s.used[c]-op.Back, 0)
	}
	for i, op := range ops {
		c := op.Counter
		c.End = time.Time{}
		if op.Need > 0 && op.Limit-s.used[c] < op.Need {
			rep.Refused = i + 1
			break
		}
	}
	for i, op := range ops {
		c := op.Counter
		c.End = time.Time{}
		free := max(op.Limit-s.used[c], 0)
		if rep.Refused == 0 && op.Want > 0 {
			rep.Granted[i] = min(op.Want, max(op.Need, free/2), free)
		}
		s.used[c] += rep.Granted[i]
		rep.Free[i] = free - rep.Granted[i]
	}
	return rep, nil
}

// Admit reserves in the counters directly, as the Redis script does.
func (s *counterStore) Admit(_ context.Context, a Admission) (Decision, error) {
	if s.down.Load() {
		return Decision{}, ErrUnavailable
	}
	s.admits.Add(1)
	s.mu.Lock()
	defer s.mu.Unlock()
	ns, ok := needs(&a, time.Unix(0, 0), nil)
	if !ok {
		return Decision{Refused: Refusal{Kind: KindTokens, TooLarge: true}}, nil
	}
	for _, n := range ns {
		c := LeaseCounter{Kind: n.key.kind, Scope: n.key.scope, ID: n.key.id, Period: n.key.period, Start: n.key.start}
		if s.used[c]+n.cost > n.limit {
			return Decision{Refused: Refusal{Scope: n.key.scope, ID: n.key.id, Kind: n.key.kind}}, nil
		}
	}
	for _, n := range ns {
		s.used[LeaseCounter{Kind: n.key.kind, Scope: n.key.scope, ID: n.key.id, Period: n.key.period, Start: n.key.start}] += n.cost
	}
	return Decision{Allowed: true, Reservation: NewReservation("store", a, time.Unix(0, 0))}, nil
}

func (s *counterStore) Settle(_ context.Context, r Reservation, actual Actual) error {
	if !r.Claim() {
		return nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	a := r.Admission
	ns, _ := needs(&a, time.Unix(0, 0), nil)
	for _, n := range ns {
		c := LeaseCounter{Kind: n.key.kind, Scope: n.key.scope, ID: n.key.id, Period: n.key.period, Start: n.key.start}
		switch n.key.kind {
		case KindTokens:
			s.used[c] += actual.Tokens - a.Tokens
		case KindBudget:
			s.used[c] += int64(actual.Cost - a.Cost)
			s.recorded[BudgetKey{Tag: a.Tag, Scope: n.key.scope, ID: n.key.id, Period: n.key.period, Start: n.key.start}] += int64(actual.Cost)
		}
	}
	return nil
}

func (s *counterStore) RecordSpend(k BudgetKey, micros int64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.recorded[k] += micros
}

func (s *counterStore) get(c LeaseCounter) int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.used[c]
}

var (
	leaseRPM    = LeaseCounter{Kind: KindRequests, Scope: ScopeKey, ID: "key_1"}
	leaseTPM    = LeaseCounter{Kind: KindTokens, Scope: ScopeKey, ID: "key_1"}
	leaseBudget = LeaseCounter{Kind: KindBudget, Scope: ScopeProject, ID: "proj_1", Period: Total}
)

func leaseAdmission(rpm, tpm int64, budget Micros) Admission {
	return Admission{Tag: "proj_1",
		Rates:   []Rate{{Scope: ScopeKey, ID: "key_1", RPM: rpm, TPM: tpm}},
		Budgets: []Budget{{Scope: ScopeProject, ID: "proj_1", Limit: budget, Period: Total}},
		Tokens:  100, Cost: 1000}
}

// inline runs background refills at once, so the test does not depend on
// when a goroutine is scheduled.
func inline(f func()) { f() }

func newTestLeaser(t *testing.T, s LeaseStore, o LeaseOptions) *Leaser {
	t.Helper()
	if o.Every == 0 {
		o.Every = -1
	}
	if o.Go == nil {
		o.Go = inline
	}
	l := NewLeaser(s, o)
	t.Cleanup(func() { l.Close(context.Background()) })
	return l
}

// After any mix of admissions and settles (actuals below, at and above
// the estimate) and Close, the store holds exactly what was used, and
// only the first admission waited for the store.
func TestLeaserAccountsExactly(t *testing.T) {
	ctx := context.Background()
	s := newCounterStore()
	l := newTestLeaser(t, s, LeaseOptions{Fraction: 0.1})
	a := leaseAdmission(1000, 1_000_000, USD(100))
	var tokens, cost int64
	for i := range 300 {
		d, err := l.Admit(ctx, a)
		if err != nil || !d.Allowed {
			t.Fatalf("admission %d: %+v, %v", i, d, err)
		}
		actual := Actual{Tokens: int64(i % 150), Cost: Micros(i % 1500)} // some above the estimate
		tokens += actual.Tokens
		cost += int64(actual.Cost)
		if err := l.Settle(ctx, d.Reservation, actual); err != nil {
			t.Fatal(err)
		}
		if err := l.Settle(ctx, d.Reservation, actual); err != nil { // once only
			t.Fatal(err)
		}
		avail, _ := l.Held("proj_1")
		for c, v := range avail {
			if size := l.size(limitOf(a, c)); v > size {
				t.Fatalf("admission %d: holds %d of %s, more than a lease (%d)", i, v, c.Kind, size)
			}
		}
	}
	if st := l.Stats(); st.Waited != 1 || st.Ready != 299 {
		t.Errorf("stats %+v: want 1 admission waiting (the first), 299 served from leases", st)
	}
	if err := l.Close(ctx); err != nil {
		t.Fatal(err)
	}
	got := map[string]int64{"requests": s.get(leaseRPM), "tokens": s.get(leaseTPM), "budget": s.get(leaseBudget)}
	want := map[string]int64{"requests": 300, "tokens": tokens, "budget": cost}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("store counters after Close (-want +got):\n%s", diff)
	}
	rec := s.recorded[BudgetKey{Tag: "proj_1", Scope: ScopeProject, ID: "proj_1", Period: Total}]
	if rec != cost {
		t.Errorf("durable record %d, want the sum of actual costs %d", rec, cost)
	}
}

func limitOf(a Admission, c LeaseCounter) int64 {
	switch c.Kind {
	case KindRequests:
		return a.Rates[0].RPM
	case KindTokens:
		return a.Rates[0].TPM
	}
	return int64(a.Budgets[0].Limit)
}

// A lease unused for Idle goes back to the store; one in use stays.
func TestLeaserReturnsIdleLeases(t *testing.T) {
	ctx := context.Background()
	s := newCounterStore()
	now := time.Unix(1_700_000_000, 0)
	clock := func() time.Time { return now }
	l := newTestLeaser(t, s, LeaseOptions{Fraction: 0.1, Idle: time.Minute, Now: clock})
	a := leaseAdmission(1000, 1_000_000, USD(100))
	d, err := l.Admit(ctx, a)
	if err != nil || !d.Allowed {
		t.Fatal(d, err)
	}
	if err := l.Settle(ctx, d.Reservation, Actual{Tokens: 40, Cost: 700}); err != nil {
		t.Fatal(err)
	}
	if got := s.get(leaseRPM); got != 101 { // the request and a full lease (10%) after it
		t.Fatalf("requests counted after the first admission: %d, want 1 + a lease of 100", got)
	}
	now = now.Add(time.Minute - time.Nanosecond)
	if err := l.Sweep(ctx); err != nil {
		t.Fatal(err)
	}
	if got := s.get(leaseRPM); got != 101 {
		t.Errorf("requests counted after a sweep before Idle: %d, want the lease kept (101)", got)
	}
	now = now.Add(time.Nanosecond)
	if err := l.Sweep(ctx); err != nil {
		t.Fatal(err)
	}
	got := map[string]int64{"requests": s.get(leaseRPM), "tokens": s.get(leaseTPM), "budget": s.get(leaseBudget)}
	want := map[string]int64{"requests": 1, "tokens": 40, "budget": 700}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("store counters after the idle sweep (-want +got):\n%s", diff)
	}
	// The sweep after forgets the tag, which holds nothing now.
	if err := l.Sweep(ctx); err != nil {
		t.Fatal(err)
	}
	if _, ok := l.tags.Load("proj_1"); ok {
		t.Error("the tag is still in the map with nothing held")
	}
	// The next admission takes a new lease.
	if d, err := l.Admit(ctx, a); err != nil || !d.Allowed {
		t.Fatal(d, err)
	}
	if got := s.get(leaseRPM); got != 102 {
		t.Errorf("requests counted after admitting again: %d, want 2 + a new lease of 100", got)
	}
}

// A reservation still out when its lease is given back settles into what
// is owed, and the next sweep hands it back.
func TestLeaserSettleAfterReturn(t *testing.T) {
	ctx := context.Background()
	s := newCounterStore()
	now := time.Unix(1_700_000_000, 0)
	l := newTestLeaser(t, s, LeaseOptions{Fraction: 0.1, Idle: time.Minute, Now: func() time.Time { return now }})
	a := leaseAdmission(1000, 1_000_000, USD(100))
	d, err := l.Admit(ctx, a)
	if err != nil || !d.Allowed {
		t.Fatal(d, err)
	}
	now = now.Add(time.Hour) // a long stream: its lease idles out first
	if err := l.Sweep(ctx); err != nil {
		t.Fatal(err)
	}
	if got := s.get(leaseBudget); got != 1000 {
		t.Fatalf("budget while the request runs: %d, want its estimate (1000)", got)
	}
	if err := l.Settle(ctx, d.Reservation, Actual{Tokens: 5, Cost: 250}); err != nil {
		t.Fatal(err)
	}
	if err := l.Sweep(ctx); err != nil {
		t.Fatal(err)
	}
	if got := s.get(leaseBudget); got != 250 {
		t.Errorf("budget after the late settle: %d, want the actual cost (250)", got)
	}
	if got := s.get(leaseTPM); got != 5 {
		t.Errorf("tokens after the late settle: %d, want 5", got)
	}
}

// A limit that changes (a reload, an admin edit) retires the lease taken
// under the old one: it goes back, and a new one is taken.
func TestLeaserLimitChange(t *testing.T) {
	ctx := context.Background()
	s := newCounterStore()
	l := newTestLeaser(t, s, LeaseOptions{Fraction: 0.1})
	a := leaseAdmission(0, 0, USD(100)) // 100 dollars: a lease of 10
	d, err := l.Admit(ctx, a)
	if err != nil || !d.Allowed {
		t.Fatal(d, err)
	}
	l.Settle(ctx, d.Reservation, Actual{Cost: 1000})
	a.Budgets[0].Limit = USD(20) // a lease of 2
	if d, err = l.Admit(ctx, a); err != nil || !d.Allowed {
		t.Fatal(d, err)
	}
	l.Settle(ctx, d.Reservation, Actual{Cost: 1000})
	if got, want := s.get(leaseBudget), int64(2000+USD(2)); got != want {
		t.Errorf("budget counted: %d, want the two costs plus the new lease (%d)", got, want)
	}
	if err := l.Close(ctx); err != nil {
		t.Fatal(err)
	}
	if got := s.get(leaseBudget); got != 2000 {
		t.Errorf("budget after Close: %d, want 2000", got)
	}
}

// When the store has less than a request needs, the store decides (and
// refuses), and what the leases held is not lost.
func TestLeaserRefusesAtTheLimit(t *testing.T) {
	ctx := context.Background()
	s := newCounterStore()
	l := newTestLeaser(t, s, LeaseOptions{Fraction: 0.2})
	a := leaseAdmission(10, 0, USD(1))
	a.Budgets = nil
	admitted := 0
	for range 15 {
		d, err := l.Admit(ctx, a)
		if err != nil {
			t.Fatal(err)
		}
		if d.Allowed {
			admitted++
			l.Settle(ctx, d.Reservation, Actual{})
		} else if d.Refused.Kind != KindRequests {
			t.Errorf("refused by %q, want requests", d.Refused.Kind)
		}
	}
	if admitted != 10 {
		t.Errorf("admitted %d of 15 under a limit of 10 (time standing still), want 10", admitted)
	}
}

// A request larger than a whole limit goes to the store, which refuses
// it as too large; no lease is taken for it.
func TestLeaserTooLarge(t *testing.T) {
	ctx := context.Background()
	s := newCounterStore()
	l := newTestLeaser(t, s, LeaseOptions{})
	a := leaseAdmission(0, 50, 0) // 100 tokens estimated against a TPM of 50
	a.Budgets = nil
	d, err := l.Admit(ctx, a)
	if err != nil || d.Allowed {
		t.Fatalf("%+v, %v: want a refusal", d, err)
	}
	if s.calls.Load() != 0 || s.admits.Load() != 1 {
		t.Errorf("%d exchanges, %d store admissions: want none and one", s.calls.Load(), s.admits.Load())
	}
}

// While the store is unreachable, leases keep admitting until they run
// out; then Admit fails with ErrUnavailable, and a Fallback in front
// applies its policy (open: the local share). What was owed is handed
// back once the store answers.
func TestLeaserUnderFallback(t *testing.T) {
	ctx := context.Background()
	s := newCounterStore()
	l := newTestLeaser(t, s, LeaseOptions{Fraction: 0.1})
	local, err := NewEmbedded(ctx, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer local.Close(ctx)
	f := &Fallback{Primary: l, Local: local, Policy: FailOpen, Replicas: 2, Cooldown: time.Hour}
	defer f.Close(ctx)
	a := leaseAdmission(100, 0, 0) // leases of 10 requests
	a.Budgets = nil
	d, err := f.Admit(ctx, a)
	if err != nil || !d.Allowed {
		t.Fatal(d, err)
	}
	s.down.Store(true)
	served := 1
	for range 8 { // the lease has 10 left (no refill gets through)
		d, err := f.Admit(ctx, a)
		if err != nil || !d.Allowed {
			t.Fatalf("admission %d with Redis down: %+v, %v", served, d, err)
		}
		served++
	}
	if f.Degraded() {
		t.Fatal("degraded while the lease still covered requests")
	}
	// Drain what is left, then the Fallback takes over.
	for !f.Degraded() {
		if d, err := f.Admit(ctx, a); err != nil || !d.Allowed {
			t.Fatalf("admission %d: %+v, %v", served, d, err)
		}
		served++
		if served > 100 {
			t.Fatal("never degraded")
		}
	}
	if served != 12 {
		t.Errorf("served %d before degrading, want the first, the lease of 10 after it, and one by the local share", served)
	}
	n := 0
	for {
		d, err := f.Admit(ctx, a)
		if err != nil {
			t.Fatal(err)
		}
		if !d.Allowed {
			break
		}
		n++
	}
	if n != 49 { // the local share: 100/2, one used by the admission that degraded
		t.Errorf("local share admitted %d more, want 49", n)
	}
	s.down.Store(false)
	if err := l.Close(ctx); err != nil {
		t.Fatal(err)
	}
	if got := s.get(leaseRPM); got != 11 {
		t.Errorf("requests in the store after Close: %d, want the 11 admitted from the lease", got)
	}
}

// Errors the store returns other than a refusal reach the caller.
func TestLeaserStoreError(t *testing.T) {
	s := newCounterStore()
	s.down.Store(true)
	l := newTestLeaser(t, s, LeaseOptions{})
	_, err := l.Admit(context.Background(), leaseAdmission(10, 0, 0))
	if !errors.Is(err, ErrUnavailable) {
		t.Errorf("err %v, want ErrUnavailable", err)
	}
}

// Many goroutines admitting and settling at once (run with -race): the
// counters still add up.
func TestLeaserConcurrent(t *testing.T) {
	ctx := context.Background()
	s := newCounterStore()
	l := newTestLeaser(t, s, LeaseOptions{Fraction: 0.05, Go: func(f func()) { go f() }})
	a := leaseAdmission(1_000_000, 1e12, USD(1e6))
	var wg sync.WaitGroup
	var cost atomic.Int64
	for g := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 500 {
				d, err := l.Admit(ctx, a)
				if err != nil || !d.Allowed {
					t.Errorf("%+v, %v", d, err)
					return
				}
				c := Micros(g*i%2000 + 1)
				cost.Add(int64(c))
				l.Settle(ctx, d.Reservation, Actual{Tokens: 100, Cost: c})
			}
		}()
	}
	wg.Wait()
	if err := l.Close(ctx); err != nil {
		t.Fatal(err)
	}
	if got := s.get(leaseRPM); got != 4000 {
		t.Errorf("requests %d, want 4000", got)
	}
	if got := s.get(leaseBudget); got != cost.Load() {
		t.Errorf("budget %d, want %d", got, cost.Load())
	}
}
