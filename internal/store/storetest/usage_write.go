package storetest

import (
	"fmt"
	"testing"
	"time"

	"gatehouse/internal/account"
	"gatehouse/internal/auth"
)

// testUsageWrites holds a store to account.RecordStore: batches are
// stored once whatever is replayed, and retention deletes by age in
// bounded batches. (The read side is held by the usage query contract.)
func testUsageWrites(t *testing.T, s auth.Store) {
	rs, ok := s.(account.RecordStore)
	if !ok {
		t.Fatalf("%T does not implement account.RecordStore", s)
	}
	ctx := ctxFor(t)
	old := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	recent := old.Add(48 * time.Hour)
	mk := func(i int, at time.Time) account.Record {
		return account.Record{RequestID: fmt.Sprintf("gh-w%03d", i), Time: at, Endpoint: "/v1/chat/completions",
			Model: "m", Status: 200, PromptTokens: i, Cost: 10, Labels: map[string]string{"team": "x"},
			RequestBody: `{"model":"m"}`}
	}
	var first []account.Record
	for i := range 5 {
		first = append(first, mk(i, old))
	}
	if err := rs.WriteRecords(ctx, first); err != nil {
		t.Fatal(err)
	}
	// A replay of part of the batch, a duplicate inside the batch, and
	// new records: only the new ones are added.
	again := []account.Record{first[1], first[3], mk(10, recent), mk(11, recent), mk(11, recent)}
	if err := rs.WriteRecords(ctx, again); err != nil {
		t.Fatalf("replayed batch: %v", err)
	}
	if err := rs.WriteRecords(ctx, nil); err != nil {
		t.Fatalf("empty batch: %v", err)
	}
	// Retention: the five old records go, two per call, the recent stay.
	cut := old.Add(time.Hour)
	total := 0
	for range 5 {
		n, err := rs.PruneRecords(ctx, cut, 2)
		if err != nil {
			t.Fatal(err)
		}
		if n > 2 {
			t.Fatalf("PruneRecords deleted %d, more than its limit 2", n)
		}
		total += n
	}
	if total != 5 {
		t.Fatalf("pruned %d old records, want 5 (each stored once)", total)
	}
	n, err := rs.PruneRecords(ctx, recent.Add(time.Second), 100)
	if err != nil {
		t.Fatal(err)
	}
	if n != 2 {
		t.Fatalf("recent records stored: %d, want 2 (duplicates skipped)", n)
	}
}
