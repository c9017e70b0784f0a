package sqlite

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"time"

	"gatehouse/internal/account"
)

// usageCols are the columns of usage_records in the order WriteRecords
// binds them.
const usageCols = `request_id, time, endpoint, key_id, project_id, project, customer, model, served_model, provider,
	deployment, status, error_kind, prompt_tokens, completion_tokens, cached_tokens, reasoning_tokens, cost_micros,
	usage_source, latency_ms, ttft_ms, overhead_ms, cache, attempts, stream, labels, request_body, response_body`

// WriteRecords implements account.RecordStore: one transaction per
// batch on the writer connection; a request id already stored is skipped.
func (s *Store) WriteRecords(ctx context.Context, rs []account.Record) error {
	if len(rs) == 0 {
		return nil
	}
	err := s.tx(ctx, func(tx *sql.Tx) error {
		st, err := tx.PrepareContext(ctx, `INSERT INTO usage_records (`+usageCols+`)
			VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)
			ON CONFLICT (request_id) DO NOTHING`)
		if err != nil {
			return err
		}
		defer st.Close()
		for i := range rs {
			r := &rs[i]
			labels, err := labelsJSON(r.Labels)
			if err != nil {
				return err
			}
			if _, err := st.ExecContext(ctx, r.RequestID, unixMicros(r.Time), r.Endpoint, r.KeyID, r.ProjectID, r.Project,
				r.Customer, r.Model, r.ServedModel, r.Provider, r.Deployment, r.Status, r.ErrorKind, r.PromptTokens,
				r.CompletionTokens, r.CachedTokens, r.ReasoningTokens, int64(r.Cost), r.UsageSource, r.LatencyMS, r.TTFTMS,
				r.OverheadMS, r.Cache, r.Attempts, r.Stream, labels, nullText(r.RequestBody), nullText(r.ResponseBody)); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("sqlite: write usage records: %w", err)
	}
	return nil
}

// PruneRecords implements account.RecordStore.
func (s *Store) PruneRecords(ctx context.Context, before time.Time, limit int) (int, error) {
	res, err := s.w.ExecContext(ctx, `DELETE FROM usage_records WHERE rowid IN
		(SELECT rowid FROM usage_records WHERE time < ? ORDER BY time LIMIT ?)`, unixMicros(before), limit)
	if err != nil {
		return 0, fmt.Errorf("sqlite: prune usage records: %w", err)
	}
	n, err := res.RowsAffected()
	return int(n), err
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
