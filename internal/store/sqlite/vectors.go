package sqlite

import (
	"context"
	"database/sql"
	"encoding/binary"
	"fmt"
	"math"

	"gatehouse/internal/cache"
	"gatehouse/internal/store"
)

// PutVector implements cache.VectorStore.
func (s *Store) PutVector(ctx context.Context, scope string, key cache.Key, vec []float32) error {
	b := make([]byte, 4*len(vec))
	for i, x := range vec {
		binary.LittleEndian.PutUint32(b[4*i:], math.Float32bits(x))
	}
	if _, err := s.w.ExecContext(ctx, `INSERT INTO semantic_vectors (key, scope, vector, created) VALUES (?, ?, ?, ?)
		ON CONFLICT (key) DO UPDATE SET scope = excluded.scope, vector = excluded.vector, created = excluded.created`,
		string(key), scope, b, store.Now().UnixMicro()); err != nil {
		return fmt.Errorf("sqlite: put vector: %w", err)
	}
	return nil
}

// DeleteVectors implements cache.VectorStore.
func (s *Store) DeleteVectors(ctx context.Context, keys []cache.Key) error {
	return s.tx(ctx, func(tx *sql.Tx) error {
		for _, k := range keys {
			if _, err := tx.ExecContext(ctx, `DELETE FROM semantic_vectors WHERE key = ?`, string(k)); err != nil {
				return fmt.Errorf("sqlite: delete vectors: %w", err)
			}
		}
		return nil
	})
}

// LoadVectors implements cache.VectorStore: the newest first.
func (s *Store) LoadVectors(ctx context.Context, limit int, fn func(scope string, key cache.Key, vec []float32)) error {
	rows, err := s.r.QueryContext(ctx, `SELECT key, scope, vector FROM semantic_vectors ORDER BY created DESC LIMIT ?`, limit)
	if err != nil {
		return fmt.Errorf("sqlite: load vectors: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var key, scope string
		var b []byte
		if err := rows.Scan(&key, &scope, &b); err != nil {
			return fmt.Errorf("sqlite: load vectors: %w", err)
		}
		if len(b)%4 != 0 {
			continue
		}
		vec := make([]float32, len(b)/4)
		for i := range vec {
			vec[i] = math.Float32frombits(binary.LittleEndian.Uint32(b[4*i:]))
		}
		fn(scope, cache.Key(key), vec)
	}
	return rows.Err()
}

var _ cache.VectorStore = (*Store)(nil)
