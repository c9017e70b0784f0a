package main

import (
	"context"
	"fmt"
	"os"
	"sync/atomic"
	"testing"
	"time"

	"gatehouse/internal/admin"
	"gatehouse/internal/config"
	"gatehouse/internal/limit"
	"gatehouse/internal/store/redis"
)

// spendClock is a settable clock for the limiters under test.
type spendClock struct{ ns atomic.Int64 }

func newSpendClock(t time.Time) *spendClock {
	c := &spendClock{}
	c.ns.Store(t.UnixNano())
	return c
}

func (c *spendClock) now() time.Time      { return time.Unix(0, c.ns.Load()).UTC() }
func (c *spendClock) set(t time.Time)     { c.ns.Store(t.UnixNano()) }
func (c *spendClock) String() string      { return c.now().Format(time.RFC3339) }
func (c *spendClock) add(d time.Duration) { c.ns.Add(int64(d)) }

// spendKeys are config keys as the adapter tests name them: one in a
// project, one without.
var spendKeys = []config.Key{{Key: "gh-spend-ci", Name: "ci", Project: "qa"}, {Key: "gh-spend-loose", Name: "loose"}}

// spendAdmissions are requests as the server admits them (see its
// admission and PrincipalTag): a stored key of proj_1 for customer
// cus_1, and the two config keys, whose tags come from their project's
// name or, without one, their own ID. Each reserves reserve.
func spendAdmissions(reserve limit.Micros) []limit.Admission {
	big := limit.USD(1000)
	return []limit.Admission{
		{Tag: "proj_1", Cost: reserve, Budgets: []limit.Budget{
			{Scope: limit.ScopeKey, ID: "key_1", Limit: big, Period: limit.Month},
			{Scope: limit.ScopeProject, ID: "proj_1", Limit: big, Period: limit.Total},
			{Scope: limit.ScopeCustomer, ID: "cus_1", Limit: big, Period: limit.Day},
		}},
		{Tag: "static:qa", Cost: reserve, Budgets: []limit.Budget{{Scope: limit.ScopeKey, ID: "static:ci", Limit: big, Period: limit.Week}}},
		{Tag: "static:loose", Cost: reserve, Budgets: []limit.Budget{{Scope: limit.ScopeKey, ID: "static:loose", Limit: big, Period: limit.Total}}},
	}
}

// spendRefs are the admin API's questions about those budgets: a config
// key's ProjectID is the stored project of its name, not its tag.
var spendRefs = []admin.BudgetRef{
	{Scope: limit.ScopeKey, ID: "key_1", ProjectID: "proj_1", Period: limit.Month},
	{Scope: limit.ScopeProject, ID: "proj_1", ProjectID: "proj_1", Period: limit.Total},
	{Scope: limit.ScopeCustomer, ID: "cus_1", ProjectID: "proj_1", Period: limit.Day},
	{Scope: limit.ScopeKey, ID: "static:ci", ProjectID: "proj_qa", Period: limit.Week},
	{Scope: limit.ScopeKey, ID: "static:loose", ProjectID: "", Period: limit.Total},
	{Scope: limit.ScopeKey, ID: "key_idle", ProjectID: "proj_1", Period: limit.Day},
}

// admitAll admits every admission and settles it at settle (or leaves
// it in flight when settle is negative).
func admitAll(t *testing.T, a limit.Admitter, as []limit.Admission, settle limit.Micros) {
	t.Helper()
	ctx := context.Background()
	for _, adm := range as {
		d, err := a.Admit(ctx, adm)
		if err != nil || !d.Allowed {
			t.Fatalf("admit %s: %+v %v", adm.Tag, d, err)
		}
		if settle >= 0 {
			if err := a.Settle(ctx, d.Reservation, limit.Actual{Cost: settle}); err != nil {
				t.Fatal(err)
			}
		}
	}
}

func spentOf(t *testing.T, b admin.Budgets, at time.Time) string {
	t.Helper()
	got, err := b.Spent(context.Background(), spendRefs, at)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != len(spendRefs) {
		t.Fatalf("%d figures for %d budgets", len(got), len(spendRefs))
	}
	return fmt.Sprint(got)
}

