package postgres

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"gatehouse/internal/account"
	"gatehouse/internal/store/postgres/pgtest"
)

// TestWriteFreshRecordsFallsBack: a fresh batch holding a request id
// that is stored already, or twice, fails its COPY on the primary key
// and is written through the temporary table instead: every record
// once, and the rollup counting each once too.
func TestWriteFreshRecordsFallsBack(t *testing.T) {
	ctx := context.Background()
	s, err := Open(ctx, pgtest.DSN(t, "gh_fresh_"))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	at := time.Date(2026, 5, 6, 7, 0, 0, 0, time.UTC)
	recs := make([]account.Record, 12)
	for i := range recs {
		recs[i] = account.Record{RequestID: fmt.Sprintf("gh-f%02d", i), Time: at.Add(time.Duration(i) * time.Minute),
			KeyID: "key_a", Project: "alpha", ProjectID: "proj_1", Model: "chat", Provider: "openai", Status: 200,
			PromptTokens: 10 + i, Cost: 100, LatencyMS: 250, Stream: i%2 == 0, TTFTMS: 40}
	}
	if err := s.WriteFreshRecords(ctx, recs[:4]); err != nil {
		t.Fatal(err)
	}
	// One id stored already, one twice in the batch.
	batch := append(slices.Clone(recs[4:12]), recs[2], recs[7])
	if err := s.WriteFreshRecords(ctx, batch); err != nil {
		t.Fatal(err)
	}
	var records int
	if err := s.pool.QueryRow(ctx, `SELECT count(*) FROM usage_records`).Scan(&records); err != nil {
		t.Fatal(err)
	}
	var requests, prompt, cost int64
	var latency, ttft string
	if err := s.pool.QueryRow(ctx, `SELECT requests, prompt_tokens, cost_micros, latency_hist::text, ttft_hist::text
		FROM usage_hourly`).Scan(&requests, &prompt, &cost, &latency, &ttft); err != nil {
		t.Fatal(err)
	}
	wantPrompt := int64(0)
	for _, r := range recs {
		wantPrompt += int64(r.PromptTokens)
	}
	bucket := account.LatencyBucket(250)
	if records != 12 || requests != 12 || prompt != wantPrompt || cost != 1200 {
		t.Errorf("stored %d records, rollup %d requests %d prompt tokens %d cost; want 12, 12, %d, 1200",
			records, requests, prompt, cost, wantPrompt)
	}
	if want := fmt.Sprintf(`{"%d": 12}`, bucket); latency != want {
		t.Errorf("latency histogram %s, want %s", latency, want)
	}
	if want := fmt.Sprintf(`{"%d": 6}`, account.LatencyBucket(40)); ttft != want {
		t.Errorf("ttft histogram %s, want %s", ttft, want)
	}
}

// TestParallelWrites: a quarter of the pool's connections, one to four.
func TestParallelWrites(t *testing.T) {
	for conns, want := range map[string]int{"": 2, "2": 1, "12": 3, "40": 4} {
		dsn := pgtest.DSN(t, "gh_par_")
		if conns != "" {
			dsn += "&pool_max_conns=" + conns
		}
		s, err := Open(context.Background(), dsn)
		if err != nil {
			t.Fatal(err)
		}
		if got := s.ParallelWrites(); got != want {
			t.Errorf("pool_max_conns=%q: ParallelWrites() = %d, want %d", conns, got, want)
		}
		s.Close()
	}
}

// TestWriteRecordsCopiesFreshBatchesStraight: WriteRecords (a spill's
// replay) copies a batch that repeats no stored request id straight into
// usage_records, as WriteFreshRecords does, and turns to the temporary
// table only for one that does: on a pool of one connection, whose
// session the temporary table would live in, none exists after the
// first batch, and one does after the repeat, which is stored once.
func TestWriteRecordsCopiesFreshBatchesStraight(t *testing.T) {
	ctx := context.Background()
	s, err := Open(ctx, pgtest.DSN(t, "gh_replay_")+"&pool_max_conns=1")
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	at := time.Date(2026, 5, 6, 7, 0, 0, 0, time.UTC)
	recs := make([]account.Record, 6)
	for i := range recs {
		recs[i] = account.Record{RequestID: fmt.Sprintf("gh-r%02d", i), Time: at.Add(time.Duration(i) * time.Second),
			KeyID: "key_a", Project: "alpha", Model: "chat", Provider: "openai", Status: 200, Cost: 100}
	}
	tempTable := func() bool {
		t.Helper()
		var name *string
		if err := s.pool.QueryRow(ctx, `SELECT to_regclass('pg_temp.usage_records_in')::text`).Scan(&name); err != nil {
			t.Fatal(err)
		}
		return name != nil
	}
	if err := s.WriteRecords(ctx, recs[:4]); err != nil {
		t.Fatal(err)
	}
	if tempTable() {
		t.Fatal("a batch of new records went through the temporary table")
	}
	if err := s.WriteRecords(ctx, recs[3:]); err != nil { // recs[3] is stored
		t.Fatal(err)
	}
	if !tempTable() {
		t.Fatal("a batch repeating a stored record was not deduplicated through the temporary table")
	}
	var records, requests, cost int64
	if err := s.pool.QueryRow(ctx, `SELECT (SELECT count(*) FROM usage_records), requests, cost_micros
		FROM usage_hourly`).Scan(&records, &requests, &cost); err != nil {
		t.Fatal(err)
	}
	if records != 6 || requests != 6 || cost != 600 {
		t.Errorf("stored %d records, rollup %d requests %d cost; want 6, 6, 600", records, requests, cost)
	}
}

// TestWriteRecordsUncleanRollupTexts: a batch whose key, project or
// model name holds a NUL byte or invalid UTF-8 is stored, through either
// method, with the names cleaned as COPY cleans them, in the records and
// in the rollup alike. Its rollup's parameters would carry them raw,
// which PostgreSQL refuses; a fresh batch failed so and was spilled, and
// a replayed one would fail each time.
func TestWriteRecordsUncleanRollupTexts(t *testing.T) {
	ctx := context.Background()
	s, err := Open(ctx, pgtest.DSN(t, "gh_unclean_"))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	at := time.Date(2026, 5, 6, 7, 0, 0, 0, time.UTC)
	for i, write := range []func(context.Context, []account.Record) error{s.WriteFreshRecords, s.WriteRecords} {
		batch := []account.Record{
			{RequestID: fmt.Sprintf("gh-u%d-a", i), Time: at, KeyID: "key_a", Project: "p\xffq", Model: "nul\x00model",
				Provider: "openai", Status: 200, Cost: 100},
			{RequestID: fmt.Sprintf("gh-u%d-b", i), Time: at, KeyID: "key_a", Project: "alpha", Model: "chat",
				Provider: "openai", Status: 200, Cost: 100},
		}
		if err := write(ctx, batch); err != nil {
			t.Fatalf("write %d: %v", i, err)
		}
	}
	var records, requests int64
	var model string
	if err := s.pool.QueryRow(ctx, `SELECT (SELECT count(*) FROM usage_records), sum(requests)
		FROM usage_hourly`).Scan(&records, &requests); err != nil {
		t.Fatal(err)
	}
	if err := s.pool.QueryRow(ctx, `SELECT model FROM usage_hourly WHERE project <> 'alpha'`).Scan(&model); err != nil {
		t.Fatal(err)
	}
	if records != 4 || requests != 4 || model != "nulmodel" {
		t.Errorf("stored %d records, rollup %d requests, model %q; want 4, 4, \"nulmodel\"", records, requests, model)
	}
}
