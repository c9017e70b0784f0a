package postgres

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"

	"gatehouse/internal/auth"
	"gatehouse/internal/store"
	"gatehouse/internal/tokens"
)

// Prices implements tokens.PriceStore.
func (s *Store) Prices(ctx context.Context) ([]tokens.StoredPrice, error) {
	var out []tokens.StoredPrice
	err := s.withConn(ctx, func(c *pgx.Conn) error {
		rows, err := c.Query(ctx, `SELECT model, input, cached_input, output, updated_at FROM prices ORDER BY model`)
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			var p tokens.StoredPrice
			if err := rows.Scan(&p.Model, &p.Input, &p.CachedInput, &p.Output, &p.UpdatedAt); err != nil {
				return err
			}
			p.UpdatedAt = utc(p.UpdatedAt)
			out = append(out, p)
		}
		return rows.Err()
	})
	if err != nil {
		return nil, fmt.Errorf("postgres: prices: %w", err)
	}
	return out, nil
}

// SetPrice implements tokens.PriceStore.
func (s *Store) SetPrice(ctx context.Context, p *tokens.StoredPrice) error {
	now := store.Now()
	err := s.withConn(ctx, func(c *pgx.Conn) error {
		_, err := c.Exec(ctx, `INSERT INTO prices (model, input, cached_input, output, updated_at) VALUES ($1, $2, $3, $4, $5)
			ON CONFLICT (model) DO UPDATE SET input = excluded.input, cached_input = excluded.cached_input,
			output = excluded.output, updated_at = excluded.updated_at`,
			p.Model, p.Input, p.CachedInput, p.Output, now)
		return err
	})
	if err != nil {
		return classify(err, fmt.Sprintf("price %q", p.Model))
	}
	p.UpdatedAt = now
	return nil
}

// DeletePrice implements tokens.PriceStore.
func (s *Store) DeletePrice(ctx context.Context, model string) error {
	var n int64
	err := s.withConn(ctx, func(c *pgx.Conn) error {
		tag, err := c.Exec(ctx, `DELETE FROM prices WHERE model = $1`, model)
		n = tag.RowsAffected()
		return err
	})
	if err != nil {
		return classify(err, fmt.Sprintf("price %q", model))
	}
	if n == 0 {
		return fmt.Errorf("price %q: %w", model, auth.ErrNotFound)
	}
	return nil
}

var _ tokens.PriceStore = (*Store)(nil)
