package sqlite

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"gatehouse/internal/account"
	"gatehouse/internal/auth"
	"gatehouse/internal/store/storetest"
)

// BenchmarkUsageQueries times the usage API's queries over ten million
// records (storetest.BenchRecords) in a fresh SQLite file (BENCHMARKS.md).
// Filling takes minutes (the records are moved into batches as an old
// database's are, about a minute a million): run it on purpose, with
// -run '^$' -bench UsageQueries -benchtime 20x, GATEHOUSE_BENCH_RECORDS
// for fewer records.
func BenchmarkUsageQueries(b *testing.B) {
	n := storetest.BenchRecords(b)
	s, err := Open(context.Background(), filepath.Join(b.TempDir(), "bench.db"))
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	ctx := context.Background()
	start := time.Now()
	end := storetest.BenchEnd.UnixMicro()
	step := (30 * 24 * time.Hour).Microseconds() / int64(n)
	// The records go into a table of the shape gatehouse kept them in
	// before migration 0017 (one row each, filled by one statement), the
	// rollup is computed from it, and moveRecordRows moves them into
	// batches of 1,000, as it would an old database's.
	stmts := []string{
		`CREATE TABLE usage_records (request_id TEXT PRIMARY KEY, time INTEGER NOT NULL, endpoint TEXT NOT NULL DEFAULT '',
			key_id TEXT NOT NULL DEFAULT '', project_id TEXT NOT NULL DEFAULT '', project TEXT NOT NULL DEFAULT '',
			customer TEXT NOT NULL DEFAULT '', model TEXT NOT NULL DEFAULT '', served_model TEXT NOT NULL DEFAULT '',
			provider TEXT NOT NULL DEFAULT '', deployment TEXT NOT NULL DEFAULT '', status INTEGER NOT NULL,
			error_kind TEXT NOT NULL DEFAULT '', prompt_tokens INTEGER NOT NULL DEFAULT 0,
			completion_tokens INTEGER NOT NULL DEFAULT 0, cached_tokens INTEGER NOT NULL DEFAULT 0,
			reasoning_tokens INTEGER NOT NULL DEFAULT 0, cost_micros INTEGER NOT NULL DEFAULT 0,
			usage_source TEXT NOT NULL DEFAULT '', latency_ms REAL NOT NULL DEFAULT 0, ttft_ms REAL NOT NULL DEFAULT 0,
			overhead_ms REAL NOT NULL DEFAULT 0, cache TEXT NOT NULL DEFAULT '', attempts INTEGER NOT NULL DEFAULT 0,
			stream INTEGER NOT NULL DEFAULT 0, labels TEXT NOT NULL DEFAULT '{}', request_body TEXT, response_body TEXT,
			saved_micros INTEGER NOT NULL DEFAULT 0)`,
		`CREATE TABLE usage_records_moved (last_rowid INTEGER NOT NULL)`,
		`INSERT INTO usage_records_moved VALUES (0)`,
		`WITH RECURSIVE c(i) AS (SELECT 0 UNION ALL SELECT i + 1 FROM c WHERE i + 1 < ?)
		INSERT INTO usage_records (request_id, time, endpoint, key_id, project_id, project, customer, model, served_model,
			provider, deployment, status, error_kind, prompt_tokens, completion_tokens, cached_tokens, cost_micros,
			usage_source, latency_ms, ttft_ms, overhead_ms, cache, attempts, stream)
		SELECT 'gh-' || i, ? - i * ?, '/v1/chat/completions', 'key_' || (i % 500), 'proj_' || (i % 50), 'p' || (i % 50),
			'c' || (i % 5000),
			CASE i % 8 WHEN 0 THEN 'gpt-4o-mini' WHEN 1 THEN 'gpt-4o' WHEN 2 THEN 'claude-sonnet-4-5' WHEN 3 THEN 'claude-haiku-4-5'
				WHEN 4 THEN 'gemini-2.5-flash' WHEN 5 THEN 'llama-3.3-70b' WHEN 6 THEN 'o3-mini' ELSE 'text-embedding-3-small' END,
			'm', CASE i % 5 WHEN 0 THEN 'openai' WHEN 1 THEN 'anthropic' WHEN 2 THEN 'gemini' WHEN 3 THEN 'groq' ELSE 'box' END, '',
			CASE WHEN i % 50 = 0 THEN 429 ELSE 200 END, CASE WHEN i % 50 = 0 THEN 'rate_limit' ELSE '' END,
			i % 2000, i % 700, i % 300, CASE WHEN i % 50 = 0 THEN 0 ELSE i % 9000 END, 'reported',
			100 + i % 900, CASE WHEN i % 2 = 0 THEN 20 + i % 400 ELSE 0 END, 0.2, 'bypass', 1, i % 2 = 0
		FROM c`,
		`INSERT INTO usage_hourly (hour, key_id, project, model, provider, project_id, requests, errors, prompt_tokens,
			completion_tokens, cached_tokens, cost_micros, cache_hits)
		SELECT time - time % 3600000000, key_id, project, model, provider, max(project_id), count(*), sum(status >= 400),
			sum(prompt_tokens), sum(completion_tokens), sum(cached_tokens), sum(cost_micros), sum(cache IN ('hit', 'semantic'))
		FROM usage_records GROUP BY 1, 2, 3, 4, 5`,
		`UPDATE usage_hourly SET latency_hist = h.latency, ttft_hist = h.ttft FROM (
			SELECT hour, key_id, project, model, provider,
				coalesce(json_group_object(bucket, n) FILTER (WHERE metric = 'latency'), '{}') AS latency,
				coalesce(json_group_object(bucket, n) FILTER (WHERE metric = 'ttft'), '{}') AS ttft
			FROM (SELECT hour, key_id, project, model, provider, metric, ` + account.LatencyBucketSQL("v") + ` AS bucket,
					count(*) AS n
				FROM (SELECT time - time % 3600000000 AS hour, key_id, project, model, provider, 'latency' AS metric,
						latency_ms AS v FROM usage_records
					UNION ALL SELECT time - time % 3600000000, key_id, project, model, provider, 'ttft', ttft_ms
						FROM usage_records WHERE stream AND ttft_ms > 0)
				GROUP BY 1, 2, 3, 4, 5, 6, 7)
			GROUP BY 1, 2, 3, 4, 5) AS h
		WHERE usage_hourly.hour = h.hour AND usage_hourly.key_id = h.key_id AND usage_hourly.project = h.project
			AND usage_hourly.model = h.model AND usage_hourly.provider = h.provider`,
	}
	for _, q := range stmts {
		var err error
		if q[0] == 'W' {
			_, err = s.w.ExecContext(ctx, q, n, end, step)
		} else {
			_, err = s.w.ExecContext(ctx, q)
		}
		if err != nil {
			b.Fatalf("fill: %v", err)
		}
	}
	moving := time.Now()
	if err := s.moveRecordRows(ctx, newMoveLog(nil, 0)); err != nil {
		b.Fatalf("move: %v", err)
	}
	b.Logf("%d records moved into batches in %v", n, time.Since(moving).Round(time.Second))
	if _, err := s.w.ExecContext(ctx, `ANALYZE`); err != nil {
		b.Fatal(err)
	}
	b.Logf("%d records stored and indexed in %v", n, time.Since(start).Round(time.Second))
	b.ResetTimer()
	storetest.BenchUsageQueries(b, s, n)
}

