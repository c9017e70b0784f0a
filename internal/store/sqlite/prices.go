package sqlite

import (
	"context"
	"fmt"

	"gatehouse/internal/auth"
	"gatehouse/internal/store"
	"gatehouse/internal/tokens"
)

// Prices implements tokens.PriceStore.
func (s *Store) Prices(ctx context.Context) ([]tokens.StoredPrice, error) {
	rows, err := s.r.QueryContext(ctx, `SELECT model, input, cached_input, output, updated_at FROM prices ORDER BY model`)
	if err != nil {
		return nil, fmt.Errorf("sqlite: prices: %w", err)
	}
	defer rows.Close()
	var out []tokens.StoredPrice
	for rows.Next() {
		var p tokens.StoredPrice
		var updated string
		if err := rows.Scan(&p.Model, &p.Input, &p.CachedInput, &p.Output, &updated); err != nil {
			return nil, fmt.Errorf("sqlite: prices: %w", err)
		}
		if p.UpdatedAt, err = parseTime(updated); err != nil {
			return nil, fmt.Errorf("sqlite: price %s: corrupt row: %w", p.Model, err)
		}
		out = append(out, p)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("sqlite: prices: %w", err)
	}
	return out, nil
}

// SetPrice implements tokens.PriceStore.
func (s *Store) SetPrice(ctx context.Context, p *tokens.StoredPrice) error {
	now := store.Now()
	_, err := s.w.ExecContext(ctx, `INSERT INTO prices (model, input, cached_input, output, updated_at) VALUES (?, ?, ?, ?, ?)
		ON CONFLICT (model) DO UPDATE SET input = excluded.input, cached_input = excluded.cached_input,
		output = excluded.output, updated_at = excluded.updated_at`,
		p.Model, p.Input, p.CachedInput, p.Output, fmtTime(now))
	if err != nil {
		return classify(err, fmt.Sprintf("price %q", p.Model))
	}
	p.UpdatedAt = now
	return nil
}

// DeletePrice implements tokens.PriceStore.
func (s *Store) DeletePrice(ctx context.Context, model string) error {
	res, err := s.w.ExecContext(ctx, `DELETE FROM prices WHERE model = ?`, model)
	if err != nil {
		return classify(err, fmt.Sprintf("price %q", model))
	}
	if n, _ := res.RowsAffected(); n == 0 {
		return fmt.Errorf("price %q: %w", model, auth.ErrNotFound)
	}
	return nil
}

var _ tokens.PriceStore = (*Store)(nil)
