package sqlite

import (
	"context"
	"database/sql"
	"fmt"

	"gatehouse/internal/auth"
	"gatehouse/internal/store"
)

const projectCols = `id, name, rpm, tpm, budget_usd, budget_period, models, labels, cache, cache_ttl, semantic, semantic_threshold,
	log_bodies, read_only, created_at, updated_at, providers`

// projectDest collects one project row (see keyDest).
type projectDest struct {
	p                                auth.Project
	usd                              sql.NullFloat64
	period                           sql.NullString
	models, labels, created, updated string
	providers                        string
	cache, semantic                  sql.NullBool
	cacheTTL                         sql.NullInt64
	threshold                        sql.NullFloat64
}

func (d *projectDest) ptrs() []any {
	return []any{&d.p.ID, &d.p.Name, &d.p.RPM, &d.p.TPM, &d.usd, &d.period, &d.models, &d.labels, &d.cache,
		&d.cacheTTL, &d.semantic, &d.threshold, &d.p.LogBodies, &d.p.ReadOnly, &d.created, &d.updated, &d.providers}
}

func (d *projectDest) project() (*auth.Project, error) {
	p := d.p
	p.Budget = scanBudget(d.usd, d.period)
	p.Cache = store.ProjectCacheOf(nullPtr(d.cache.Bool, d.cache.Valid), nullPtr(d.cacheTTL.Int64, d.cacheTTL.Valid),
		nullPtr(d.semantic.Bool, d.semantic.Valid), nullPtr(d.threshold.Float64, d.threshold.Valid))
	var errs [5]error
	p.Models, errs[0] = store.ParseList(d.models)
	p.Providers, errs[4] = store.ParseList(d.providers)
	p.Labels, errs[1] = store.ParseMap(d.labels)
	p.CreatedAt, errs[2] = parseTime(d.created)
	p.UpdatedAt, errs[3] = parseTime(d.updated)
	if err := firstErr(errs[:]...); err != nil {
		return nil, fmt.Errorf("project %s: corrupt row: %w", p.ID, err)
	}
	return &p, nil
}

func scanProject(row scanner) (*auth.Project, error) {
	var d projectDest
	if err := row.Scan(d.ptrs()...); err != nil {
		return nil, err
	}
	return d.project()
}

// nullPtr is a pointer to v when valid, nil otherwise.
func nullPtr[T any](v T, valid bool) *T {
	if !valid {
		return nil
	}
	return &v
}

