package sqlite

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"gatehouse/internal/account"
)

// Bucket widths in Unix microseconds: times are stored as such, so a
// bucket is integer arithmetic the time index can feed.
var bucketMicros = map[account.Interval]int64{
	account.IntervalMinute: int64(time.Minute / time.Microsecond),
	account.IntervalHour:   int64(time.Hour / time.Microsecond),
	account.IntervalDay:    int64(24 * time.Hour / time.Microsecond),
}

// filterSQL appends the WHERE clause of f to b and its arguments to args.
func filterSQL(b *strings.Builder, args []any, f account.Filter) []any {
	return filterOn(b, args, f, "time")
}

// filterOn is filterSQL with the window on column timeCol (the rollup's
// is "hour").
func filterOn(b *strings.Builder, args []any, f account.Filter, timeCol string) []any {
	b.WriteString(" WHERE 1=1")
	if !f.From.IsZero() {
		b.WriteString(" AND " + timeCol + " >= ?")
		args = append(args, unixMicros(f.From))
	}
	if !f.To.IsZero() {
		b.WriteString(" AND " + timeCol + " < ?")
		args = append(args, unixMicros(f.To))
	}
	for _, c := range account.FilterColumns(f) {
		switch c.Column {
		case "project":
			b.WriteString(" AND (project = ? OR project_id = ?)")
			args = append(args, c.Value, c.Value)
			continue
		case "customer":
			// The literal term lets the records' partial customer index
			// (migration 0015) serve the filter; the rollup has no
			// customer, so this never reaches it.
			b.WriteString(" AND customer = ? AND customer <> ''")
			args = append(args, c.Value)
			continue
		}
		b.WriteString(" AND " + c.Column + " = ?")
		args = append(args, c.Value)
	}
	return args
}

// Usage implements account.Querier: the whole hours of the window from
// the hourly rollup, the partial hours at its edges (and questions the
// rollup cannot answer) from the records.
func (s *Store) Usage(ctx context.Context, q account.UsageQuery) ([]account.UsageRow, error) {
	return account.AnswerUsage(ctx, q, s.usageRecords, s.usageRollup)
}

// groupAndBucket are the SQL expressions of q's group and time bucket
// over a table whose time column is timeCol.
func groupAndBucket(q account.UsageQuery, timeCol string) (group, bucket string) {
	group, bucket = "''", "0"
	if q.GroupBy != account.GroupNone {
		group = account.GroupColumn(q.GroupBy)
	}
	if w, ok := bucketMicros[q.Interval]; ok {
		bucket = fmt.Sprintf("%s - %s %% %d", timeCol, timeCol, w)
	}
	return group, bucket
}

// usageRollup adds up the rollup's rows of q's window (whole hours). It
// reads them one by one and adds them up in Go: the latency histograms
// (JSON objects) do not add up in SQL, and SQLite groups by sorting,
// which costs more than a map.
func (s *Store) usageRollup(ctx context.Context, q account.UsageQuery) ([]account.UsageRow, error) {
	group, bucket := groupAndBucket(q, "hour")
	var b strings.Builder
	b.WriteString(`SELECT ` + group + `, ` + bucket + `, requests, errors, prompt_tokens, completion_tokens, cached_tokens,
		cost_micros, cache_hits, latency_hist, ttft_hist FROM usage_hourly`)
	if q.Key == "" {
		// The hours by the primary key. Once ANALYZE has run, SQLite may
		// rather skip-scan usage_hourly_key (key_id, hour) over every key
		// and seek each entry's row: four times slower over a day of
		// BenchmarkUsageQueries' rollup.
		b.WriteString(" INDEXED BY sqlite_autoindex_usage_hourly_1")
	}
	args := filterOn(&b, nil, q.Filter, "hour")
	rows, err := s.r.QueryContext(ctx, b.String(), args...)
	if err != nil {
		return nil, fmt.Errorf("sqlite: usage: %w", err)
	}
	defer rows.Close()
	var sums account.UsageSums
	for rows.Next() {
		var r account.UsageRow
		var bucketAt, cost int64
		var latency, ttft string
		if err := rows.Scan(&r.Group, &bucketAt, &r.Requests, &r.Errors, &r.PromptTokens, &r.CompletionTokens,
			&r.CachedTokens, &cost, &r.CacheHits, &latency, &ttft); err != nil {
			return nil, fmt.Errorf("sqlite: usage: %w", err)
		}
		r.Cost = account.Micros(cost)
		if q.Interval != account.IntervalNone {
			r.Bucket = time.UnixMicro(bucketAt).UTC()
		}
		if err := sums.AddRollup(&r, latency, ttft); err != nil {
			return nil, fmt.Errorf("sqlite: usage: %w", err)
		}
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("sqlite: usage: %w", err)
	}
	return sums.Rows(), nil
}

// usageRecords aggregates the records themselves, by group, time bucket
// and latency buckets (account.LatencyBucketSQL: the buckets the rollup
// counts in), and adds up the rows of each group and time bucket in Go.
func (s *Store) usageRecords(ctx context.Context, q account.UsageQuery) ([]account.UsageRow, error) {
	query, args := usageRecordsSQL(q)
	rows, err := s.r.QueryContext(ctx, query, args...)
	if err != nil {
		return nil, fmt.Errorf("sqlite: usage: %w", err)
	}
	defer rows.Close()
	var sums account.UsageSums
	for rows.Next() {
		var p account.UsagePartial
		var bucketAt, cost int64
		if err := rows.Scan(&p.Group, &bucketAt, &p.LatencyBucket, &p.TTFTBucket, &p.Samples, &p.Requests, &p.Errors,
			&p.PromptTokens, &p.CompletionTokens, &p.CachedTokens, &cost, &p.CacheHits); err != nil {
			return nil, fmt.Errorf("sqlite: usage: %w", err)
		}
		p.Cost = account.Micros(cost)
		if q.Interval != account.IntervalNone {
			p.Bucket = time.UnixMicro(bucketAt).UTC()
		}
		sums.AddPartial(&p)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("sqlite: usage: %w", err)
	}
	return sums.Rows(), nil
}

