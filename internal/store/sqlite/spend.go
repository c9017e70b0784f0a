package sqlite

import (
	"context"
	"fmt"

	"gatehouse/internal/limit"
	"gatehouse/internal/store"
)

// LoadSpend implements limit.SpendStore.
func (s *Store) LoadSpend(ctx context.Context, since string) (map[limit.BudgetKey]int64, error) {
	rows, err := s.r.QueryContext(ctx, `SELECT tag, scope, id, period, start, micros FROM spend WHERE start = '' OR start >= ?`, since)
	if err != nil {
		return nil, fmt.Errorf("sqlite: load spend: %w", err)
	}
	defer rows.Close()
	out := map[limit.BudgetKey]int64{}
	for rows.Next() {
		var k limit.BudgetKey
		var v int64
		if err := rows.Scan(&k.Tag, &k.Scope, &k.ID, &k.Period, &k.Start, &v); err != nil {
			return nil, fmt.Errorf("sqlite: load spend: %w", err)
		}
		out[k] += v
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("sqlite: load spend: %w", err)
	}
	return out, nil
}

// addSpendSQL adds one counter's settled spend to its row.
const addSpendSQL = `INSERT INTO spend (scope, id, period, start, tag, micros, updated_at)
	VALUES (?, ?, ?, ?, ?, ?, ?)
	ON CONFLICT (scope, id, period, start) DO UPDATE
	SET micros = micros + excluded.micros, tag = excluded.tag, updated_at = excluded.updated_at`

// AddSpend implements limit.SpendStore: one transaction for the batch,
// with the statements the usage records' writer keeps prepared on the
// writer connection. The spend log flushes on a timer (every
// limits.flush_every); preparing the upsert and parsing BEGIN and COMMIT
// afresh each flush cost more than the upserts themselves
// (BENCHMARKS.md, "The spend flush's statements prepared once").
func (s *Store) AddSpend(ctx context.Context, deltas map[limit.BudgetKey]int64) error {
	if len(deltas) == 0 {
		return nil
	}
	now := fmtTime(store.Now())
	err := s.writerTx(ctx, func(w *recordWriter) error {
		args := w.args[:7]
		for k, v := range deltas {
			for i, a := range [...]any{string(k.Scope), k.ID, string(k.Period), k.Start, k.Tag, v, now} {
				args[i].Value = a
			}
			if _, err := w.exec(ctx, stmtAddSpend, args); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("sqlite: add spend: %w", err)
	}
	return nil
}

var _ limit.SpendStore = (*Store)(nil)
