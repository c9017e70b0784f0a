package postgres

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"

	"gatehouse/internal/auth"
	"gatehouse/internal/store"
)

const projectCols = `id, name, rpm, tpm, budget_usd, budget_period, models::text, labels::text, cache, cache_ttl, semantic,
	semantic_threshold, log_bodies, read_only, created_at, updated_at, providers::text`

// projectDest collects one project row; scanning through it lets
// KeyByHash read a key and its project from one joined row.
type projectDest struct {
	p              auth.Project
	usd            *float64
	period         *string
	models, labels string
	providers      string
	cache          *bool
	cacheTTL       *int64
	semantic       *bool
	threshold      *float64
}

func (d *projectDest) ptrs() []any {
	return []any{&d.p.ID, &d.p.Name, &d.p.RPM, &d.p.TPM, &d.usd, &d.period, &d.models, &d.labels, &d.cache, &d.cacheTTL,
		&d.semantic, &d.threshold, &d.p.LogBodies, &d.p.ReadOnly, &d.p.CreatedAt, &d.p.UpdatedAt, &d.providers}
}

func (d *projectDest) project() (*auth.Project, error) {
	p := d.p
	p.Budget = scanBudget(d.usd, d.period)
	p.Cache = store.ProjectCacheOf(d.cache, d.cacheTTL, d.semantic, d.threshold)
	p.CreatedAt, p.UpdatedAt = utc(p.CreatedAt), utc(p.UpdatedAt)
	var errs [3]error
	p.Models, errs[0] = store.ParseList(d.models)
	p.Labels, errs[1] = store.ParseMap(d.labels)
	p.Providers, errs[2] = store.ParseList(d.providers)
	if err := firstErr(errs[:]...); err != nil {
		return nil, fmt.Errorf("project %s: corrupt row: %w", p.ID, err)
	}
	return &p, nil
}

func scanProject(row pgx.Row) (*auth.Project, error) {
	var d projectDest
	if err := row.Scan(d.ptrs()...); err != nil {
		return nil, err
	}
	return d.project()
}

// notifyProject announces every key of a project (in the transaction of
// the change, so the announcement commits with it).
func (s *Store) notifyProject(ctx context.Context, tx pgx.Tx, projectID string) error {
	_, err := tx.Exec(ctx, `SELECT pg_notify($1, encode(hash, 'hex')) FROM keys WHERE project_id = $2`, s.channel, projectID)
	if err != nil {
		return fmt.Errorf("postgres: notify keys of project %q: %w", projectID, err)
	}
	return nil
}

// notify announces hashes in the transaction of the change.
func (s *Store) notify(ctx context.Context, tx pgx.Tx, hashes ...auth.Hash) error {
	payloads := make([]string, len(hashes))
	for i, h := range hashes {
		payloads[i] = hexHash(h)
	}
	if _, err := tx.Exec(ctx, `SELECT pg_notify($1, h) FROM unnest($2::text[]) AS h`, s.channel, payloads); err != nil {
		return fmt.Errorf("postgres: notify: %w", err)
	}
	return nil
}

// CreateProject inserts p, filling its ID and times.
func (s *Store) CreateProject(ctx context.Context, p *auth.Project) error {
	now := store.Now()
	id := s.ids.New(store.ProjectPrefix, now)
	store.NormProject(p)
	usd, period := budgetArgs(p.Budget)
	cc := store.CacheColumns(p.Cache)
	err := s.withConn(ctx, func(c *pgx.Conn) error {
		_, err := c.Exec(ctx, `INSERT INTO projects (id, name, rpm, tpm, budget_usd, budget_period, models, labels, cache,
			cache_ttl, semantic, semantic_threshold, log_bodies, read_only, created_at, updated_at, providers)
			VALUES ($1,$2,$3,$4,$5,$6,$7::jsonb,$8::jsonb,$9,$10,$11,$12,$13,$14,$15,$15,$16::jsonb)`,
			id, p.Name, p.RPM, p.TPM, usd, period, store.JSONList(p.Models), store.JSONMap(p.Labels), cc[0], cc[1], cc[2], cc[3],
			p.LogBodies, p.ReadOnly, now, store.JSONList(p.Providers))
		return err
	})
	if err != nil {
		return classify(err, fmt.Sprintf("project name %q", p.Name))
	}
	p.ID, p.CreatedAt, p.UpdatedAt = id, now, now
	return nil
}

