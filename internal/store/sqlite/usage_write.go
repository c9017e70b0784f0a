package sqlite

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"gatehouse/internal/account"
)

// usageCols are the columns of usage_records in the order WriteRecords
// binds them.
const usageCols = `request_id, time, endpoint, key_id, project_id, project, customer, model, served_model, provider,
	deployment, status, error_kind, prompt_tokens, completion_tokens, cached_tokens, reasoning_tokens, cost_micros,
	usage_source, latency_ms, ttft_ms, overhead_ms, cache, attempts, stream, labels, request_body, response_body`

// insertSizes are the record counts of the INSERT statements a batch is
// cut into, largest first: a multi-row INSERT spends far less per
// record than one statement per record, and a few fixed sizes, prepared
// once, spare the parser (a 64-row statement costs more to prepare than
// to run; see BENCHMARKS.md).
var insertSizes = [...]int{64, 16, 4, 1}

// usageColCount is the number of columns in usageCols.
const usageColCount = 28

// insertSQL returns the INSERT of n records.
func insertSQL(n int) string {
	var b strings.Builder
	b.WriteString("INSERT INTO usage_records (" + usageCols + ") VALUES ")
	row := "(" + strings.Repeat("?,", usageColCount-1) + "?)"
	for i := range n {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(row)
	}
	b.WriteString(" ON CONFLICT (request_id) DO NOTHING")
	return b.String()
}

// insertStmts returns the prepared INSERTs, one per insertSizes entry,
// preparing them on the writer the first time. The writer pool has one
// connection, so they stay prepared on it.
func (s *Store) insertStmts(ctx context.Context) ([]*sql.Stmt, error) {
	s.insertMu.Lock()
	defer s.insertMu.Unlock()
	if s.inserts != nil {
		return s.inserts, nil
	}
	stmts := make([]*sql.Stmt, 0, len(insertSizes))
	for _, n := range insertSizes {
		st, err := s.w.PrepareContext(ctx, insertSQL(n))
		if err != nil {
			for _, p := range stmts {
				p.Close()
			}
			return nil, err
		}
		stmts = append(stmts, st)
	}
	s.inserts = stmts
	return stmts, nil
}

// WriteRecords implements account.RecordStore: one transaction per
// batch on the writer connection, cut into multi-row INSERTs; a request
// id already stored is skipped.
func (s *Store) WriteRecords(ctx context.Context, rs []account.Record) error {
	if len(rs) == 0 {
		return nil
	}
	stmts, err := s.insertStmts(ctx)
	if err != nil {
		return fmt.Errorf("sqlite: write usage records: %w", err)
	}
	args := make([]any, 0, min(len(rs), insertSizes[0])*usageColCount)
	err = s.tx(ctx, func(tx *sql.Tx) error {
		for len(rs) > 0 {
			k := 0
			for insertSizes[k] > len(rs) {
				k++
			}
			n := insertSizes[k]
			args = args[:0]
			for i := range rs[:n] {
				var err error
				if args, err = appendRecordArgs(args, &rs[i]); err != nil {
					return err
				}
			}
			if _, err := tx.StmtContext(ctx, stmts[k]).ExecContext(ctx, args...); err != nil {
				return err
			}
			rs = rs[n:]
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("sqlite: write usage records: %w", err)
	}
	return nil
}

// appendRecordArgs appends r's column values in usageCols order.
func appendRecordArgs(args []any, r *account.Record) ([]any, error) {
	labels, err := labelsJSON(r.Labels)
	if err != nil {
		return args, err
	}
	return append(args, r.RequestID, unixMicros(r.Time), r.Endpoint, r.KeyID, r.ProjectID, r.Project,
		r.Customer, r.Model, r.ServedModel, r.Provider, r.Deployment, r.Status, r.ErrorKind, r.PromptTokens,
		r.CompletionTokens, r.CachedTokens, r.ReasoningTokens, int64(r.Cost), r.UsageSource, r.LatencyMS, r.TTFTMS,
		r.OverheadMS, r.Cache, r.Attempts, r.Stream, labels, nullText(r.RequestBody), nullText(r.ResponseBody)), nil
}

// PruneRecords implements account.RecordStore.
func (s *Store) PruneRecords(ctx context.Context, before time.Time, limit int) (int, error) {
	res, err := s.w.ExecContext(ctx, `DELETE FROM usage_records WHERE rowid IN
		(SELECT rowid FROM usage_records WHERE time < ? ORDER BY time LIMIT ?)`, unixMicros(before), limit)
	if err != nil {
		return 0, fmt.Errorf("sqlite: prune usage records: %w", err)
	}
	n, err := res.RowsAffected()
	if err != nil {
		return 0, err
	}
	// The rollup's hours that lie wholly before the cut go too.
	hour := int64(time.Hour / time.Microsecond)
	if _, err := s.w.ExecContext(ctx, `DELETE FROM usage_hourly WHERE hour < ?`, unixMicros(before)-unixMicros(before)%hour); err != nil {
		return 0, fmt.Errorf("sqlite: prune usage rollup: %w", err)
	}
	return int(n), nil
}

func unixMicros(t time.Time) int64 { return t.UnixMicro() }

func labelsJSON(m map[string]string) (string, error) {
	if len(m) == 0 {
		return "{}", nil
	}
	b, err := json.Marshal(m)
	return string(b), err
}

func nullText(s string) any {
	if s == "" {
		return nil
	}
	return s
}

var _ account.RecordStore = (*Store)(nil)
