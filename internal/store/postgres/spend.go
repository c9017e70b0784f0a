package postgres

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"

	"gatehouse/internal/limit"
)

// LoadSpend implements limit.SpendStore.
func (s *Store) LoadSpend(ctx context.Context, since string) (map[limit.BudgetKey]int64, error) {
	out := map[limit.BudgetKey]int64{}
	err := s.withConn(ctx, func(c *pgx.Conn) error {
		rows, err := c.Query(ctx, `SELECT tag, scope, id, period, start, micros FROM spend WHERE start = '' OR start >= $1`, since)
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			var k limit.BudgetKey
			var scope, period string
			var v int64
			if err := rows.Scan(&k.Tag, &scope, &k.ID, &period, &k.Start, &v); err != nil {
				return err
			}
			k.Scope, k.Period = limit.Scope(scope), limit.Period(period)
			out[k] += v
		}
		return rows.Err()
	})
	if err != nil {
		return nil, fmt.Errorf("postgres: load spend: %w", err)
	}
	return out, nil
}

// LoadTagSpend is LoadSpend for one tag: what the Redis limiter reads to
// rebuild one project's counters after Redis lost them.
func (s *Store) LoadTagSpend(ctx context.Context, tag, since string) (map[limit.BudgetKey]int64, error) {
	out := map[limit.BudgetKey]int64{}
	err := s.withConn(ctx, func(c *pgx.Conn) error {
		rows, err := c.Query(ctx, `SELECT scope, id, period, start, micros FROM spend WHERE tag = $1 AND (start = '' OR start >= $2)`, tag, since)
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			k := limit.BudgetKey{Tag: tag}
			var scope, period string
			var v int64
			if err := rows.Scan(&scope, &k.ID, &period, &k.Start, &v); err != nil {
				return err
			}
			k.Scope, k.Period = limit.Scope(scope), limit.Period(period)
			out[k] += v
		}
		return rows.Err()
	})
	if err != nil {
		return nil, fmt.Errorf("postgres: load spend of %q: %w", tag, err)
	}
	return out, nil
}

// AddSpend implements limit.SpendStore: the batch in one transaction,
// sent as one pipeline.
func (s *Store) AddSpend(ctx context.Context, deltas map[limit.BudgetKey]int64) error {
	if len(deltas) == 0 {
		return nil
	}
	var b pgx.Batch
	for k, v := range deltas {
		b.Queue(`INSERT INTO spend (scope, id, period, start, tag, micros) VALUES ($1, $2, $3, $4, $5, $6)
			ON CONFLICT (scope, id, period, start) DO UPDATE
			SET micros = spend.micros + excluded.micros, tag = excluded.tag, updated_at = now()`,
			string(k.Scope), k.ID, string(k.Period), k.Start, k.Tag, v)
	}
	err := s.tx(ctx, func(tx pgx.Tx) error {
		return tx.SendBatch(ctx, &b).Close()
	})
	if err != nil {
		return fmt.Errorf("postgres: add spend: %w", err)
	}
	return nil
}

var _ limit.SpendStore = (*Store)(nil)
