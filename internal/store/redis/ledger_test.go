package redis

import (
	"context"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/rueidis"

	"gatehouse/internal/limit"
)

// loseKeys deletes every key of the prefix, on every node: what a Redis
// restarted without persistence, or failed over to an empty replica, has
// lost.
func loseKeys(t *testing.T, c rueidis.Client, prefix string) {
	t.Helper()
	ctx := context.Background()
	n := 0
	for _, node := range c.Nodes() {
		keys, err := node.Do(ctx, node.B().Keys().Pattern(prefix+"*").Build()).AsStrSlice()
		if err != nil {
			t.Fatal(err)
		}
		n += len(keys)
	}
	if n == 0 {
		t.Fatal("nothing to lose: the test set no keys")
	}
	deleteMatching(c, prefix+"*")
}

// TestLostCountersAreRebuiltBeforeAdmitting: a key that spent its budget
// stays refused after Redis loses every counter: the first admission of
// its project finds the seeded marker gone and rebuilds the counters from
// the durable record before anything is admitted against them.
func TestLostCountersAreRebuiltBeforeAdmitting(t *testing.T) {
	c := testClient(t)
	prefix := testPrefix(t, c)
	spend := &memSpend{}
	l := newLimiter(t, c, Options{Prefix: prefix, Timeout: 10 * time.Second, Spend: spend, FlushEvery: 10 * time.Millisecond})
	ctx := context.Background()
	b := limit.Budget{Scope: limit.ScopeKey, ID: "k1", Limit: limit.USD(0.0005), Period: limit.Month}
	a := limit.Admission{Tag: "proj", Budgets: []limit.Budget{b}, Cost: limit.USD(0.00001),
		Rates: []limit.Rate{{Scope: limit.ScopeKey, ID: "k1", RPM: 1000}}}
	admitted := 0
	for range 200 {
		d, err := l.Admit(ctx, a)
		if err != nil {
			t.Fatal(err)
		}
		if !d.Allowed {
			break
		}
		admitted++
		if err := l.Settle(ctx, d.Reservation, limit.Actual{Cost: limit.USD(0.00001)}); err != nil {
			t.Fatal(err)
		}
	}
	if admitted != 50 {
		t.Fatalf("%d admitted before the budget ran out, want 50", admitted)
	}
	waitDurable(t, spend, int64(limit.USD(0.0005)))

	loseKeys(t, c, prefix)
	if d, err := l.Admit(ctx, a); err != nil || d.Allowed {
		t.Fatalf("after Redis lost its data: allowed %v (%v), want the key still refused", d.Allowed, err)
	}
	if got, _ := l.Spent(ctx, "proj", b, time.Now()); got != limit.USD(0.0005) {
		t.Fatalf("rebuilt counter %v, want 0.000500", got)
	}
	// Another replica, which never saw the loss, refuses it too.
	other := newLimiter(t, c, Options{Prefix: prefix, Timeout: 10 * time.Second, Spend: spend})
	if d, _ := other.Admit(ctx, a); d.Allowed {
		t.Fatal("the other replica admitted the spent key")
	}
}

