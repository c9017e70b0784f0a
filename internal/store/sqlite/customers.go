package sqlite

import (
	"context"
	"database/sql"
	"fmt"

	"gatehouse/internal/auth"
	"gatehouse/internal/store"
)

const customerCols = `id, project_id, external_id, name, daily_usd, monthly_usd, on_exceed, downgrade_model, labels, created_at, updated_at`

func scanCustomer(row scanner) (*auth.Customer, error) {
	var (
		c                        auth.Customer
		daily, monthly           sql.NullFloat64
		labels, created, updated string
		errs                     [3]error
	)
	if err := row.Scan(&c.ID, &c.ProjectID, &c.ExternalID, &c.Name, &daily, &monthly, &c.OnExceed, &c.DowngradeModel,
		&labels, &created, &updated); err != nil {
		return nil, err
	}
	if daily.Valid {
		c.DailyUSD = &daily.Float64
	}
	if monthly.Valid {
		c.MonthlyUSD = &monthly.Float64
	}
	c.Labels, errs[0] = store.ParseMap(labels)
	c.CreatedAt, errs[1] = parseTime(created)
	c.UpdatedAt, errs[2] = parseTime(updated)
	if err := firstErr(errs[:]...); err != nil {
		return nil, fmt.Errorf("customer %s: corrupt row: %w", c.ID, err)
	}
	return &c, nil
}

func nullFloat(f *float64) any {
	if f == nil {
		return nil
	}
	return *f
}

// CreateCustomer inserts c, filling its ID and times. The external ID is
// unique within the project (auth.ErrConflict otherwise).
func (s *Store) CreateCustomer(ctx context.Context, c *auth.Customer) error {
	now := store.Now()
	id := s.ids.New(store.CustomerPrefix, now)
	store.NormCustomer(c)
	_, err := s.w.ExecContext(ctx, `INSERT INTO customers (`+customerCols+`) VALUES (?,?,?,?,?,?,?,?,?,?,?)`,
		id, c.ProjectID, c.ExternalID, c.Name, nullFloat(c.DailyUSD), nullFloat(c.MonthlyUSD), c.OnExceed, c.DowngradeModel,
		store.JSONMap(c.Labels), fmtTime(now), fmtTime(now))
	if err != nil {
		return classify(err, fmt.Sprintf("customer %q in project %q", c.ExternalID, c.ProjectID))
	}
	c.ID, c.CreatedAt, c.UpdatedAt = id, now, now
	return nil
}

// Customer returns the customer with the given ID.
func (s *Store) Customer(ctx context.Context, id string) (*auth.Customer, error) {
	c, err := scanCustomer(s.r.QueryRowContext(ctx, `SELECT `+customerCols+` FROM customers WHERE id = ?`, id))
	if err != nil {
		return nil, classify(err, fmt.Sprintf("customer %q", id))
	}
	return c, nil
}

// CustomerByExternalID finds a project's customer by the value clients
// send in x-gatehouse-customer or "user".
func (s *Store) CustomerByExternalID(ctx context.Context, projectID, externalID string) (*auth.Customer, error) {
	c, err := scanCustomer(s.r.QueryRowContext(ctx, `SELECT `+customerCols+` FROM customers WHERE project_id = ? AND external_id = ?`,
		projectID, externalID))
	if err != nil {
		return nil, classify(err, fmt.Sprintf("customer %q in project %q", externalID, projectID))
	}
	return c, nil
}

// UpdateCustomer writes every field of c but its ID, project and CreatedAt.
func (s *Store) UpdateCustomer(ctx context.Context, c *auth.Customer) error {
	now := store.Now()
	store.NormCustomer(c)
	var projectID, created string
	err := s.w.QueryRowContext(ctx, `UPDATE customers SET external_id=?, name=?, daily_usd=?, monthly_usd=?, on_exceed=?,
		downgrade_model=?, labels=?, updated_at=? WHERE id=? RETURNING project_id, created_at`,
		c.ExternalID, c.Name, nullFloat(c.DailyUSD), nullFloat(c.MonthlyUSD), c.OnExceed, c.DowngradeModel,
		store.JSONMap(c.Labels), fmtTime(now), c.ID).Scan(&projectID, &created)
	if err != nil {
		return classify(err, fmt.Sprintf("customer %q (external id %q)", c.ID, c.ExternalID))
	}
	c.ProjectID, c.UpdatedAt = projectID, now
	c.CreatedAt, _ = parseTime(created)
	return nil
}

// DeleteCustomer removes the customer.
func (s *Store) DeleteCustomer(ctx context.Context, id string) error {
	res, err := s.w.ExecContext(ctx, `DELETE FROM customers WHERE id = ?`, id)
	if err != nil {
		return classify(err, fmt.Sprintf("customer %q", id))
	}
	if n, _ := res.RowsAffected(); n == 0 {
		return fmt.Errorf("customer %q: %w", id, auth.ErrNotFound)
	}
	return nil
}

// Customers lists customers in ID order, of one project or ("") of all.
func (s *Store) Customers(ctx context.Context, projectID string, pg auth.Page) ([]auth.Customer, error) {
	q := `SELECT ` + customerCols + ` FROM customers WHERE id > ? ORDER BY id LIMIT ?`
	args := []any{pg.After, store.PageLimit(pg)}
	if projectID != "" {
		q = `SELECT ` + customerCols + ` FROM customers WHERE project_id = ? AND id > ? ORDER BY id LIMIT ?`
		args = append([]any{projectID}, args...)
	}
	rows, err := s.r.QueryContext(ctx, q, args...)
	if err != nil {
		return nil, fmt.Errorf("sqlite: customers: %w", err)
	}
	defer rows.Close()
	var out []auth.Customer
	for rows.Next() {
		c, err := scanCustomer(rows)
		if err != nil {
			return nil, fmt.Errorf("sqlite: customers: %w", err)
		}
		out = append(out, *c)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("sqlite: customers: %w", err)
	}
	return out, nil
}
