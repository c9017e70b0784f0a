package redis

import (
	"context"
	"errors"
	"testing"
	"time"

	"gatehouse/internal/limit"
	"gatehouse/internal/testservers"
)

// TestAddSpend: spend carried from a fallback's local limiter lands on
// the budget counter admission reads (created, with the period's expiry,
// when absent), so the next admission counts it.
func TestAddSpend(t *testing.T) {
	c := testClient(t)
	prefix := testPrefix(t, c)
	l := newLimiter(t, c, Options{Prefix: prefix, Now: newClock(t0).Now})
	ctx := context.Background()
	b := limit.Budget{Scope: limit.ScopeKey, ID: "k", Limit: limit.USD(1), Period: limit.Month}
	start, end := limit.Month.Span(t0)
	k := limit.BudgetKey{Tag: "p", Scope: limit.ScopeKey, ID: "k", Period: limit.Month, Start: start}
	if err := l.AddSpend(ctx, k, int64(limit.USD(0.5))); err != nil {
		t.Fatal(err)
	}
	if d, err := l.Admit(ctx, limit.Admission{Tag: "p", Budgets: []limit.Budget{b}, Cost: limit.USD(0.3)}); err != nil || !d.Allowed {
		t.Fatalf("0.5 carried + 0.3: %+v, %v; want admitted", d, err)
	}
	if err := l.AddSpend(ctx, k, int64(limit.USD(0.15))); err != nil {
		t.Fatal(err)
	}
	if got, _ := l.Spent(ctx, "p", b, t0); got != limit.USD(0.95) {
		t.Fatalf("spent %v, want 0.950000 (0.5 + 0.15 carried, 0.3 reserved)", got)
	}
	if d, _ := l.Admit(ctx, limit.Admission{Tag: "p", Budgets: []limit.Budget{b}, Cost: limit.USD(0.1)}); d.Allowed {
		t.Fatal("0.95 counted + 0.1 admitted under a budget of 1")
	}
	at, err := c.Do(ctx, c.B().Pexpiretime().Key(l.budgetKey("p", &b, start)).Build()).AsInt64()
	if err != nil || at != end.Add(budgetGrace).UnixMilli() {
		t.Errorf("counter expires at %d (%v), want the period's end and grace, %d", at, err, end.Add(budgetGrace).UnixMilli())
	}
	total := limit.BudgetKey{Tag: "p", Scope: limit.ScopeProject, ID: "p", Period: limit.Total}
	if err := l.AddSpend(ctx, total, 7); err != nil {
		t.Fatal(err)
	}
	tb := limit.Budget{Scope: limit.ScopeProject, ID: "p", Period: limit.Total}
	if ttl, _ := c.Do(ctx, c.B().Pttl().Key(l.budgetKey("p", &tb, "")).Build()).AsInt64(); ttl != -1 {
		t.Errorf("a total budget's counter has a TTL (%d ms); want none", ttl)
	}
}

// TestAddSpendUnavailable: with Redis stopped AddSpend fails with
// limit.ErrUnavailable, which keeps the spend carried.
func TestAddSpendUnavailable(t *testing.T) {
	rd := testservers.StartRedis(t, testservers.RedisOptions{})
	c, err := NewClient(rd.URL())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	l := newLimiter(t, c, Options{Timeout: 500 * time.Millisecond})
	if err := rd.Stop(); err != nil {
		t.Fatal(err)
	}
	err = l.AddSpend(context.Background(), limit.BudgetKey{Tag: "p", Scope: limit.ScopeKey, ID: "k", Period: limit.Total}, 1)
	if !errors.Is(err, limit.ErrUnavailable) {
		t.Fatalf("Redis stopped: %v, want ErrUnavailable", err)
	}
}

// TestAddSpendAfterTheLoss: when Redis lost its data during the outage,
// the counter carried spend creates does not stand in for the whole
// budget: the rebuild from the durable record, which holds the outage's
// spend and all before it, raises it to the record's figure.
func TestAddSpendAfterTheLoss(t *testing.T) {
	c := testClient(t)
	prefix := testPrefix(t, c)
	spend := &memSpend{}
	l := newLimiter(t, c, Options{Prefix: prefix, Timeout: 10 * time.Second, Spend: spend})
	ctx := context.Background()
	b := limit.Budget{Scope: limit.ScopeKey, ID: "k", Limit: limit.USD(1), Period: limit.Total}
	a := limit.Admission{Tag: "p", Budgets: []limit.Budget{b}, Cost: limit.USD(0.6)}
	d, err := l.Admit(ctx, a)
	if err != nil || !d.Allowed {
		t.Fatal(err)
	}
	l.Settle(ctx, d.Reservation, limit.Actual{Cost: limit.USD(0.6)})
	if err := l.Close(ctx); err != nil { // settled, and in the durable record
		t.Fatal(err)
	}
	loseKeys(t, c, prefix)
	// The outage's own spend, settled locally and recorded durably.
	k := limit.BudgetKey{Tag: "p", Scope: b.Scope, ID: b.ID, Period: b.Period}
	spend.AddSpend(ctx, map[limit.BudgetKey]int64{k: int64(limit.USD(0.3))})
	l = newLimiter(t, c, Options{Prefix: prefix, Timeout: 10 * time.Second, Spend: spend})
	if err := l.AddSpend(ctx, k, int64(limit.USD(0.3))); err != nil {
		t.Fatal(err)
	}
	if d, _ := l.Admit(ctx, limit.Admission{Tag: "p", Budgets: []limit.Budget{b}, Cost: limit.USD(0.2)}); d.Allowed {
		t.Fatal("admitted $0.20 on a $1 budget with $0.90 spent")
	}
	if got, _ := l.Spent(ctx, "p", b, time.Now()); got != limit.USD(0.9) {
		t.Fatalf("counter %v, want 0.900000 (rebuilt: before and during the outage)", got)
	}
}
