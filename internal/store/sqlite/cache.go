package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"gatehouse/internal/cache"
	"gatehouse/internal/store"
)

// GetEntry implements cache.Store: the live entry under k, or nil (keys
// are unique across projects, so the project is not needed).
func (s *Store) GetEntry(ctx context.Context, _ string, k cache.Key) (*cache.Entry, error) {
	var value []byte
	err := s.r.QueryRowContext(ctx, `SELECT value FROM cache_entries WHERE key = ? AND expires > ?`,
		string(k), store.Now().UnixMicro()).Scan(&value)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("sqlite: cache get: %w", err)
	}
	e, err := cache.Decode(value)
	if err != nil {
		return nil, nil // a value of another format: a miss, overwritten by the next answer
	}
	return e, nil
}

// PutEntry implements cache.Store.
func (s *Store) PutEntry(ctx context.Context, k cache.Key, e *cache.Entry) error {
	value, err := cache.Encode(e)
	if err != nil {
		return fmt.Errorf("sqlite: cache put: %w", err)
	}
	if _, err := s.w.ExecContext(ctx, `INSERT INTO cache_entries (key, project, expires, value) VALUES (?, ?, ?, ?)
		ON CONFLICT (key) DO UPDATE SET project = excluded.project, expires = excluded.expires, value = excluded.value`,
		string(k), e.Project, e.Expires.UnixMicro(), value); err != nil {
		return fmt.Errorf("sqlite: cache put: %w", err)
	}
	return nil
}

// PurgeEntries implements cache.Store: project's entries, or all.
func (s *Store) PurgeEntries(ctx context.Context, project string) (int, error) {
	q, args := `DELETE FROM cache_entries`, []any{}
	if project != "" {
		q, args = q+` WHERE project = ?`, append(args, project)
	}
	res, err := s.w.ExecContext(ctx, q, args...)
	if err != nil {
		return 0, fmt.Errorf("sqlite: cache purge: %w", err)
	}
	n, err := res.RowsAffected()
	return int(n), err
}

// PruneEntries implements cache.Pruner: deletes at most limit expired
// entries.
func (s *Store) PruneEntries(ctx context.Context, now time.Time, limit int) (int, error) {
	res, err := s.w.ExecContext(ctx, `DELETE FROM cache_entries WHERE key IN
		(SELECT key FROM cache_entries WHERE expires <= ? LIMIT ?)`, now.UnixMicro(), limit)
	if err != nil {
		return 0, fmt.Errorf("sqlite: cache prune: %w", err)
	}
	n, err := res.RowsAffected()
	return int(n), err
}

// EntryKeys implements cache.KeyLister: the keys of the live entries.
func (s *Store) EntryKeys(ctx context.Context, fn func(cache.Key)) error {
	rows, err := s.r.QueryContext(ctx, `SELECT key FROM cache_entries WHERE expires > ?`, store.Now().UnixMicro())
	if err != nil {
		return fmt.Errorf("sqlite: cache keys: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var k string
		if err := rows.Scan(&k); err != nil {
			return fmt.Errorf("sqlite: cache keys: %w", err)
		}
		fn(cache.Key(k))
	}
	return rows.Err()
}

var (
	_ cache.KeyLister = (*Store)(nil)
	_ cache.Store     = (*Store)(nil)
	_ cache.Pruner    = (*Store)(nil)
)
