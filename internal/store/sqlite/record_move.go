package sqlite

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"log/slog"
	"time"

	"gatehouse/internal/account"
)

// moveChunk is how many usage_records rows moveRecordRows moves per
// transaction: one batch row each, as the sink's largest batches.
const moveChunk = 1000

// moveRecordRows moves the rows a gatehouse before migration 0017 left
// in usage_records into record_batches, moveChunk rows a transaction in
// the order they were written, then drops usage_records. Each
// transaction also records the last rowid moved (usage_records_moved), so
// a move cut short by a crash goes on where it stopped and never stores a
// record twice. The rollup already holds these records; it is left as it
// is. Open runs it once the migrations are applied; on a database with
// no such rows it only drops the two tables. progress hears how far it
// is.
func (s *Store) moveRecordRows(ctx context.Context, progress *moveLog) error {
	var enc batchEncoder
	for {
		done := false
		err := s.tx(ctx, func(tx *sql.Tx) error {
			// Checked under the write lock: another store opening the same
			// file may have finished the move since.
			var tables int
			if err := tx.QueryRowContext(ctx, `SELECT count(*) FROM sqlite_master WHERE type = 'table'
				AND name IN ('usage_records', 'usage_records_moved')`).Scan(&tables); err != nil {
				return err
			}
			if tables != 2 {
				done = true
				return nil
			}
			var last int64
			if err := tx.QueryRowContext(ctx, `SELECT last_rowid FROM usage_records_moved`).Scan(&last); err != nil {
				return err
			}
			if !progress.counted {
				var left int
				if err := tx.QueryRowContext(ctx, `SELECT count(*) FROM usage_records WHERE rowid > ?`, last).Scan(&left); err != nil {
					return err
				}
				progress.begin(left)
			}
			rows, err := tx.QueryContext(ctx, `SELECT rowid, `+oldRecordCols+` FROM usage_records
				WHERE rowid > ? ORDER BY rowid LIMIT ?`, last, moveChunk)
			if err != nil {
				return err
			}
			enc.reset()
			for rows.Next() {
				if last, err = scanOldRecord(rows, &enc); err != nil {
					rows.Close()
					return err
				}
			}
			rows.Close()
			if err := rows.Err(); err != nil {
				return err
			}
			if enc.n == 0 {
				done = true
				_, err := tx.ExecContext(ctx, `DROP TABLE usage_records; DROP TABLE usage_records_moved`)
				return err
			}
			if _, err := tx.ExecContext(ctx, insertBatchSQL, enc.minT, enc.maxT, enc.n, enc.sum.appendTo(nil), enc.ids,
				enc.blob()); err != nil {
				return err
			}
			_, err = tx.ExecContext(ctx, `UPDATE usage_records_moved SET last_rowid = ?`, last)
			return err
		})
		if err != nil {
			return fmt.Errorf("move usage records: %w", err)
		}
		if done {
			progress.end()
			return nil
		}
		progress.moved(enc.n)
	}
}

// moveLogEvery is how many records are moved between two progress lines:
// a few seconds of work at the 69 µs a record measured (BENCHMARKS.md).
const moveLogEvery = 50 * moveChunk

// moveLog tells the operator of a gatehouse that seems stuck at start-up
// why: a line when a move begins (how many records), one every `every`
// records moved, and one at the end. Counts and durations only, never a
// record's content. One without a logger says nothing.
type moveLog struct {
	log     *slog.Logger
	every   int
	counted bool // begin has run
	total   int  // records to move when the move began (more were moved before a restart)
	done    int
	next    int // the count of moved records at which the next line is due
	start   time.Time
}

// newMoveLog logs on l every `every` records (moveLogEvery when 0).
func newMoveLog(l *slog.Logger, every int) *moveLog {
	if every <= 0 {
		every = moveLogEvery
	}
	return &moveLog{log: l, every: every, next: every}
}

func (m *moveLog) begin(total int) {
	m.counted, m.total, m.start = true, total, time.Now()
	if m.log != nil && total > 0 {
		m.log.Info("moving usage records into batches: a one-time upgrade of this database, done before the gateway starts serving",
			"records", total)
	}
}

func (m *moveLog) moved(n int) {
	m.done += n
	if m.done < m.next {
		return
	}
	for m.next <= m.done {
		m.next += m.every
	}
	if m.log != nil {
		m.log.Info("moving usage records into batches", "moved", m.done, "of", m.total)
	}
}

func (m *moveLog) end() {
	if m.log != nil && m.done > 0 {
		m.log.Info("usage records moved into batches", "records", m.done, "seconds", time.Since(m.start).Seconds())
	}
}

// oldRecordCols are the columns of usage_records a record is read from,
// in scanOldRecord's order.
const oldRecordCols = `request_id, time, endpoint, key_id, project_id, project, customer, model, served_model, provider,
	deployment, status, error_kind, prompt_tokens, completion_tokens, cached_tokens, reasoning_tokens, cost_micros,
	usage_source, latency_ms, ttft_ms, overhead_ms, cache, attempts, stream, labels,
	coalesce(request_body, ''), coalesce(response_body, ''), saved_micros`

// scanOldRecord reads a row of rowid and oldRecordCols into enc and
// returns its rowid.
func scanOldRecord(sc scanner, enc *batchEncoder) (int64, error) {
	var r account.Record
	var rowid, at, cost, saved int64
	var labels string
	err := sc.Scan(&rowid, &r.RequestID, &at, &r.Endpoint, &r.KeyID, &r.ProjectID, &r.Project, &r.Customer, &r.Model,
		&r.ServedModel, &r.Provider, &r.Deployment, &r.Status, &r.ErrorKind, &r.PromptTokens, &r.CompletionTokens,
		&r.CachedTokens, &r.ReasoningTokens, &cost, &r.UsageSource, &r.LatencyMS, &r.TTFTMS, &r.OverheadMS, &r.Cache,
		&r.Attempts, &r.Stream, &labels, &r.RequestBody, &r.ResponseBody, &saved)
	if err != nil {
		return 0, err
	}
	r.Time, r.Cost, r.Saved = time.UnixMicro(at).UTC(), account.Micros(cost), account.Micros(saved)
	if labels != "" && labels != "{}" {
		if err := json.Unmarshal([]byte(labels), &r.Labels); err != nil {
			return 0, fmt.Errorf("usage record %s: labels: %w", r.RequestID, err)
		}
	}
	enc.add(&r)
	return rowid, nil
}
