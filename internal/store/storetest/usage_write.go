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

// testUsageRoundTrip holds a store to keeping every field of a record as
// written, whatever its strings hold: tabs, newlines, backslashes, quotes
// and multi-byte text are data, never syntax of the store's wire format.
// A record with a NUL byte or invalid UTF-8 (which PostgreSQL's text
// cannot hold) still goes in, and never fails the batch it came with.
func testUsageRoundTrip(t *testing.T, s auth.Store) {
	ctx := ctxFor(t)
	rs := s.(account.RecordStore)
	q := s.(account.Querier)
	odd := "tab\there, line\nbreak, cr\r, back\\slash \\N, \"quoted\", ünï €, 🦊"
	want := account.Record{RequestID: "gh-round", Time: time.Date(2026, 3, 4, 5, 6, 7, 891234000, time.UTC),
		Endpoint: "/v1/chat/completions", KeyID: "key\t1", ProjectID: "p1", Project: odd, Customer: odd,
		Model: "gpt-4o\\mini", ServedModel: "gpt-4o-mini-2024-07-18", Provider: "open\nai", Deployment: "openai/x",
		Status: 499, ErrorKind: "client_closed", PromptTokens: 12, CompletionTokens: 34, CachedTokens: 5,
		ReasoningTokens: 6, Cost: 1234567, Saved: 7654321, UsageSource: "estimated", LatencyMS: 12.345, TTFTMS: 0.001,
		OverheadMS: 1.5e-3, Cache: "miss", Attempts: 2, Stream: true,
		Labels:      map[string]string{"team": odd, "app": `a"b\c`},
		RequestBody: "{\"messages\":[{\"content\":\"" + odd + "\"}]}", ResponseBody: "data: x\n\ndata: [DONE]\n\n"}
	bad := account.Record{RequestID: "gh-bad", Time: want.Time, Model: "nul\x00byte", Customer: "bad\xffutf8",
		Status: 200, Labels: map[string]string{"x": "y"}, RequestBody: "\x00\xfe"}
	plain := account.Record{RequestID: "gh-plain", Time: want.Time, Model: "m", Status: 200}
	if err := rs.WriteRecords(ctx, []account.Record{want, bad, plain}); err != nil {
		t.Fatalf("a batch with odd strings: %v", err)
	}
	got, err := q.Record(ctx, want.RequestID)
	if err != nil {
		t.Fatal(err)
	}
	want.Time = want.Time.Truncate(time.Microsecond)
	if !got.Time.Equal(want.Time) {
		t.Errorf("time %v, want %v", got.Time, want.Time)
	}
	got.Time = want.Time
	if fmt.Sprintf("%#v", got) != fmt.Sprintf("%#v", want) {
		t.Errorf("read back\n%#v\nwant\n%#v", got, want)
	}
	for _, id := range []string{"gh-bad", "gh-plain"} {
		if _, err := q.Record(ctx, id); err != nil {
			t.Errorf("record %s: %v", id, err)
		}
	}
}
