package postgres

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"

	"gatehouse/internal/auth"
	"gatehouse/internal/store"
)

const customerCols = `id, project_id, external_id, name, daily_usd, monthly_usd, on_exceed, downgrade_model, labels::text, created_at, updated_at`

func scanCustomer(row pgx.Row) (*auth.Customer, error) {
	var (
		c      auth.Customer
		labels string
	)
	if err := row.Scan(&c.ID, &c.ProjectID, &c.ExternalID, &c.Name, &c.DailyUSD, &c.MonthlyUSD, &c.OnExceed,
		&c.DowngradeModel, &labels, &c.CreatedAt, &c.UpdatedAt); err != nil {
		return nil, err
	}
	c.CreatedAt, c.UpdatedAt = utc(c.CreatedAt), utc(c.UpdatedAt)
	var err error
	if c.Labels, err = store.ParseMap(labels); err != nil {
		return nil, fmt.Errorf("customer %s: corrupt row: %w", c.ID, err)
	}
	return &c, nil
}

// CreateCustomer inserts c, filling its ID and times. The external ID is
// unique within the project (auth.ErrConflict otherwise).
func (s *Store) CreateCustomer(ctx context.Context, c *auth.Customer) error {
	now := store.Now()
	id := s.ids.New(store.CustomerPrefix, now)
	store.NormCustomer(c)
	err := s.withConn(ctx, func(conn *pgx.Conn) error {
		_, err := conn.Exec(ctx, `INSERT INTO customers (id, project_id, external_id, name, daily_usd, monthly_usd, on_exceed,
			downgrade_model, labels, created_at, updated_at) VALUES ($1,$2,$3,$4,$5,$6,$7,$8,$9::jsonb,$10,$10)`,
			id, c.ProjectID, c.ExternalID, c.Name, c.DailyUSD, c.MonthlyUSD, c.OnExceed, c.DowngradeModel,
			store.JSONMap(c.Labels), now)
		return err
	})
	if err != nil {
		return classify(err, fmt.Sprintf("customer %q in project %q", c.ExternalID, c.ProjectID))
	}
	c.ID, c.CreatedAt, c.UpdatedAt = id, now, now
	return nil
}

func (s *Store) customerWhere(ctx context.Context, where, what string, args ...any) (*auth.Customer, error) {
	var c *auth.Customer
	err := s.withConn(ctx, func(conn *pgx.Conn) (err error) {
		c, err = scanCustomer(conn.QueryRow(ctx, `SELECT `+customerCols+` FROM customers WHERE `+where, args...))
		return err
	})
	if err != nil {
		return nil, classify(err, what)
	}
	return c, nil
}

// Customer returns the customer with the given ID.
func (s *Store) Customer(ctx context.Context, id string) (*auth.Customer, error) {
	return s.customerWhere(ctx, `id = $1`, fmt.Sprintf("customer %q", id), id)
}

// CustomerByExternalID finds a project's customer by the value clients
// send in x-gatehouse-customer or "user".
func (s *Store) CustomerByExternalID(ctx context.Context, projectID, externalID string) (*auth.Customer, error) {
	return s.customerWhere(ctx, `project_id = $1 AND external_id = $2`,
		fmt.Sprintf("customer %q in project %q", externalID, projectID), projectID, externalID)
}

// UpdateCustomer writes every field of c but its ID, project and CreatedAt.
func (s *Store) UpdateCustomer(ctx context.Context, c *auth.Customer) error {
	now := store.Now()
	store.NormCustomer(c)
	err := s.withConn(ctx, func(conn *pgx.Conn) error {
		return conn.QueryRow(ctx, `UPDATE customers SET external_id=$1, name=$2, daily_usd=$3, monthly_usd=$4, on_exceed=$5,
			downgrade_model=$6, labels=$7::jsonb, updated_at=$8 WHERE id=$9 RETURNING project_id, created_at`,
			c.ExternalID, c.Name, c.DailyUSD, c.MonthlyUSD, c.OnExceed, c.DowngradeModel, store.JSONMap(c.Labels),
			now, c.ID).Scan(&c.ProjectID, &c.CreatedAt)
	})
	if err != nil {
		return classify(err, fmt.Sprintf("customer %q (external id %q)", c.ID, c.ExternalID))
	}
	c.CreatedAt, c.UpdatedAt = utc(c.CreatedAt), now
	return nil
}

// DeleteCustomer removes the customer.
func (s *Store) DeleteCustomer(ctx context.Context, id string) error {
	var n int64
	err := s.withConn(ctx, func(conn *pgx.Conn) error {
		tag, err := conn.Exec(ctx, `DELETE FROM customers WHERE id = $1`, id)
		n = tag.RowsAffected()
		return err
	})
	if err == nil && n == 0 {
		err = auth.ErrNotFound
	}
	return classify(err, fmt.Sprintf("customer %q", id))
}

// Customers lists customers in ID order, of one project or ("") of all.
func (s *Store) Customers(ctx context.Context, projectID string, pg auth.Page) ([]auth.Customer, error) {
	q := `SELECT ` + customerCols + ` FROM customers WHERE id > $1 ORDER BY id LIMIT $2`
	args := []any{pg.After, store.PageLimit(pg)}
	if projectID != "" {
		q = `SELECT ` + customerCols + ` FROM customers WHERE id > $1 AND project_id = $3 ORDER BY id LIMIT $2`
		args = append(args, projectID)
	}
	var out []auth.Customer
	err := s.withConn(ctx, func(conn *pgx.Conn) error {
		rows, err := conn.Query(ctx, q, args...)
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			c, err := scanCustomer(rows)
			if err != nil {
				return err
			}
			out = append(out, *c)
		}
		return rows.Err()
	})
	if err != nil {
		return nil, fmt.Errorf("postgres: customers: %w", err)
	}
	return out, nil
}