func waitDurable(t *testing.T, s *memSpend, want int64) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for s.total() != want {
		if time.Now().After(deadline) {
			t.Fatalf("durable record %d, want %d", s.total(), want)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestSettleAfterTheLoss: a reservation made before Redis lost its data
// and settled after the counters were rebuilt adds its actual cost whole
// (its estimate is no longer in the counter), not actual minus estimate.
func TestSettleAfterTheLoss(t *testing.T) {
	c := testClient(t)
	prefix := testPrefix(t, c)
	spend := &memSpend{}
	l := newLimiter(t, c, Options{Prefix: prefix, Timeout: 10 * time.Second, Spend: spend})
	ctx := context.Background()
	b := limit.Budget{Scope: limit.ScopeProject, ID: "proj", Limit: limit.USD(1), Period: limit.Total}
	a := limit.Admission{Tag: "proj", Budgets: []limit.Budget{b}, Cost: limit.USD(0.01)}
	before, err := l.Admit(ctx, a)
	if err != nil || !before.Allowed {
		t.Fatal(err)
	}
	loseKeys(t, c, prefix)
	after, err := l.Admit(ctx, a) // rebuilds (nothing settled yet) and reserves 0.01
	if err != nil || !after.Allowed {
		t.Fatal(err)
	}
	if err := l.Settle(ctx, before.Reservation, limit.Actual{Cost: limit.USD(0.004)}); err != nil {
		t.Fatal(err)
	}
	if err := l.Settle(ctx, after.Reservation, limit.Actual{Cost: limit.USD(0.003)}); err != nil {
		t.Fatal(err)
	}
	if err := l.Close(ctx); err != nil {
		t.Fatal(err)
	}
	if got, _ := l.Spent(ctx, "proj", b, time.Now()); got != limit.USD(0.007) {
		t.Fatalf("counter %v, want 0.007000 (0.004 settled whole after the loss, 0.003 as a correction)", got)
	}
}

// TestSweepReleasesUnsettledReservations: a replica that dies between
// admission and settle leaves its reservation in the budget; past the
// reservation's deadline, once the replica has been silent for the
// replica timeout, any replica's sweep takes it back, once, and a settle
// that comes after all adds the actual cost whole. A live replica's
// expired reservation stays counted.
func TestSweepReleasesUnsettledReservations(t *testing.T) {
	c := testClient(t)
	prefix := testPrefix(t, c)
	clk := newClock(time.Now())
	o := Options{Prefix: prefix, Now: clk.Now, SweepEvery: -1, ReservationTTL: time.Minute, ReplicaTimeout: 30 * time.Second}
	crashed := newLimiter(t, c, o)
	survivor := newLimiter(t, c, o)
	ctx := context.Background()
	b := limit.Budget{Scope: limit.ScopeKey, ID: "k", Limit: limit.USD(1), Period: limit.Total}
	a := limit.Admission{Tag: "t", Budgets: []limit.Budget{b}, Cost: limit.USD(0.4)}
	lost, err := crashed.Admit(ctx, a)
	if err != nil || !lost.Allowed {
		t.Fatal(err)
	}
	kept, err := survivor.Admit(ctx, a)
	if err != nil || !kept.Allowed {
		t.Fatal(err)
	}
	if n, err := survivor.Sweep(ctx); err != nil || n != 0 {
		t.Fatalf("swept %d (%v) before any deadline", n, err)
	}
	clk.Advance(30 * time.Second)
	if err := survivor.Settle(ctx, kept.Reservation, limit.Actual{Cost: limit.USD(0.1)}); err != nil {
		t.Fatal(err)
	}
	survivor.Close(ctx) // the settle is applied
	clk.Advance(20 * time.Second)
	// A third replica reserves; it will still be alive at the sweep.
	lively := newLimiter(t, c, o)
	late, err := lively.Admit(ctx, limit.Admission{Tag: "t", Budgets: []limit.Budget{b}, Cost: limit.USD(0.01)})
	if err != nil || !late.Allowed {
		t.Fatal(err)
	}
	clk.Advance(11 * time.Second) // the crashed replica: silent 61s; the lively one: 11s
	survivor = newLimiter(t, c, o)
	if n, err := survivor.Sweep(ctx); err != nil || n != 1 {
		t.Fatalf("swept %d (%v), want the crashed replica's one reservation", n, err)
	}
	if n, _ := survivor.Sweep(ctx); n != 0 {
		t.Fatalf("a second sweep released %d more", n)
	}
	if got, _ := survivor.Spent(ctx, "t", b, clk.Now()); got != limit.USD(0.11) {
		t.Fatalf("after the sweep: %v, want 0.110000 (the settled one, and the live replica's reservation)", got)
	}
	clk.Advance(2 * time.Minute) // the lively replica's reservation expires, and it is still heard
	lively.heartbeat(ctx)
	if n, _ := survivor.Sweep(ctx); n != 0 {
		t.Fatalf("swept %d reservations of a live replica", n)
	}
	lively.Settle(ctx, late.Reservation, limit.Actual{Cost: 0})
	lively.Close(ctx)
	// The crashed replica comes back and settles after all.
	crashed.Settle(ctx, lost.Reservation, limit.Actual{Cost: limit.USD(0.2)})
	crashed.Close(ctx)
	if got, _ := survivor.Spent(ctx, "t", b, clk.Now()); got != limit.USD(0.3) {
		t.Fatalf("after the late settles: %v, want 0.300000", got)
	}
}

// TestReleaseAnAdmissionOfUnknownOutcome: an admission whose reply never
// came is undone through the settle queue — its estimate taken back if
// the script had reserved, nothing changed if it had not run.
func TestReleaseAnAdmissionOfUnknownOutcome(t *testing.T) {
	c := testClient(t)
	prefix := testPrefix(t, c)
	l := newLimiter(t, c, Options{Prefix: prefix, Timeout: 10 * time.Second})
	ctx := context.Background()
	b := limit.Budget{Scope: limit.ScopeKey, ID: "k", Limit: limit.USD(1), Period: limit.Total}
	a := limit.Admission{Tag: "u", Budgets: []limit.Budget{b}, Cost: limit.USD(0.25)}
	kept, err := l.Admit(ctx, a)
	if err != nil || !kept.Allowed {
		t.Fatal(err)
	}
	lost, err := l.Admit(ctx, a) // reserved; pretend its reply was lost
	if err != nil || !lost.Allowed {
		t.Fatal(err)
	}
	l.releaseAdmission(lost.Reservation.ID, a, lost.Reservation.At)
	l.releaseAdmission(l.newID(), a, time.Now()) // never ran
	cancelled, cancel := context.WithCancel(ctx)
	cancel()
	if _, err := l.Admit(cancelled, a); err == nil { // never sent: released as never run
		t.Fatal("an admission with a cancelled context succeeded")
	}
	if err := l.Close(ctx); err != nil {
		t.Fatal(err)
	}
	if got, _ := l.Spent(ctx, "u", b, time.Now()); got != limit.USD(0.25) {
		t.Fatalf("counter %v, want 0.250000: the kept reservation only", got)
	}
	if n, err := c.Do(ctx, c.B().Zcard().Key(l.ledgerKey("u")).Build()).AsInt64(); err != nil || n != 1 {
		t.Fatalf("ledger holds %d reservations (%v), want the kept one", n, err)
	}
}

// TestSweepReleasesEntriesOfTheEarlierLayout: a ledger entry written
// before the entries said what they count — its id in the sorted set,
// its cost and counters in the hash beside it — is released by the
// sweep as before, once its replica is gone, and leaves neither behind;
// an entry of the present layout in the same ledger too.
func TestSweepReleasesEntriesOfTheEarlierLayout(t *testing.T) {
	c := testClient(t)
	prefix := testPrefix(t, c)
	clk := newClock(time.Now())
	o := Options{Prefix: prefix, Now: clk.Now, SweepEvery: -1, ReservationTTL: time.Minute, ReplicaTimeout: 30 * time.Second}
	crashed := newLimiter(t, c, o)
	ctx := context.Background()
	b := limit.Budget{Scope: limit.ScopeKey, ID: "k", Limit: limit.USD(1), Period: limit.Total}
	d, err := crashed.Admit(ctx, limit.Admission{Tag: "t", Budgets: []limit.Budget{b}, Cost: limit.USD(0.25)})
	if err != nil || !d.Allowed {
		t.Fatal(err)
	}
	// The present layout's entry: id, cost, counter.
	entries, err := c.Do(ctx, c.B().Zrange().Key(crashed.ledgerKey("t")).Min("0").Max("-1").Build()).AsStrSlice()
	if err != nil || len(entries) != 1 {
		t.Fatalf("ledger %v (%v), want the admission's one entry", entries, err)
	}
	parts := strings.Split(entries[0], "\x1f")
	if len(parts) != 3 || entries[0] != d.Reservation.ID || parts[1] != "250000" {
		t.Fatalf("ledger entry %q, want the reservation's %q: its id, 250000 and the budget's counter", entries[0], d.Reservation.ID)
	}
	counter := parts[2]
	if v, err := c.Do(ctx, c.B().Get().Key(counter).Build()).AsInt64(); err != nil || v != 250_000 {
		t.Fatalf("counter %q holds %d (%v), want the admission's 250000", counter, v, err)
	}
	// An earlier version's replica reserved 0.4 of the same budget.
	do := redisDo(t, c)
	do("INCRBY", counter, "400000")
	deadline := strconv.FormatInt(clk.Now().Add(time.Minute).UnixMilli(), 10)
	do("ZADD", crashed.oldLedgerKey("t"), deadline, "0ld-7")
	do("HSET", crashed.ledgerHash("t"), "0ld-7", "400000\x1f"+counter)
	clk.Advance(2 * time.Minute) // both deadlines past; neither replica heard since
	survivor := newLimiter(t, c, o)
	if n, err := survivor.Sweep(ctx); err != nil || n != 2 {
		t.Fatalf("swept %d (%v), want both reservations", n, err)
	}
	if got, _ := survivor.Spent(ctx, "t", b, clk.Now()); got != 0 {
		t.Fatalf("after the sweep: %v, want 0", got)
	}
	for _, k := range []string{crashed.ledgerKey("t"), crashed.oldLedgerKey("t"), crashed.ledgerHash("t")} {
		if n, err := c.Do(ctx, c.B().Exists().Key(k).Build()).AsInt64(); err != nil || n != 0 {
			t.Errorf("%s still there after the sweep (%v)", k, err)
		}
	}
}
