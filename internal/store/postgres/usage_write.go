package postgres

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"gatehouse/internal/account"
)

// copySQL copies a batch into the temporary table, the columns in the
// order appendCopyRow writes them.
const copySQL = `COPY usage_records_in` + copyColumns

// copyColumns are the columns of a COPY of records, in the order
// appendCopyRow writes them.
const copyColumns = ` (request_id, time, endpoint, key_id, project_id, project, customer, model,
	served_model, provider, deployment, status, error_kind, prompt_tokens, completion_tokens, cached_tokens,
	reasoning_tokens, cost_micros, usage_source, latency_ms, ttft_ms, overhead_ms, cache, attempts, stream,
	labels, request_body, response_body, saved_micros) FROM STDIN`

// moveSQL moves the copied batch into usage_records and adds the records
// it really inserted (RETURNING) to the hourly rollup: their sums, and
// the counts of their latency buckets ($1, account.LatencyBounds, as
// width_bucket numbers them) merged into the rows' histograms by
// usage_hist_add (migration 0010). One statement, so records and rollup
// change together.
const moveSQL = `WITH ins AS (
		INSERT INTO usage_records SELECT * FROM usage_records_in ON CONFLICT (request_id) DO NOTHING
		RETURNING date_bin('1 hour', time, '2000-01-01 00:00:00+00') AS hour, key_id, project_id, project, model,
			provider, status, prompt_tokens, completion_tokens, cached_tokens, cost_micros, cache, latency_ms, ttft_ms,
			stream),
	buckets AS (
		SELECT hour, key_id, project, model, provider, m.metric, width_bucket(m.v, $1::double precision[]) AS bucket,
			count(*) AS n
		FROM ins CROSS JOIN LATERAL (VALUES ('latency', latency_ms),
			('ttft', CASE WHEN stream AND ttft_ms > 0 THEN ttft_ms END)) AS m (metric, v)
		WHERE m.v IS NOT NULL
		GROUP BY 1, 2, 3, 4, 5, 6, 7),
	hists AS (
		SELECT hour, key_id, project, model, provider,
			coalesce(json_object_agg(bucket, n) FILTER (WHERE metric = 'latency'), '{}') AS latency,
			coalesce(json_object_agg(bucket, n) FILTER (WHERE metric = 'ttft'), '{}') AS ttft
		FROM buckets GROUP BY 1, 2, 3, 4, 5),
	sums AS (
		SELECT hour, key_id, project, model, provider, max(project_id) AS project_id, count(*) AS requests,
			count(*) FILTER (WHERE status >= 400) AS errors, sum(prompt_tokens) AS prompt_tokens,
			sum(completion_tokens) AS completion_tokens, sum(cached_tokens) AS cached_tokens,
			sum(cost_micros) AS cost_micros, count(*) FILTER (WHERE cache IN ('hit', 'semantic')) AS cache_hits
		FROM ins GROUP BY 1, 2, 3, 4, 5)
	INSERT INTO usage_hourly AS h (hour, key_id, project, model, provider, project_id, requests, errors,
		prompt_tokens, completion_tokens, cached_tokens, cost_micros, cache_hits, latency_hist, ttft_hist)
	SELECT hour, key_id, project, model, provider, project_id, requests, errors, prompt_tokens, completion_tokens,
		cached_tokens, cost_micros, cache_hits, latency, ttft
	FROM sums JOIN hists USING (hour, key_id, project, model, provider)
	` + rollupConflict

// rollupConflict adds a batch's row of usage_hourly to the row stored for
// the same hour and combination.
const rollupConflict = `ON CONFLICT (hour, key_id, project, model, provider) DO UPDATE SET
		requests = h.requests + excluded.requests, errors = h.errors + excluded.errors,
		prompt_tokens = h.prompt_tokens + excluded.prompt_tokens,
		completion_tokens = h.completion_tokens + excluded.completion_tokens,
		cached_tokens = h.cached_tokens + excluded.cached_tokens,
		cost_micros = h.cost_micros + excluded.cost_micros, cache_hits = h.cache_hits + excluded.cache_hits,
		latency_hist = usage_hist_add(h.latency_hist, excluded.latency_hist),
		ttft_hist = CASE excluded.ttft_hist::text WHEN '{}' THEN h.ttft_hist
			ELSE usage_hist_add(h.ttft_hist, excluded.ttft_hist) END`

