package sqlite

import (
	"context"
	"errors"
	"path/filepath"
	"testing"
	"time"

	"gatehouse/internal/account"
	"gatehouse/internal/limit"
	"gatehouse/internal/limit/limittest"
)

func TestSpendStore(t *testing.T) {
	var path string
	var cur *Store
	open := func(t *testing.T) limit.SpendStore {
		path = filepath.Join(t.TempDir(), "gatehouse.db")
		s, err := Open(context.Background(), path)
		if err != nil {
			t.Fatal(err)
		}
		cur = s
		t.Cleanup(func() { s.Close() })
		return s
	}
	reopen := func(t *testing.T) limit.SpendStore {
		cur.Close()
		s, err := Open(context.Background(), path)
		if err != nil {
			t.Fatal(err)
		}
		cur = s
		t.Cleanup(func() { s.Close() })
		return s
	}
	limittest.RunSpendStore(t, open, reopen)
}

// AddSpend runs on the records' writer connection with their prepared
// statements, so it shares their rules: the flush's context is checked
// before each statement, a flush that ends half way is rolled back
// whole (no counter of it added, none added twice when it is retried),
// and the connection comes back outside a transaction, for the records'
// next batch and the next flush alike.
func TestAddSpendOnTheWriterConnection(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "gatehouse.db")
	s, err := Open(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	at := time.Date(2026, 11, 29, 8, 0, 0, 0, time.UTC)
	record := func(id string) []account.Record {
		return []account.Record{{RequestID: id, Time: at, KeyID: "key_1", Project: "p", Model: "m", Provider: "openai", Status: 200}}
	}
	a := limit.BudgetKey{Tag: "p", Scope: limit.ScopeKey, ID: "key_1", Period: limit.Month, Start: "2026-11-01"}
	b := limit.BudgetKey{Tag: "p", Scope: limit.ScopeProject, ID: "p", Period: limit.Total}
	if err := s.AddSpend(ctx, map[limit.BudgetKey]int64{a: 5, b: 7}); err != nil {
		t.Fatal(err)
	}
	if err := s.WriteRecords(ctx, record("gh-spend-1")); err != nil {
		t.Fatal(err)
	}
	// Err is asked before BEGIN and before each upsert: nil twice lets
	// BEGIN and the first upsert run, then the second is refused.
	if err := s.AddSpend(&endsAfter{ctx, 2}, map[limit.BudgetKey]int64{a: 100, b: 100}); !errors.Is(err, context.Canceled) {
		t.Fatalf("a flush ended half way: %v, want context.Canceled", err)
	}
	done, cancel := context.WithCancel(ctx)
	cancel()
	if err := s.AddSpend(done, map[limit.BudgetKey]int64{a: 1000}); !errors.Is(err, context.Canceled) {
		t.Fatalf("a cancelled flush: %v, want context.Canceled", err)
	}
	if err := s.WriteRecords(ctx, record("gh-spend-2")); err != nil {
		t.Fatalf("records after a failed flush: %v", err)
	}
	if err := s.AddSpend(ctx, map[limit.BudgetKey]int64{a: 1}); err != nil {
		t.Fatalf("a flush after a failed one: %v", err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}

	s, err = Open(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	got, err := s.LoadSpend(ctx, "2026-11-01")
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 || got[a] != 6 || got[b] != 7 {
		t.Fatalf("spend after reopening: %v, want %v: 6 and %v: 7", got, a, b)
	}
	rows, err := s.Usage(ctx, account.UsageQuery{})
	if err != nil {
		t.Fatal(err)
	}
	if len(rows) != 1 || rows[0].Requests != 2 {
		t.Fatalf("usage after reopening: %+v, want the 2 records", rows)
	}
}

// BenchmarkAddSpend is one spend flush of a budgeted key: its key's and
// its project's counters, as the spend log writes them every
// limits.flush_every.
func BenchmarkAddSpend(b *testing.B) {
	ctx := context.Background()
	s, err := Open(ctx, filepath.Join(b.TempDir(), "gatehouse.db"))
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	deltas := map[limit.BudgetKey]int64{
		{Tag: "p", Scope: limit.ScopeKey, ID: "key_1", Period: limit.Month, Start: "2026-11-01"}: 36,
		{Tag: "p", Scope: limit.ScopeProject, ID: "p", Period: limit.Total}:                      36,
	}
	b.ReportAllocs()
	for b.Loop() {
		if err := s.AddSpend(ctx, deltas); err != nil {
			b.Fatal(err)
		}
	}
}
