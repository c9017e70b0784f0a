package postgres

import (
	"context"
	"strings"
	"testing"
	"time"

	"gatehouse/internal/account"
	"gatehouse/internal/store/postgres/pgtest"
	"gatehouse/internal/store/storetest"
)

// BenchmarkUsageQueries times the usage API's queries over ten million
// records (storetest.BenchRecords) in a fresh schema (BENCHMARKS.md).
// Filling takes minutes: run it on purpose, with -run '^$' -bench
// UsageQueries -benchtime 20x.
func BenchmarkUsageQueries(b *testing.B) {
	n := storetest.BenchRecords(b)
	s, err := Open(context.Background(), pgtest.DSN(b, "gh_bench_"))
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	ctx := context.Background()
	start := time.Now()
	// Indexes are built after the rows, as a bulk load would, and the
	// hourly rollup is filled from them in one statement.
	stmts := []string{
		`DROP INDEX usage_records_time, usage_records_key, usage_records_customer, usage_records_model, usage_records_provider`,
		`INSERT INTO usage_records (request_id, time, endpoint, key_id, project_id, project, customer, model, served_model,
			provider, deployment, status, error_kind, prompt_tokens, completion_tokens, cached_tokens, cost_micros,
			usage_source, latency_ms, ttft_ms, overhead_ms, cache, attempts, stream)
		SELECT 'gh-' || i, $1::timestamptz - make_interval(secs => i * $2::double precision), '/v1/chat/completions',
			'key_' || (i % 500), 'proj_' || (i % 50), 'p' || (i % 50), 'c' || (i % 5000),
			(ARRAY['gpt-4o-mini','gpt-4o','claude-sonnet-4-5','claude-haiku-4-5','gemini-2.5-flash','llama-3.3-70b','o3-mini','text-embedding-3-small'])[i % 8 + 1],
			'm', (ARRAY['openai','anthropic','gemini','groq','box'])[i % 5 + 1], '',
			CASE WHEN i % 50 = 0 THEN 429 ELSE 200 END, CASE WHEN i % 50 = 0 THEN 'rate_limit' ELSE '' END,
			i % 2000, i % 700, i % 300, CASE WHEN i % 50 = 0 THEN 0 ELSE i % 9000 END, 'reported',
			100 + i % 900, CASE WHEN i % 2 = 0 THEN 20 + i % 400 ELSE 0 END, 0.2, 'bypass', 1, i % 2 = 0
		FROM generate_series(0, $3::int - 1) i`,
		`INSERT INTO usage_hourly (hour, key_id, project, model, provider, project_id, requests, errors, prompt_tokens,
			completion_tokens, cached_tokens, cost_micros, cache_hits)
		SELECT date_bin('1 hour', time, '2000-01-01 00:00:00+00'), key_id, project, model, provider, max(project_id), count(*),
			count(*) FILTER (WHERE status >= 400), sum(prompt_tokens), sum(completion_tokens), sum(cached_tokens),
			sum(cost_micros), count(*) FILTER (WHERE cache IN ('hit', 'semantic'))
		FROM usage_records GROUP BY 1, 2, 3, 4, 5`,
		`UPDATE usage_hourly AS u SET latency_hist = h.latency, ttft_hist = h.ttft FROM (
			SELECT hour, key_id, project, model, provider,
				coalesce(json_object_agg(bucket, n) FILTER (WHERE metric = 'latency'), '{}') AS latency,
				coalesce(json_object_agg(bucket, n) FILTER (WHERE metric = 'ttft'), '{}') AS ttft
			FROM (SELECT date_bin('1 hour', r.time, '2000-01-01 00:00:00+00') AS hour, r.key_id, r.project, r.model,
					r.provider, m.metric, width_bucket(m.v, $1::double precision[]) AS bucket, count(*) AS n
				FROM usage_records r CROSS JOIN LATERAL (VALUES ('latency', r.latency_ms),
					('ttft', CASE WHEN r.stream AND r.ttft_ms > 0 THEN r.ttft_ms END)) AS m (metric, v)
				WHERE m.v IS NOT NULL GROUP BY 1, 2, 3, 4, 5, 6, 7) AS b
			GROUP BY 1, 2, 3, 4, 5) AS h
		WHERE u.hour = h.hour AND u.key_id = h.key_id AND u.project = h.project AND u.model = h.model
			AND u.provider = h.provider`,
		`CREATE INDEX usage_records_time ON usage_records (time, request_id)`,
		`CREATE INDEX usage_records_key ON usage_records (key_id, time)`,
		`CREATE INDEX usage_records_customer ON usage_records (customer, time) WHERE customer <> ''`,
		`CREATE INDEX usage_records_model ON usage_records (model, time)`,
		`CREATE INDEX usage_records_provider ON usage_records (provider, time)`,
		`ANALYZE usage_records`, `ANALYZE usage_hourly`,
	}
	for i, q := range stmts {
		var err error
		switch {
		case i == 1:
			_, err = s.pool.Exec(ctx, q, storetest.BenchEnd, (30*24*time.Hour).Seconds()/float64(n), n)
		case strings.Contains(q, "width_bucket"):
			_, err = s.pool.Exec(ctx, q, account.LatencyBounds())
		default:
			_, err = s.pool.Exec(ctx, q)
		}
		if err != nil {
			b.Fatalf("fill: %v", err)
		}
	}
	b.Logf("%d records stored and indexed in %v", n, time.Since(start).Round(time.Second))
	b.ResetTimer()
	storetest.BenchUsageQueries(b, s, n)
}

// BenchmarkWriteRecords: WriteRecords on batches of 1,000 varied records
// (storetest.BenchWriteRecords; BENCHMARKS.md).
func BenchmarkWriteRecords(b *testing.B) {
	s, err := Open(context.Background(), pgtest.DSN(b, "gh_bench_"))
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	storetest.BenchWriteRecords(b, s)
}
