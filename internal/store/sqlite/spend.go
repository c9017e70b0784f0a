package sqlite

import (
	"context"
	"database/sql"
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

// AddSpend implements limit.SpendStore: one transaction for the batch.
func (s *Store) AddSpend(ctx context.Context, deltas map[limit.BudgetKey]int64) error {
	if len(deltas) == 0 {
		return nil
	}
	now := fmtTime(store.Now())
	err := s.tx(ctx, func(tx *sql.Tx) error {
		st, err := tx.PrepareContext(ctx, `INSERT INTO spend (scope, id, period, start, tag, micros, updated_at)
			VALUES (?, ?, ?, ?, ?, ?, ?)
			ON CONFLICT (scope, id, period, start) DO UPDATE
			SET micros = micros + excluded.micros, tag = excluded.tag, updated_at = excluded.updated_at`)
		if err != nil {
			return err
		}
		defer st.Close()
		for k, v := range deltas {
			if _, err := st.ExecContext(ctx, string(k.Scope), k.ID, string(k.Period), k.Start, k.Tag, v, now); err != nil {
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
