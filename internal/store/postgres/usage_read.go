package postgres

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"gatehouse/internal/account"
)

// bucketWidths are date_bin strides: they bin timestamptz values on UTC
// boundaries whatever the session's time zone.
var bucketWidths = map[account.Interval]string{
	account.IntervalMinute: "1 minute",
	account.IntervalHour:   "1 hour",
	account.IntervalDay:    "1 day",
}

// filterSQL appends the WHERE clause of f to b and its arguments to args
// ($n placeholders numbered after the arguments already there).
func filterSQL(b *strings.Builder, args []any, f account.Filter) []any {
	return filterOn(b, args, f, "time")
}

// filterOn is filterSQL with the window on column timeCol (the rollup's
// is "hour").
func filterOn(b *strings.Builder, args []any, f account.Filter, timeCol string) []any {
	arg := func(v any) string {
		args = append(args, v)
		return "$" + strconv.Itoa(len(args))
	}
	b.WriteString(" WHERE true")
	if !f.From.IsZero() {
		b.WriteString(" AND " + timeCol + " >= " + arg(f.From.UTC()))
	}
	if !f.To.IsZero() {
		b.WriteString(" AND " + timeCol + " < " + arg(f.To.UTC()))
	}
	for _, c := range account.FilterColumns(f) {
		if c.Column == "project" {
			p := arg(c.Value)
			b.WriteString(" AND (project = " + p + " OR project_id = " + p + ")")
			continue
		}
		b.WriteString(" AND " + c.Column + " = " + arg(c.Value))
		if c.Column == "customer" {
			// Never true of '' (FilterColumns leaves out empty
			// values): the term that lets usage_records_customer,
			// which holds only the records naming a customer, serve
			// the query (migration 0015).
			b.WriteString(" AND customer <> ''")
		}
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
	group, bucket = "''", "'epoch'::timestamptz"
	if q.GroupBy != account.GroupNone {
		group = account.GroupColumn(q.GroupBy)
	}
	if w, ok := bucketWidths[q.Interval]; ok {
		bucket = "date_bin('" + w + "', " + timeCol + ", '2000-01-01 00:00:00+00')"
	}
	return group, bucket
}

// usageRollup aggregates the rollup's rows of q's window (whole hours):
// the sums in SQL, the latency histograms (JSON objects) run together
// for Go to add up.
func (s *Store) usageRollup(ctx context.Context, q account.UsageQuery) ([]account.UsageRow, error) {
	group, bucket := groupAndBucket(q, "hour")
	var b strings.Builder
	b.WriteString(`SELECT ` + group + `, ` + bucket + `, sum(requests)::bigint, sum(errors)::bigint,
		sum(prompt_tokens)::bigint, sum(completion_tokens)::bigint, sum(cached_tokens)::bigint, sum(cost_micros)::bigint,
		sum(cache_hits)::bigint, string_agg(latency_hist::text, ''), string_agg(ttft_hist::text, '') FROM usage_hourly`)
	args := filterOn(&b, nil, q.Filter, "hour")
	b.WriteString(" GROUP BY 1, 2")
	rows, err := s.pool.Query(ctx, b.String(), args...)
	if err != nil {
		return nil, fmt.Errorf("postgres: usage: %w", unavailable(err))
	}
	defer rows.Close()
	var sums account.UsageSums
	for rows.Next() {
		var r account.UsageRow
		var bucketAt time.Time
		var cost int64
		var latency, ttft string
		if err := rows.Scan(&r.Group, &bucketAt, &r.Requests, &r.Errors, &r.PromptTokens, &r.CompletionTokens,
			&r.CachedTokens, &cost, &r.CacheHits, &latency, &ttft); err != nil {
			return nil, fmt.Errorf("postgres: usage: %w", err)
		}
		r.Cost = account.Micros(cost)
		if q.Interval != account.IntervalNone {
			r.Bucket = bucketAt.UTC()
		}
		if err := sums.AddRollup(&r, latency, ttft); err != nil {
			return nil, fmt.Errorf("postgres: usage: %w", err)
		}
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("postgres: usage: %w", err)
	}
	return sums.Rows(), nil
}

// usageRecords aggregates the records themselves, by group, time bucket
// and latency buckets ($1, account.LatencyBounds: the buckets the rollup
// counts in), and adds up the rows of each group and time bucket in Go.
func (s *Store) usageRecords(ctx context.Context, q account.UsageQuery) ([]account.UsageRow, error) {
	group, bucket := groupAndBucket(q, "time")
	var b strings.Builder
	b.WriteString(`SELECT ` + group + `, ` + bucket + `, width_bucket(latency_ms, $1::double precision[]),
		CASE WHEN stream AND ttft_ms > 0 THEN width_bucket(ttft_ms, $1::double precision[]) ELSE -1 END,
		count(*), count(*), count(*) FILTER (WHERE status >= 400),
		coalesce(sum(prompt_tokens), 0), coalesce(sum(completion_tokens), 0), coalesce(sum(cached_tokens), 0),
		coalesce(sum(cost_micros), 0)::bigint, count(*) FILTER (WHERE cache IN ('hit', 'semantic')) FROM usage_records`)
	args := filterSQL(&b, []any{account.LatencyBounds()}, q.Filter)
	b.WriteString(" GROUP BY 1, 2, 3, 4")
	rows, err := s.pool.Query(ctx, b.String(), args...)
	if err != nil {
		return nil, fmt.Errorf("postgres: usage: %w", unavailable(err))
	}
	defer rows.Close()
	var sums account.UsageSums
	for rows.Next() {
		var p account.UsagePartial
		var bucketAt time.Time
		var cost int64
		if err := rows.Scan(&p.Group, &bucketAt, &p.LatencyBucket, &p.TTFTBucket, &p.Samples, &p.Requests, &p.Errors,
			&p.PromptTokens, &p.CompletionTokens, &p.CachedTokens, &cost, &p.CacheHits); err != nil {
			return nil, fmt.Errorf("postgres: usage: %w", err)
		}
		p.Cost = account.Micros(cost)
		if q.Interval != account.IntervalNone {
			p.Bucket = bucketAt.UTC()
		}
		sums.AddPartial(&p)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("postgres: usage: %w", err)
	}
	return sums.Rows(), nil
}

// recordCols are the columns a Record is scanned from, in scanRecord's
// order.
const recordCols = `request_id, time, endpoint, key_id, project_id, project, customer, model, served_model, provider,
	deployment, status, error_kind, prompt_tokens, completion_tokens, cached_tokens, reasoning_tokens, cost_micros,
	usage_source, latency_ms, ttft_ms, overhead_ms, cache, attempts, stream, labels::text,
	coalesce(request_body, ''), coalesce(response_body, ''), saved_micros`

func scanRecord(row pgx.Row) (account.Record, error) {
	var r account.Record
	var cost, saved int64
	var labels string
	err := row.Scan(&r.RequestID, &r.Time, &r.Endpoint, &r.KeyID, &r.ProjectID, &r.Project, &r.Customer, &r.Model,
		&r.ServedModel, &r.Provider, &r.Deployment, &r.Status, &r.ErrorKind, &r.PromptTokens, &r.CompletionTokens,
		&r.CachedTokens, &r.ReasoningTokens, &cost, &r.UsageSource, &r.LatencyMS, &r.TTFTMS, &r.OverheadMS, &r.Cache,
		&r.Attempts, &r.Stream, &labels, &r.RequestBody, &r.ResponseBody, &saved)
	if err != nil {
		return r, err
	}
	r.Time, r.Cost = r.Time.UTC(), account.Micros(cost)
	r.Saved = account.Micros(saved)
	if labels != "" && labels != "{}" {
		if err := json.Unmarshal([]byte(labels), &r.Labels); err != nil {
			return r, fmt.Errorf("labels: %w", err)
		}
	}
	return r, nil
}

// logsSQL is the query of one page of Logs and its arguments.
func logsSQL(q account.LogQuery) (string, []any, error) {
	var b strings.Builder
	b.WriteString("SELECT " + recordCols + " FROM usage_records")
	args := filterSQL(&b, nil, q.Filter)
	if q.Cursor != "" {
		at, id, err := account.DecodeCursor(q.Cursor)
		if err != nil {
			return "", nil, err
		}
		args = append(args, at, id)
		fmt.Fprintf(&b, " AND (time, request_id) < ($%d, $%d)", len(args)-1, len(args))
	}
	args = append(args, q.Limit+1)
	fmt.Fprintf(&b, " ORDER BY time DESC, request_id DESC LIMIT $%d", len(args))
	return b.String(), args, nil
}

// Logs implements account.Querier: newest first, keyset-paged on
// (time, request_id).
func (s *Store) Logs(ctx context.Context, q account.LogQuery) (account.LogPage, error) {
	query, args, err := logsSQL(q)
	if err != nil {
		return account.LogPage{}, err
	}
	rows, err := s.pool.Query(ctx, query, args...)
	if err != nil {
		return account.LogPage{}, fmt.Errorf("postgres: logs: %w", unavailable(err))
	}
	defer rows.Close()
	recs := []account.Record{}
	for rows.Next() {
		r, err := scanRecord(rows)
		if err != nil {
			return account.LogPage{}, fmt.Errorf("postgres: logs: %w", err)
		}
		recs = append(recs, r)
	}
	if err := rows.Err(); err != nil {
		return account.LogPage{}, fmt.Errorf("postgres: logs: %w", err)
	}
	return account.Paginate(recs, q.Limit), nil
}

// Record implements account.Querier.
func (s *Store) Record(ctx context.Context, requestID string) (account.Record, error) {
	r, err := scanRecord(s.pool.QueryRow(ctx, "SELECT "+recordCols+" FROM usage_records WHERE request_id = $1", requestID))
	if errors.Is(err, pgx.ErrNoRows) {
		return r, account.ErrNotFound
	}
	if err != nil {
		return r, fmt.Errorf("postgres: record: %w", unavailable(err))
	}
	return r, nil
}

var _ account.Querier = (*Store)(nil)