func firstErr(errs ...error) error {
	for _, err := range errs {
		if err != nil {
			return err
		}
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
	_, err := s.w.ExecContext(ctx, `INSERT INTO projects (`+projectCols+`) VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)`,
		id, p.Name, p.RPM, p.TPM, usd, period, store.JSONList(p.Models), store.JSONMap(p.Labels), cc[0], cc[1], cc[2], cc[3],
		p.LogBodies, p.ReadOnly, fmtTime(now), fmtTime(now), store.JSONList(p.Providers))
	if err != nil {
		return classify(err, fmt.Sprintf("project name %q", p.Name))
	}
	p.ID, p.CreatedAt, p.UpdatedAt = id, now, now
	return nil
}

// Project returns the project with the given ID.
func (s *Store) Project(ctx context.Context, id string) (*auth.Project, error) {
	p, err := scanProject(s.r.QueryRowContext(ctx, `SELECT `+projectCols+` FROM projects WHERE id = ?`, id))
	if err != nil {
		return nil, classify(err, fmt.Sprintf("project %q", id))
	}
	return p, nil
}

// ProjectByName returns the project with the given name.
func (s *Store) ProjectByName(ctx context.Context, name string) (*auth.Project, error) {
	p, err := scanProject(s.r.QueryRowContext(ctx, `SELECT `+projectCols+` FROM projects WHERE name = ?`, name))
	if err != nil {
		return nil, classify(err, fmt.Sprintf("project name %q", name))
	}
	return p, nil
}

// UpdateProject writes every field of p but its ID and CreatedAt. Every
// key of the project is announced on KeyChanges, since a cached key
// carries its project's limits and models.
func (s *Store) UpdateProject(ctx context.Context, p *auth.Project) error {
	now := store.Now()
	store.NormProject(p)
	usd, period := budgetArgs(p.Budget)
	cc := store.CacheColumns(p.Cache)
	var changed []auth.Hash
	var created string
	err := s.tx(ctx, func(tx *sql.Tx) error {
		err := tx.QueryRowContext(ctx, `UPDATE projects SET name=?, rpm=?, tpm=?, budget_usd=?, budget_period=?, models=?, labels=?,
			cache=?, cache_ttl=?, semantic=?, semantic_threshold=?, log_bodies=?, read_only=?, providers=?, updated_at=? WHERE id=? RETURNING created_at`,
			p.Name, p.RPM, p.TPM, usd, period, store.JSONList(p.Models), store.JSONMap(p.Labels), cc[0], cc[1], cc[2], cc[3],
			p.LogBodies, p.ReadOnly, store.JSONList(p.Providers), fmtTime(now), p.ID).Scan(&created)
		if err != nil {
			return classify(err, fmt.Sprintf("project %q (name %q)", p.ID, p.Name))
		}
		changed, err = projectKeyHashes(ctx, tx, p.ID)
		return err
	})
	if err != nil {
		return err
	}
	p.CreatedAt, _ = parseTime(created)
	p.UpdatedAt = now
	s.hub.Publish(changed...)
	return nil
}

func projectKeyHashes(ctx context.Context, tx *sql.Tx, projectID string) ([]auth.Hash, error) {
	rows, err := tx.QueryContext(ctx, `SELECT hash FROM keys WHERE project_id = ?`, projectID)
	if err != nil {
		return nil, fmt.Errorf("sqlite: keys of project %q: %w", projectID, err)
	}
	defer rows.Close()
	var hs []auth.Hash
	for rows.Next() {
		var b []byte
		if err := rows.Scan(&b); err != nil {
			return nil, fmt.Errorf("sqlite: keys of project %q: %w", projectID, err)
		}
		hs = append(hs, auth.Hash(b))
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("sqlite: keys of project %q: %w", projectID, err)
	}
	return hs, nil
}

// DeleteProject removes the project, its customers and its inactive keys;
// it refuses with auth.ErrInUse while any key is active.
func (s *Store) DeleteProject(ctx context.Context, id string) error {
	now := fmtTime(store.Now())
	var gone []auth.Hash
	err := s.tx(ctx, func(tx *sql.Tx) error {
		var exists, active int
		err := tx.QueryRowContext(ctx, `SELECT (SELECT count(*) FROM projects WHERE id = ?),
			(SELECT count(*) FROM keys WHERE project_id = ? AND revoked_at IS NULL AND (expires_at IS NULL OR expires_at > ?))`,
			id, id, now).Scan(&exists, &active)
		if err != nil {
			return classify(err, fmt.Sprintf("project %q", id))
		}
		if exists == 0 {
			return fmt.Errorf("project %q: %w", id, auth.ErrNotFound)
		}
		if active > 0 {
			return fmt.Errorf("project %q has %d active keys; revoke them first: %w", id, active, auth.ErrInUse)
		}
		if gone, err = projectKeyHashes(ctx, tx, id); err != nil {
			return err
		}
		if _, err := tx.ExecContext(ctx, `DELETE FROM projects WHERE id = ?`, id); err != nil {
			return classify(err, fmt.Sprintf("project %q", id))
		}
		return nil
	})
	if err != nil {
		return err
	}
	s.hub.Publish(gone...)
	return nil
}

// Projects lists projects in ID order.
func (s *Store) Projects(ctx context.Context, pg auth.Page) ([]auth.Project, error) {
	rows, err := s.r.QueryContext(ctx, `SELECT `+projectCols+` FROM projects WHERE id > ? ORDER BY id LIMIT ?`,
		pg.After, store.PageLimit(pg))
	if err != nil {
		return nil, fmt.Errorf("sqlite: projects: %w", err)
	}
	defer rows.Close()
	var out []auth.Project
	for rows.Next() {
		p, err := scanProject(rows)
		if err != nil {
			return nil, fmt.Errorf("sqlite: projects: %w", err)
		}
		out = append(out, *p)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("sqlite: projects: %w", err)
	}
	return out, nil
}