func (s *Store) projectWhere(ctx context.Context, where, what string, args ...any) (*auth.Project, error) {
	var p *auth.Project
	err := s.withConn(ctx, func(c *pgx.Conn) (err error) {
		p, err = scanProject(c.QueryRow(ctx, `SELECT `+projectCols+` FROM projects WHERE `+where, args...))
		return err
	})
	if err != nil {
		return nil, classify(err, what)
	}
	return p, nil
}

// Project returns the project with the given ID.
func (s *Store) Project(ctx context.Context, id string) (*auth.Project, error) {
	return s.projectWhere(ctx, `id = $1`, fmt.Sprintf("project %q", id), id)
}

// ProjectByName returns the project with the given name.
func (s *Store) ProjectByName(ctx context.Context, name string) (*auth.Project, error) {
	return s.projectWhere(ctx, `name = $1`, fmt.Sprintf("project name %q", name), name)
}

// UpdateProject writes every field of p but its ID and CreatedAt, and
// announces every key of the project, since a cached key carries its
// project's limits and models.
func (s *Store) UpdateProject(ctx context.Context, p *auth.Project) error {
	now := store.Now()
	store.NormProject(p)
	usd, period := budgetArgs(p.Budget)
	cc := store.CacheColumns(p.Cache)
	what := fmt.Sprintf("project %q (name %q)", p.ID, p.Name)
	err := s.tx(ctx, func(tx pgx.Tx) error {
		err := tx.QueryRow(ctx, `UPDATE projects SET name=$1, rpm=$2, tpm=$3, budget_usd=$4, budget_period=$5, models=$6::jsonb,
			labels=$7::jsonb, cache=$8, cache_ttl=$13, semantic=$14, semantic_threshold=$15, log_bodies=$9, read_only=$10,
			updated_at=$11, providers=$16::jsonb WHERE id=$12 RETURNING created_at`,
			p.Name, p.RPM, p.TPM, usd, period, store.JSONList(p.Models), store.JSONMap(p.Labels), cc[0],
			p.LogBodies, p.ReadOnly, now, p.ID, cc[1], cc[2], cc[3], store.JSONList(p.Providers)).Scan(&p.CreatedAt)
		if err != nil {
			return err
		}
		return s.notifyProject(ctx, tx, p.ID)
	})
	if err != nil {
		return classify(err, what)
	}
	p.CreatedAt, p.UpdatedAt = utc(p.CreatedAt), now
	return nil
}

// DeleteProject removes the project, its customers and its inactive keys;
// it refuses with auth.ErrInUse while any key is active.
func (s *Store) DeleteProject(ctx context.Context, id string) error {
	what := fmt.Sprintf("project %q", id)
	return classify(s.tx(ctx, func(tx pgx.Tx) error {
		// FOR UPDATE: a key created concurrently in this project waits
		// for the delete (its foreign key check locks the project row).
		var active int
		err := tx.QueryRow(ctx, `SELECT (SELECT count(*) FROM keys WHERE project_id = p.id AND revoked_at IS NULL
			AND (expires_at IS NULL OR expires_at > now())) FROM projects p WHERE p.id = $1 FOR UPDATE`, id).Scan(&active)
		if err != nil {
			return err
		}
		if active > 0 {
			return fmt.Errorf("has %d active keys; revoke them first: %w", active, auth.ErrInUse)
		}
		if err := s.notifyProject(ctx, tx, id); err != nil {
			return err
		}
		_, err = tx.Exec(ctx, `DELETE FROM projects WHERE id = $1`, id)
		return err
	}), what)
}

// Projects lists projects in ID order.
func (s *Store) Projects(ctx context.Context, pg auth.Page) ([]auth.Project, error) {
	var out []auth.Project
	err := s.withConn(ctx, func(c *pgx.Conn) error {
		rows, err := c.Query(ctx, `SELECT `+projectCols+` FROM projects WHERE id > $1 ORDER BY id LIMIT $2`, pg.After, store.PageLimit(pg))
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			p, err := scanProject(rows)
			if err != nil {
				return err
			}
			out = append(out, *p)
		}
		return rows.Err()
	})
	if err != nil {
		return nil, fmt.Errorf("postgres: projects: %w", err)
	}
	return out, nil
}