// BenchmarkWriteRecords: WriteRecords on batches of 1,000 varied records
// (storetest.BenchWriteRecords; BENCHMARKS.md).
func BenchmarkWriteRecords(b *testing.B) {
	s, err := Open(context.Background(), filepath.Join(b.TempDir(), "bench.db"))
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	storetest.BenchWriteRecords(b, s)
}

// BenchmarkWriteBatches: WriteRecords on batches of 4 (about what the
// sink writes per 200 ms tick under callgrind), 100 and 1,000 records,
// to count what a record costs at a fixed batch size (BENCHMARKS.md).
func BenchmarkWriteBatches(b *testing.B) {
	benchWriteBatches(b, func(s *Store) auth.Store { return s })
}

// BenchmarkWriteFreshBatches is BenchmarkWriteBatches through
// WriteFreshRecords, the path the sink's batches take (no look for the
// batch's request ids among the stored records).
func BenchmarkWriteFreshBatches(b *testing.B) {
	benchWriteBatches(b, func(s *Store) auth.Store { return freshStore{s} })
}

// benchWriteBatches runs storetest.BenchWriteBatches at each batch size
// on a fresh database, through the store as, given the opened one.
func benchWriteBatches(b *testing.B, as func(*Store) auth.Store) {
	for _, size := range []int{4, 100, 1000} {
		b.Run(fmt.Sprintf("batch=%d", size), func(b *testing.B) {
			s, err := Open(context.Background(), filepath.Join(b.TempDir(), "bench.db"))
			if err != nil {
				b.Fatal(err)
			}
			defer s.Close()
			storetest.BenchWriteBatches(b, as(s), size)
		})
	}
}

// freshStore writes its batches with WriteFreshRecords.
type freshStore struct{ *Store }

func (f freshStore) WriteRecords(ctx context.Context, rs []account.Record) error {
	return f.WriteFreshRecords(ctx, rs)
}