// copyFreshSQL copies a fresh batch straight into usage_records.
const copyFreshSQL = `COPY usage_records` + copyColumns

// rollupSQL adds account.Rollup's rows, one array per column, to
// usage_hourly.
const rollupSQL = `INSERT INTO usage_hourly AS h (hour, key_id, project, model, provider, project_id, requests, errors,
		prompt_tokens, completion_tokens, cached_tokens, cost_micros, cache_hits, latency_hist, ttft_hist)
	SELECT hour, key_id, project, model, provider, project_id, requests, errors, prompt_tokens, completion_tokens,
		cached_tokens, cost_micros, cache_hits, latency::json, ttft::json
	FROM unnest($1::timestamptz[], $2::text[], $3::text[], $4::text[], $5::text[], $6::text[], $7::bigint[],
		$8::bigint[], $9::bigint[], $10::bigint[], $11::bigint[], $12::bigint[], $13::bigint[], $14::text[], $15::text[])
		AS r (hour, key_id, project, model, provider, project_id, requests, errors, prompt_tokens, completion_tokens,
			cached_tokens, cost_micros, cache_hits, latency, ttft)
	` + rollupConflict

// WriteRecords implements account.RecordStore. The batches it is given
// are the spill file's, replayed, and nearly all of them were never in
// the database: records that found the sink's queue full, or batches
// spilled while the database was down. So it copies a batch straight
// into usage_records and adds its rollup, summed in Go (account.Rollup),
// to usage_hourly by one statement; only a batch that repeats a stored
// request id (a write of unknown outcome, replayed), or holds one twice,
// fails that COPY on the primary key and goes through writeDeduplicated.
// Replays through writeDeduplicated alone cost PostgreSQL about twice
// what a fresh batch does (its temporary table, second insert with the
// conflict check and rollup grouped in SQL), and they come exactly when
// the database is behind: in the load benchmark a database that fell
// behind had a quarter of the records spilled, and their replays were a
// third of its work (BENCHMARKS.md, "Spilled records replayed as fresh
// ones", and "Cluster mode's spill" for the fresh path's saving).
//
// A batch whose rollup texts PostgreSQL cannot take as they are (a NUL
// byte or invalid UTF-8 in a key, project or model name: a client names
// the model) goes to writeDeduplicated at once, whose rollup is grouped
// in SQL from the rows as COPY cleaned them; the rollup's parameters
// would carry them raw, and the write failed, over and over if a replay.
func (s *Store) WriteRecords(ctx context.Context, rs []account.Record) error {
	if len(rs) == 0 {
		return nil
	}
	buf, err := copyRows(rs)
	if err != nil {
		return fmt.Errorf("postgres: write usage records: %w", err)
	}
	if !rollupTextsClean(rs) {
		return s.writeDeduplicated(ctx, buf)
	}
	rollup := rollupArgs(account.Rollup(rs, nil))
	err = pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		if _, err := tx.Conn().PgConn().CopyFrom(ctx, bytes.NewReader(buf), copyFreshSQL); err != nil {
			return err
		}
		_, err := tx.Exec(ctx, rollupSQL, rollup...)
		return err
	})
	if pe := (*pgconn.PgError)(nil); errors.As(err, &pe) && pe.Code == "23505" { // unique_violation
		return s.writeDeduplicated(ctx, buf)
	}
	if err != nil {
		return fmt.Errorf("postgres: write usage records: %w", err)
	}
	return nil
}

// WriteFreshRecords implements account.FreshRecordStore: the sink's
// batches from its queue, never handed to the store before, are written
// as WriteRecords writes every batch.
func (s *Store) WriteFreshRecords(ctx context.Context, rs []account.Record) error {
	return s.WriteRecords(ctx, rs)
}

// writeDeduplicated writes a batch (buf, its rows in COPY's text format)
// that may repeat stored request ids: copied into a temporary table and
// moved into usage_records with ON CONFLICT DO NOTHING in the same
// transaction, the rollup summed from the rows really inserted, so a
// replayed batch never duplicates a record, and COPY keeps its speed
// (COPY itself cannot skip conflicts).
func (s *Store) writeDeduplicated(ctx context.Context, buf []byte) error {
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `CREATE TEMP TABLE IF NOT EXISTS usage_records_in
			(LIKE usage_records INCLUDING DEFAULTS) ON COMMIT DELETE ROWS`); err != nil {
			return err
		}
		if _, err := tx.Conn().PgConn().CopyFrom(ctx, bytes.NewReader(buf), copySQL); err != nil {
			return err
		}
		_, err := tx.Exec(ctx, moveSQL, account.LatencyBounds())
		return err
	})
	if err != nil {
		return fmt.Errorf("postgres: write usage records: %w", err)
	}
	return nil
}

