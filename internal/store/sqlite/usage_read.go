package sqlite

import (
	"context"
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

// filterOn appends the WHERE clause of f to b and its arguments to args,
// the window on column timeCol (the rollup's is "hour").
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

var _ account.Querier = (*Store)(nil)
