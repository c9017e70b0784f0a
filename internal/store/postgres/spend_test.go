package postgres

import (
	"testing"

	"gatehouse/internal/limit"
	"gatehouse/internal/limit/limittest"
)

func TestSpendStore(t *testing.T) {
	var dsn string
	var cur *Store
	open := func(t *testing.T) limit.SpendStore {
		dsn = testDSN(t)
		cur = openTest(t, dsn)
		s := cur
		t.Cleanup(func() { s.Close() })
		return s
	}
	reopen := func(t *testing.T) limit.SpendStore {
		cur.Close()
		cur = openTest(t, dsn)
		s := cur
		t.Cleanup(func() { s.Close() })
		return s
	}
	limittest.RunSpendStore(t, open, reopen)
}

// TestLoadTagSpend: one tag's counters of the current periods, and
// nothing of another tag's.
func TestLoadTagSpend(t *testing.T) {
	s := openTest(t, testDSN(t))
	t.Cleanup(func() { s.Close() })
	ctx := t.Context()
	k := func(tag, id, start string) limit.BudgetKey {
		return limit.BudgetKey{Tag: tag, Scope: limit.ScopeKey, ID: id, Period: limit.Month, Start: start}
	}
	total := limit.BudgetKey{Tag: "p1", Scope: limit.ScopeProject, ID: "p1", Period: limit.Total}
	if err := s.AddSpend(ctx, map[limit.BudgetKey]int64{
		k("p1", "a", "2026-11-01"): 5, k("p1", "a", "2026-10-01"): 7, k("p2", "b", "2026-11-01"): 11, total: 13,
	}); err != nil {
		t.Fatal(err)
	}
	got, err := s.LoadTagSpend(ctx, "p1", "2026-11-01")
	if err != nil {
		t.Fatal(err)
	}
	want := map[limit.BudgetKey]int64{k("p1", "a", "2026-11-01"): 5, total: 13}
	if len(got) != len(want) || got[k("p1", "a", "2026-11-01")] != 5 || got[total] != 13 {
		t.Fatalf("got %v, want %v", got, want)
	}
}