// usageRecordsSQL is usageRecords' query and its arguments.
func usageRecordsSQL(q account.UsageQuery) (string, []any) {
	group, bucket := groupAndBucket(q, "time")
	var b strings.Builder
	b.WriteString(`SELECT ` + group + `, ` + bucket + `, ` + account.LatencyBucketSQL("latency_ms") + `,
		CASE WHEN stream AND ttft_ms > 0 THEN ` + account.LatencyBucketSQL("ttft_ms") + ` ELSE -1 END,
		count(*), count(*), coalesce(sum(status >= 400), 0),
		coalesce(sum(prompt_tokens), 0), coalesce(sum(completion_tokens), 0), coalesce(sum(cached_tokens), 0),
		coalesce(sum(cost_micros), 0), coalesce(sum(cache IN ('hit', 'semantic')), 0) FROM usage_records`)
	args := filterSQL(&b, nil, q.Filter)
	b.WriteString(" GROUP BY 1, 2, 3, 4")
	return b.String(), args
}

// recordCols are the columns a Record is scanned from, in scanRecord's
// order.
const recordCols = `request_id, time, endpoint, key_id, project_id, project, customer, model, served_model, provider,
	deployment, status, error_kind, prompt_tokens, completion_tokens, cached_tokens, reasoning_tokens, cost_micros,
	usage_source, latency_ms, ttft_ms, overhead_ms, cache, attempts, stream, labels,
	coalesce(request_body, ''), coalesce(response_body, ''), saved_micros`

func scanRecord(sc scanner) (account.Record, error) {
	var r account.Record
	var at, cost, saved int64
	var labels string
	err := sc.Scan(&r.RequestID, &at, &r.Endpoint, &r.KeyID, &r.ProjectID, &r.Project, &r.Customer, &r.Model,
		&r.ServedModel, &r.Provider, &r.Deployment, &r.Status, &r.ErrorKind, &r.PromptTokens, &r.CompletionTokens,
		&r.CachedTokens, &r.ReasoningTokens, &cost, &r.UsageSource, &r.LatencyMS, &r.TTFTMS, &r.OverheadMS, &r.Cache,
		&r.Attempts, &r.Stream, &labels, &r.RequestBody, &r.ResponseBody, &saved)
	if err != nil {
		return r, err
	}
	r.Time, r.Cost = time.UnixMicro(at).UTC(), account.Micros(cost)
	r.Saved = account.Micros(saved)
	if labels != "" && labels != "{}" {
		if err := json.Unmarshal([]byte(labels), &r.Labels); err != nil {
			return r, fmt.Errorf("labels: %w", err)
		}
	}
	return r, nil
}

// Logs implements account.Querier: newest first, keyset-paged on
// (time, request_id).
func (s *Store) Logs(ctx context.Context, q account.LogQuery) (account.LogPage, error) {
	query, args, err := logsSQL(q)
	if err != nil {
		return account.LogPage{}, err
	}
	rows, err := s.r.QueryContext(ctx, query, args...)
	if err != nil {
		return account.LogPage{}, fmt.Errorf("sqlite: logs: %w", err)
	}
	defer rows.Close()
	page := account.LogPage{Records: []account.Record{}}
	for rows.Next() {
		r, err := scanRecord(rows)
		if err != nil {
			return account.LogPage{}, fmt.Errorf("sqlite: logs: %w", err)
		}
		page.Records = append(page.Records, r)
	}
	if err := rows.Err(); err != nil {
		return account.LogPage{}, fmt.Errorf("sqlite: logs: %w", err)
	}
	return account.Paginate(page.Records, q.Limit), nil
}

// logsSQL is Logs' query (a page and one record more) and its
// arguments.
func logsSQL(q account.LogQuery) (string, []any, error) {
	var b strings.Builder
	b.WriteString("SELECT " + recordCols + " FROM usage_records")
	args := filterSQL(&b, nil, q.Filter)
	if q.Cursor != "" {
		at, id, err := account.DecodeCursor(q.Cursor)
		if err != nil {
			return "", nil, err
		}
		b.WriteString(" AND (time, request_id) < (?, ?)")
		args = append(args, unixMicros(at), id)
	}
	b.WriteString(" ORDER BY time DESC, request_id DESC LIMIT ?")
	args = append(args, q.Limit+1)
	return b.String(), args, nil
}

// Record implements account.Querier.
func (s *Store) Record(ctx context.Context, requestID string) (account.Record, error) {
	r, err := scanRecord(s.r.QueryRowContext(ctx, "SELECT "+recordCols+" FROM usage_records WHERE request_id = ?", requestID))
	if errors.Is(err, sql.ErrNoRows) {
		return r, account.ErrNotFound
	}
	if err != nil {
		return r, fmt.Errorf("sqlite: record: %w", err)
	}
	return r, nil
}

var _ account.Querier = (*Store)(nil)