// ParallelWrites implements account.ParallelRecordStore: a quarter of
// the pool's connections, at most four, so that a backlog of records
// never holds the connections the rest of the store needs. Two batches
// at once, with the default pool, where one writer waited out each
// batch's round trips and commit alone: in the load benchmark, where
// PostgreSQL shares a CPU with the load, a batch took 150 ms to 2 s
// and the one writer fell behind (BENCHMARKS.md, "Cluster mode's
// spill").
func (s *Store) ParallelWrites() int {
	return int(min(max(s.pool.Config().MaxConns/4, 1), 4))
}

// rollupTextsClean reports whether the texts of rs that rollupArgs
// passes as parameters are all as PostgreSQL's text takes them.
func rollupTextsClean(rs []account.Record) bool {
	for i := range rs {
		r := &rs[i]
		if !pgText(r.KeyID) || !pgText(r.Project) || !pgText(r.Model) || !pgText(r.Provider) || !pgText(r.ProjectID) {
			return false
		}
	}
	return true
}

// pgText reports whether PostgreSQL's text takes s as it is: no NUL
// byte, valid UTF-8. ASCII without NUL, nearly every name, is one pass.
func pgText(s string) bool {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c == 0 || c >= utf8.RuneSelf {
			return strings.IndexByte(s, 0) < 0 && utf8.ValidString(s)
		}
	}
	return true
}

// copyRows is rs in COPY's text format.
func copyRows(rs []account.Record) ([]byte, error) {
	buf := make([]byte, 0, len(rs)*320)
	for i := range rs {
		var err error
		if buf, err = appendCopyRow(buf, &rs[i]); err != nil {
			return nil, err
		}
	}
	return buf, nil
}

// rollupArgs are rollupSQL's arguments: rows, a column at a time.
func rollupArgs(rows []account.RollupRow) []any {
	n := len(rows)
	hours := make([]time.Time, n)
	texts := make([][]string, 7) // key, project, model, provider, project id, latency, ttft
	for i := range texts {
		texts[i] = make([]string, n)
	}
	sums := make([][]int64, 7) // requests, errors, prompt, completion, cached, cost, hits
	for i := range sums {
		sums[i] = make([]int64, n)
	}
	var hist []byte
	for i := range rows {
		r := &rows[i]
		hours[i] = time.UnixMicro(r.Hour).UTC()
		texts[0][i], texts[1][i], texts[2][i], texts[3][i], texts[4][i] = r.KeyID, r.Project, r.Model, r.Provider, r.ProjectID
		hist = r.Latency.AppendJSON(hist[:0])
		texts[5][i] = string(hist)
		hist = r.TTFT.AppendJSON(hist[:0])
		texts[6][i] = string(hist)
		for j, v := range [...]int64{r.Requests, r.Errors, r.Prompt, r.Completion, r.Cached, r.Cost, r.Hits} {
			sums[j][i] = v
		}
	}
	return []any{hours, texts[0], texts[1], texts[2], texts[3], texts[4], sums[0], sums[1], sums[2], sums[3],
		sums[4], sums[5], sums[6], texts[5], texts[6]}
}

// PruneRecords implements account.RecordStore.
func (s *Store) PruneRecords(ctx context.Context, before time.Time, limit int) (int, error) {
	tag, err := s.pool.Exec(ctx, `DELETE FROM usage_records WHERE request_id IN
		(SELECT request_id FROM usage_records WHERE time < $1 ORDER BY time LIMIT $2)`, before.UTC(), limit)
	if err != nil {
		return 0, fmt.Errorf("postgres: prune usage records: %w", err)
	}
	// The rollup's hours that lie wholly before the cut go too.
	if _, err := s.pool.Exec(ctx, `DELETE FROM usage_hourly WHERE hour < date_bin('1 hour', $1::timestamptz, '2000-01-01 00:00:00+00')`, before.UTC()); err != nil {
		return 0, fmt.Errorf("postgres: prune usage rollup: %w", err)
	}
	return int(tag.RowsAffected()), nil
}

var (
	_ account.FreshRecordStore    = (*Store)(nil)
	_ account.ParallelRecordStore = (*Store)(nil)
)
