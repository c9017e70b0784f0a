package postgres

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"gatehouse/internal/cache"
)

// VectorIndex is the semantic cache's index in cluster mode: the
// vectors in PostgreSQL with pgvector, searched through an HNSW index by
// cosine distance, so every replica finds what any of them stored. Its
// table is made with the first vector, whose dimension it takes (an
// HNSW index needs a fixed one). The extension and its objects live in
// the public schema, so they are named with it wherever the store's
// schema is.
type VectorIndex struct {
	s     *Store
	max   int
	dim   atomic.Int64 // the table's dimension once made
	mu    sync.Mutex   // serialises making the table
	added atomic.Int64 // vectors added, for pruning every pruneEvery
}

// pruneEvery is how many additions pass between trims of the table to
// its bound.
const pruneEvery = 1000

// NewVectorIndex returns the pgvector index on s, holding at most max
// vectors (the oldest go first); an error when the server has no
// pgvector (the caller then keeps an in-process index).
func (s *Store) NewVectorIndex(ctx context.Context, max int) (*VectorIndex, error) {
	err := s.withConn(ctx, func(c *pgx.Conn) error {
		_, err := c.Exec(ctx, `CREATE EXTENSION IF NOT EXISTS vector WITH SCHEMA public`)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("postgres: pgvector: %w", err)
	}
	v := &VectorIndex{s: s, max: max}
	if _, err := v.loadDim(ctx); err != nil {
		return nil, err
	}
	return v, nil
}

// loadDim reads the dimension of a table another process (or an earlier
// one) made; 0 while there is none.
func (v *VectorIndex) loadDim(ctx context.Context) (int, error) {
	if d := v.dim.Load(); d != 0 {
		return int(d), nil
	}
	var dim int
	err := v.s.withConn(ctx, func(c *pgx.Conn) error {
		return c.QueryRow(ctx, `SELECT coalesce((SELECT atttypmod FROM pg_attribute
			WHERE attrelid = to_regclass('semantic_vectors') AND attname = 'embedding'), 0)`).Scan(&dim)
	})
	if err != nil {
		return 0, fmt.Errorf("postgres: pgvector: %w", err)
	}
	v.dim.CompareAndSwap(0, int64(dim))
	return dim, nil
}

// vectorText is vec in pgvector's text form, "[0.1,0.2,…]".
func vectorText(vec []float32) string {
	b := make([]byte, 0, 12*len(vec)+2)
	b = append(b, '[')
	for i, x := range vec {
		if i > 0 {
			b = append(b, ',')
		}
		b = strconv.AppendFloat(b, float64(x), 'g', -1, 32)
	}
	return string(append(b, ']'))
}

// ensureTable makes the table and its indexes for vectors of dim.
func (v *VectorIndex) ensureTable(ctx context.Context, dim int) error {
	if d, err := v.loadDim(ctx); err != nil {
		return err
	} else if d != 0 {
		if int(d) != dim {
			return fmt.Errorf("postgres: pgvector: a %d-dimensional vector for a %d-dimensional index (another embedder?)", dim, d)
		}
		return nil
	}
	v.mu.Lock()
	defer v.mu.Unlock()
	if v.dim.Load() != 0 {
		return v.ensureTable(ctx, dim)
	}
	err := pgx.BeginFunc(ctx, v.s.pool, func(tx pgx.Tx) error {
		for _, q := range []string{
			`CREATE TABLE IF NOT EXISTS semantic_vectors (key text PRIMARY KEY, scope text NOT NULL,
				embedding public.vector(` + strconv.Itoa(dim) + `) NOT NULL, created timestamptz NOT NULL DEFAULT now())`,
			`CREATE INDEX IF NOT EXISTS semantic_vectors_embedding ON semantic_vectors
				USING hnsw (embedding public.vector_cosine_ops)`,
			`CREATE INDEX IF NOT EXISTS semantic_vectors_scope ON semantic_vectors (scope)`,
			`CREATE INDEX IF NOT EXISTS semantic_vectors_created ON semantic_vectors (created)`,
		} {
			if _, err := tx.Exec(ctx, q); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("postgres: pgvector: %w", err)
	}
	v.dim.Store(int64(dim))
	return nil
}

// SearchVector implements cache.VectorIndex: the HNSW index ordered by
// cosine distance, scanned iteratively until a vector of the scope turns
// up (pgvector 0.8's iterative scans), so a small scope among many is
// still found.
func (v *VectorIndex) SearchVector(ctx context.Context, scope string, q []float32) (cache.Key, float32, bool, error) {
	if dim, err := v.loadDim(ctx); err != nil || dim == 0 {
		return "", 0, false, err // no vector stored yet, by any replica
	}
	var key string
	var score float64
	err := pgx.BeginFunc(ctx, v.s.pool, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `SET LOCAL hnsw.iterative_scan = relaxed_order`); err != nil {
			return err
		}
		return tx.QueryRow(ctx, `SELECT key, 1 - (embedding OPERATOR(public.<=>) $2::public.vector) FROM semantic_vectors
			WHERE scope = $1 ORDER BY embedding OPERATOR(public.<=>) $2::public.vector LIMIT 1`,
			scope, vectorText(q)).Scan(&key, &score)
	})
	if errors.Is(err, pgx.ErrNoRows) {
		return "", 0, false, nil
	}
	if err != nil {
		return "", 0, false, fmt.Errorf("postgres: pgvector search: %w", err)
	}
	return cache.Key(key), float32(score), true, nil
}

// AddVector implements cache.VectorIndex.
func (v *VectorIndex) AddVector(ctx context.Context, scope string, key cache.Key, vec []float32) error {
	if err := v.ensureTable(ctx, len(vec)); err != nil {
		return err
	}
	err := v.s.withConn(ctx, func(c *pgx.Conn) error {
		_, err := c.Exec(ctx, `INSERT INTO semantic_vectors (key, scope, embedding) VALUES ($1, $2, $3::public.vector)
			ON CONFLICT (key) DO UPDATE SET scope = excluded.scope, embedding = excluded.embedding, created = now()`,
			string(key), scope, vectorText(vec))
		return err
	})
	if err != nil {
		return fmt.Errorf("postgres: pgvector add: %w", err)
	}
	if v.added.Add(1)%pruneEvery == 0 {
		return v.prune(ctx)
	}
	return nil
}

// prune deletes the oldest vectors beyond the bound.
func (v *VectorIndex) prune(ctx context.Context) error {
	return v.s.withConn(ctx, func(c *pgx.Conn) error {
		_, err := c.Exec(ctx, `DELETE FROM semantic_vectors WHERE key IN (SELECT key FROM semantic_vectors
			ORDER BY created LIMIT greatest((SELECT count(*) FROM semantic_vectors) - $1, 0))`, v.max)
		return err
	})
}

// RemoveVector implements cache.VectorIndex.
func (v *VectorIndex) RemoveVector(ctx context.Context, scope string, key cache.Key) error {
	if v.dim.Load() == 0 {
		return nil
	}
	err := v.s.withConn(ctx, func(c *pgx.Conn) error {
		_, err := c.Exec(ctx, `DELETE FROM semantic_vectors WHERE key = $1 AND scope = $2`, string(key), scope)
		return err
	})
	var pe *pgconn.PgError
	if errors.As(err, &pe) && pe.Code == "42P01" {
		return nil
	}
	return err
}

var _ cache.VectorIndex = (*VectorIndex)(nil)
