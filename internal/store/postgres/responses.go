package postgres

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"gatehouse/internal/responses"
)

// PutResponse implements responses.Store. An upsert rather than a plain
// insert: the server may retry a write whose commit it did not hear.
func (s *Store) PutResponse(ctx context.Context, r *responses.Stored) error {
	_, err := s.pool.Exec(ctx, `INSERT INTO responses (id, project, model, created_at, response, items)
		VALUES ($1, $2, $3, $4, $5, $6)
		ON CONFLICT (id) DO UPDATE SET project = excluded.project, model = excluded.model,
			created_at = excluded.created_at, response = excluded.response, items = excluded.items`,
		r.ID, r.Project, r.Model, r.CreatedAt.UTC(), r.Response, r.Items)
	if err != nil {
		return fmt.Errorf("postgres: put response: %w", err)
	}
	return nil
}

// Response implements responses.Store. The project is part of the
// lookup, so another project's id reads as absent rather than forbidden:
// a key cannot even learn that the id exists.
func (s *Store) Response(ctx context.Context, project, id string) (*responses.Stored, bool, error) {
	r := &responses.Stored{ID: id, Project: project}
	err := s.pool.QueryRow(ctx, `SELECT model, created_at, response, items FROM responses WHERE id = $1 AND project = $2`,
		id, project).Scan(&r.Model, &r.CreatedAt, &r.Response, &r.Items)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, false, nil
	}
	if err != nil {
		return nil, false, fmt.Errorf("postgres: response: %w", err)
	}
	r.CreatedAt = utc(r.CreatedAt)
	return r, true, nil
}

// DeleteResponse implements responses.Store.
func (s *Store) DeleteResponse(ctx context.Context, project, id string) (bool, error) {
	tag, err := s.pool.Exec(ctx, `DELETE FROM responses WHERE id = $1 AND project = $2`, id, project)
	if err != nil {
		return false, fmt.Errorf("postgres: delete response: %w", err)
	}
	return tag.RowsAffected() > 0, nil
}

// DeleteResponsesBefore implements responses.Store, oldest first. The
// batch bound keeps each DELETE's transaction, its row locks and the WAL
// it writes for the bodies small, however far behind retention is.
func (s *Store) DeleteResponsesBefore(ctx context.Context, before time.Time, limit int) (int, error) {
	if limit < 1 {
		return 0, nil // PostgreSQL refuses a negative LIMIT
	}
	tag, err := s.pool.Exec(ctx, `DELETE FROM responses WHERE id IN
		(SELECT id FROM responses WHERE created_at < $1 ORDER BY created_at LIMIT $2)`, before.UTC(), limit)
	if err != nil {
		return 0, fmt.Errorf("postgres: delete old responses: %w", err)
	}
	return int(tag.RowsAffected()), nil
}

var _ responses.Store = (*Store)(nil)
