// Package limittest holds the contract every limit.SpendStore passes,
// and the spend-persistence checks run against the real backends.
package limittest

import (
	"context"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"gatehouse/internal/limit"
)

// RunSpendStore checks a SpendStore. open returns an empty store that
// reopen gives back after a "restart" (closing and opening the same
// database); both are called from the test's goroutine.
func RunSpendStore(t *testing.T, open func(t *testing.T) limit.SpendStore, reopen func(t *testing.T) limit.SpendStore) {
	ctx := context.Background()
	t.Run("AddLoad", func(t *testing.T) {
		s := open(t)
		day := limit.BudgetKey{Tag: "proj_1", Scope: limit.ScopeKey, ID: "key_1", Period: limit.Day, Start: "2025-03-14"}
		old := day
		old.Start = "2025-02-28"
		total := limit.BudgetKey{Tag: "proj_1", Scope: limit.ScopeProject, ID: "proj_1", Period: limit.Total}
		for range 2 {
			if err := s.AddSpend(ctx, map[limit.BudgetKey]int64{day: 1_250_000, old: 7, total: 3}); err != nil {
				t.Fatal(err)
			}
		}
		if err := s.AddSpend(ctx, map[limit.BudgetKey]int64{day: -500_000}); err != nil {
			t.Fatal(err)
		}
		if err := s.AddSpend(ctx, nil); err != nil {
			t.Fatal(err)
		}
		got, err := s.LoadSpend(ctx, "2025-03-01")
		if err != nil {
			t.Fatal(err)
		}
		want := map[limit.BudgetKey]int64{day: 2_000_000, total: 6}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("LoadSpend (-want +got):\n%s", diff)
		}
		// Exact at the edge of int64 micro-dollars' useful range.
		big := limit.BudgetKey{Scope: limit.ScopeCustomer, ID: "c", Period: limit.Total}
		if err := s.AddSpend(ctx, map[limit.BudgetKey]int64{big: 1 << 52}); err != nil {
			t.Fatal(err)
		}
		if err := s.AddSpend(ctx, map[limit.BudgetKey]int64{big: 1}); err != nil {
			t.Fatal(err)
		}
		got, _ = s.LoadSpend(ctx, "2025-03-01")
		if got[big] != 1<<52+1 {
			t.Errorf("big counter %d, want %d", got[big], int64(1<<52+1))
		}
	})
	t.Run("Restart", func(t *testing.T) {
		clk := time.Date(2025, 3, 14, 12, 0, 0, 0, time.UTC)
		now := func() time.Time { return clk }
		s := open(t)
		e, err := limit.NewEmbedded(ctx, limit.Options{Now: now, Spend: s, FlushEvery: 20 * time.Millisecond})
		if err != nil {
			t.Fatal(err)
		}
		budgets := []limit.Budget{
			{Scope: limit.ScopeKey, ID: "key_1", Limit: limit.USD(1), Period: limit.Month},
			{Scope: limit.ScopeProject, ID: "proj_1", Limit: limit.USD(100), Period: limit.Total},
		}
		a := limit.Admission{Tag: "proj_1", Budgets: budgets, Cost: limit.USD(0.5)}
		for range 3 {
			d, err := e.Admit(ctx, a)
			if err != nil || !d.Allowed {
				t.Fatalf("admit: %v %+v", err, d.Refused)
			}
			e.Settle(ctx, d.Reservation, limit.Actual{Cost: limit.USD(0.25)})
		}
		// The flusher writes without Close: what a crash would keep.
		deadline := time.Now().Add(5 * time.Second)
		for {
			m, err := s.LoadSpend(ctx, limit.Since(clk))
			if err != nil {
				t.Fatal(err)
			}
			if m[limit.BudgetKey{Tag: "proj_1", Scope: limit.ScopeKey, ID: "key_1", Period: limit.Month, Start: "2025-03-01"}] == 750_000 {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("settled spend not flushed within 5s: %v", m)
			}
			time.Sleep(10 * time.Millisecond)
		}
		if err := e.Close(ctx); err != nil {
			t.Fatal(err)
		}
		s = reopen(t)
		e, err = limit.NewEmbedded(ctx, limit.Options{Now: now, Spend: s})
		if err != nil {
			t.Fatal(err)
		}
		defer e.Close(ctx)
		if got := e.Spent(limit.ScopeKey, "key_1", limit.Month, clk); got != limit.USD(0.75) {
			t.Errorf("after restart key spent %v, want 0.750000", got)
		}
		if got := e.Spent(limit.ScopeProject, "proj_1", limit.Total, clk); got != limit.USD(0.75) {
			t.Errorf("after restart project spent %v, want 0.750000", got)
		}
		if d, _ := e.Admit(ctx, a); d.Allowed {
			t.Error("0.75 + 0.50 > 1.00 admitted after restart")
		}
		if d, _ := e.Admit(ctx, limit.Admission{Tag: "proj_1", Budgets: budgets, Cost: limit.USD(0.25)}); !d.Allowed {
			t.Error("0.75 + 0.25 = 1.00 refused after restart")
		}
	})
}