// TestBudgetSpendEmbedded: in embedded mode the adapter reads the
// in-process counters, settled spend and reservations in flight, per
// period of the clock it is asked at.
func TestBudgetSpendEmbedded(t *testing.T) {
	clk := newSpendClock(time.Date(2026, 11, 30, 23, 0, 0, 0, time.UTC)) // a Monday, the month's last day
	e, err := limit.NewEmbedded(context.Background(), limit.Options{Now: clk.now})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { e.Close(context.Background()) })
	a := &admitter{admitter: e, spend: &budgetSpend{embedded: e}}
	b := a.spend.withKeys(spendKeys)

	if got := spentOf(t, b, clk.now()); got != "[0.000000 0.000000 0.000000 0.000000 0.000000 0.000000]" {
		t.Fatalf("before any request: %s", got)
	}
	admitAll(t, e, spendAdmissions(limit.USD(0.5)), limit.USD(0.25))
	admitAll(t, e, spendAdmissions(limit.USD(0.125)), -1) // in flight
	if got := spentOf(t, b, clk.now()); got != "[0.375000 0.375000 0.375000 0.375000 0.375000 0.000000]" {
		t.Fatalf("settled 0.25 and 0.125 in flight: %s", got)
	}
	// Two hours on it is December: the day's and the month's counters
	// start over; the week (from Monday 30 November) and the totals go on.
	clk.add(2 * time.Hour)
	if got := spentOf(t, b, clk.now()); got != "[0.000000 0.375000 0.000000 0.375000 0.375000 0.000000]" {
		t.Fatalf("at %s: %s", clk, got)
	}
	clk.set(time.Date(2026, 12, 7, 0, 0, 0, 0, time.UTC))
	if got := spentOf(t, b, clk.now()); got != "[0.000000 0.375000 0.000000 0.000000 0.375000 0.000000]" {
		t.Fatalf("the next week, %s: %s", clk, got)
	}
}

// TestBudgetSpendRedis: in cluster mode the adapter reads the counters
// in Redis, under the tags the server admits with (a config key's is
// not its stored project's ID), and sees what every replica spent.
func TestBudgetSpendRedis(t *testing.T) {
	url := os.Getenv("GATEHOUSE_TEST_REDIS")
	if url == "" {
		t.Fatal(`GATEHOUSE_TEST_REDIS is not set: run eval "$(scripts/test-services start)" first`)
	}
	prefix := uniquePrefix()
	clk := newSpendClock(time.Now().UTC())
	var replicas []*redis.Limiter
	for range 2 {
		c, err := redis.NewClient(url)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(c.Close)
		l, err := redis.New(context.Background(), c, redis.Options{Prefix: prefix, Now: clk.now, Timeout: 10 * time.Second})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { l.Close(context.Background()) })
		replicas = append(replicas, l)
	}
	b := (&budgetSpend{redis: replicas[1]}).withKeys(spendKeys)

	admitAll(t, replicas[0], spendAdmissions(limit.USD(0.5)), limit.USD(0.25))
	admitAll(t, replicas[1], spendAdmissions(limit.USD(0.5)), limit.USD(0.125))
	admitAll(t, replicas[0], spendAdmissions(limit.USD(0.0625)), -1) // in flight
	want := "[0.437500 0.437500 0.437500 0.437500 0.437500 0.000000]"
	deadline := time.Now().Add(5 * time.Second)
	for got := spentOf(t, b, clk.now()); got != want; got = spentOf(t, b, clk.now()) {
		if time.Now().After(deadline) { // settles are queued: wait for them
			t.Fatalf("spend %s, want %s", got, want)
		}
		time.Sleep(10 * time.Millisecond)
	}

	// Without the config's keys, their counters are looked for under
	// their stored project: nothing there.
	if got := spentOf(t, (&budgetSpend{redis: replicas[1]}).withKeys(nil), clk.now()); got != "[0.437500 0.437500 0.437500 0.000000 0.000000 0.000000]" {
		t.Fatalf("without the config's tags: %s", got)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := b.Spent(ctx, spendRefs, clk.now()); err == nil {
		t.Fatal("a failed read answered figures")
	}
}

// TestBudgetSpendNilWithoutLimiter: no admitter means no Budgets, not a
// non-nil interface holding a nil adapter.
func TestBudgetSpendNilWithoutLimiter(t *testing.T) {
	var s *budgetSpend
	if b := s.withKeys(spendKeys); b != nil {
		t.Fatalf("withKeys on nil = %#v, want a nil admin.Budgets", b)
	}
}
