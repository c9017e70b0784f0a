package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"gatehouse/internal/responses"
)

// PutResponse implements responses.Store. An upsert rather than a plain
// insert: the server may retry a write whose commit it did not hear.
func (s *Store) PutResponse(ctx context.Context, r *responses.Stored) error {
	_, err := s.w.ExecContext(ctx, `INSERT INTO responses (id, project, model, created_at, response, items)
		VALUES (?, ?, ?, ?, ?, ?)
		ON CONFLICT (id) DO UPDATE SET project = excluded.project, model = excluded.model,
			created_at = excluded.created_at, response = excluded.response, items = excluded.items`,
		r.ID, r.Project, r.Model, unixMicros(r.CreatedAt), r.Response, r.Items)
	if err != nil {
		return fmt.Errorf("sqlite: put response: %w", err)
	}
	return nil
}

// Response implements responses.Store. The project is part of the
// lookup, so another project's id reads as absent rather than forbidden:
// a key cannot even learn that the id exists.
func (s *Store) Response(ctx context.Context, project, id string) (*responses.Stored, bool, error) {
	r := &responses.Stored{ID: id, Project: project}
	var created int64
	err := s.r.QueryRowContext(ctx, `SELECT model, created_at, response, items FROM responses WHERE id = ? AND project = ?`,
		id, project).Scan(&r.Model, &created, &r.Response, &r.Items)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, false, nil
	}
	if err != nil {
		return nil, false, fmt.Errorf("sqlite: response: %w", err)
	}
	r.CreatedAt = time.UnixMicro(created).UTC()
	return r, true, nil
}

// DeleteResponse implements responses.Store.
func (s *Store) DeleteResponse(ctx context.Context, project, id string) (bool, error) {
	res, err := s.w.ExecContext(ctx, `DELETE FROM responses WHERE id = ? AND project = ?`, id, project)
	if err != nil {
		return false, fmt.Errorf("sqlite: delete response: %w", err)
	}
	n, err := res.RowsAffected()
	if err != nil {
		return false, fmt.Errorf("sqlite: delete response: %w", err)
	}
	return n > 0, nil
}

// DeleteResponsesBefore implements responses.Store, oldest first. SQLite
// has one writer, so the batch bound is what keeps retention from
// holding up the usage writes and admin changes queued behind it.
func (s *Store) DeleteResponsesBefore(ctx context.Context, before time.Time, limit int) (int, error) {
	if limit < 1 {
		return 0, nil // SQLite reads LIMIT -1 as no limit at all
	}
	res, err := s.w.ExecContext(ctx, `DELETE FROM responses WHERE rowid IN
		(SELECT rowid FROM responses WHERE created_at < ? ORDER BY created_at LIMIT ?)`, unixMicros(before), limit)
	if err != nil {
		return 0, fmt.Errorf("sqlite: delete old responses: %w", err)
	}
	n, err := res.RowsAffected()
	if err != nil {
		return 0, fmt.Errorf("sqlite: delete old responses: %w", err)
	}
	return int(n), nil
}

var _ responses.Store = (*Store)(nil)
