package sqlite

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"gatehouse/internal/auth"
	"gatehouse/internal/cache"
	"gatehouse/internal/cache/cachetest"
	"gatehouse/internal/store"
	"gatehouse/internal/store/storetest"
)

func openTemp(t testing.TB) (*Store, string) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "gatehouse.db")
	s, err := Open(context.Background(), path)
	if err != nil {
		t.Fatal(err)
	}
	return s, path
}

func TestContract(t *testing.T) {
	storetest.Run(t, func(t *testing.T) auth.Store {
		s, _ := openTemp(t)
		return s
	})
}

func TestPragmas(t *testing.T) {
	s, _ := openTemp(t)
	defer s.Close()
	ctx := context.Background()
	for _, db := range []struct {
		name string
		q    func(string) (string, error)
	}{
		{"writer", func(p string) (v string, err error) { return v, s.w.QueryRowContext(ctx, "PRAGMA "+p).Scan(&v) }},
		{"reader", func(p string) (v string, err error) { return v, s.r.QueryRowContext(ctx, "PRAGMA "+p).Scan(&v) }},
	} {
		for pragma, want := range map[string]string{"journal_mode": "wal", "foreign_keys": "1", "busy_timeout": "5000"} {
			got, err := db.q(pragma)
			if err != nil {
				t.Fatal(err)
			}
			if got != want {
				t.Errorf("%s: %s = %q, want %q", db.name, pragma, got, want)
			}
		}
	}
	if _, err := s.r.ExecContext(ctx, `DELETE FROM projects`); err == nil {
		t.Error("the read pool can write")
	}
}

func TestMigrationsIdempotent(t *testing.T) {
	s, path := openTemp(t)
	ctx := context.Background()
	p := &auth.Project{Name: "kept"}
	if err := s.CreateProject(ctx, p); err != nil {
		t.Fatal(err)
	}
	s.Close()
	for range 2 {
		s, err := Open(ctx, path)
		if err != nil {
			t.Fatalf("reopen: %v", err)
		}
		if _, err := s.Project(ctx, p.ID); err != nil {
			t.Errorf("project lost on reopen: %v", err)
		}
		var n int
		if err := s.w.QueryRowContext(ctx, `SELECT count(*) FROM schema_migrations`).Scan(&n); err != nil {
			t.Fatal(err)
		}
		if ms, _ := store.Migrations(migrationFiles, "migrations"); n != len(ms) {
			t.Errorf("%d migration rows, want %d", n, len(ms))
		}
		s.Close()
	}
}

func TestRefusesNewerSchema(t *testing.T) {
	s, path := openTemp(t)
	ctx := context.Background()
	if _, err := s.w.ExecContext(ctx, `INSERT INTO schema_migrations (version, name, applied_at) VALUES (99, '0099_future.sql', '')`); err != nil {
		t.Fatal(err)
	}
	s.Close()
	_, err := Open(ctx, path)
	if err == nil || !strings.Contains(err.Error(), "newer") {
		t.Fatalf("Open of a newer schema: %v, want a refusal", err)
	}
}

// BenchmarkKeyByHash measures the cache-miss path of auth: one indexed
// lookup joined with the project, among 100,000 keys.
func BenchmarkKeyByHash(b *testing.B) {
	const n = 100_000
	s, _ := openTemp(b)
	defer s.Close()
	ctx := context.Background()
	p := &auth.Project{Name: "bench"}
	if err := s.CreateProject(ctx, p); err != nil {
		b.Fatal(err)
	}
	// Load in one transaction: 100,000 separate commits would take
	// minutes of fsync and measure nothing of interest.
	now := fmtTime(p.CreatedAt)
	tx, err := s.w.BeginTx(ctx, nil)
	if err != nil {
		b.Fatal(err)
	}
	stmt, err := tx.PrepareContext(ctx, `INSERT INTO keys (id, hash, prefix, project_id, name, created_at, updated_at) VALUES (?,?,?,?,?,?,?)`)
	if err != nil {
		b.Fatal(err)
	}
	for i := range n {
		h := benchHash(i)
		if _, err := stmt.ExecContext(ctx, fmt.Sprintf("key_bench%06d", i), h[:], "gh-b", p.ID, "k", now, now); err != nil {
			b.Fatal(err)
		}
	}
	stmt.Close()
	if err := tx.Commit(); err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	b.ResetTimer()
	i := 0
	for b.Loop() {
		k, _, err := s.KeyByHash(ctx, benchHash(i%n))
		if err != nil || k == nil {
			b.Fatal(err)
		}
		i += 7919 // stride through the table, not one hot page
	}
}

func benchHash(i int) auth.Hash {
	var b [8]byte
	binary.BigEndian.PutUint64(b[:], uint64(i))
	return sha256.Sum256(b[:])
}

// BenchmarkSink: usage records a second into a SQLite file (make
// bench-sink; BENCHMARKS.md).
func BenchmarkSink(b *testing.B) {
	s, err := Open(context.Background(), filepath.Join(b.TempDir(), "bench.db"))
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	storetest.BenchSink(b, s)
}

func TestCacheTier(t *testing.T) {
	cachetest.Run(t, func(t *testing.T) cache.Store {
		s, _ := openTemp(t)
		t.Cleanup(func() { s.Close() })
		return s
	})
}

// TestVectorsSurviveReopen: the semantic index's vectors written through
// the log are loaded back, newest first within the bound, and deleted
// ones stay gone.
func TestVectorsSurviveReopen(t *testing.T) {
	s, path := openTemp(t)
	log := cache.NewVectorLog(s, func(err error) { t.Error(err) })
	v := cache.NewVectors(0, 10)
	for i := range 3 {
		vec := []float32{float32(i), 1, 0.5}
		log.Kept("scope", cache.Key(fmt.Sprint("k", i)), vec, v.Add("scope", cache.Key(fmt.Sprint("k", i)), vec))
	}
	log.Kept("scope", "k3", []float32{0, 0, 0.1}, []cache.Key{"k1"})
	log.Close()
	s.Close()

	s2, err := Open(context.Background(), path)
	if err != nil {
		t.Fatal(err)
	}
	defer s2.Close()
	loaded := cache.NewVectors(0, 10)
	n, err := cache.LoadVectors(context.Background(), s2, loaded)
	if err != nil || n != 3 || loaded.Dim() != 3 || loaded.Len() != 3 {
		t.Fatalf("loaded %d (%v), dim %d; want k0, k2 and k3 (k1 was deleted)", n, err, loaded.Dim())
	}
	if k, score, _ := loaded.Search("scope", []float32{2, 1, 0.5}); k != "k2" || score != 5.25 {
		t.Fatalf("found %s at %f, want k2 at 5.25", k, score)
	}
}

// countingTier counts the reads that reach the SQLite tier.
type countingTier struct {
	*Store
	reads int
}

func (c *countingTier) GetEntry(ctx context.Context, project string, k cache.Key) (*cache.Entry, error) {
	c.reads++
	return c.Store.GetEntry(ctx, project, k)
}

// TestCacheKnowsItsSQLiteKeys: over the SQLite tier, a restarted cache
// knows which keys the file holds, so a miss never reads it, while a
// stored entry is still found there.
func TestCacheKnowsItsSQLiteKeys(t *testing.T) {
	s, _ := openTemp(t)
	defer s.Close()
	ctx := context.Background()
	key := func(b byte) cache.Key { return cache.Key(strings.Repeat(string("0123456789abcdef"[b%16]), 64)) }
	first := cache.New(cache.Options{MaxBytes: 1 << 20, Lower: s})
	first.Put(key(1), &cache.Entry{Project: "qa", Completion: []byte(`{}`), Expires: time.Now().Add(time.Hour)})
	first.Close()

	tier := &countingTier{Store: s}
	c := cache.New(cache.Options{MaxBytes: 1 << 20, Lower: tier})
	defer c.Close()
	for range 3 {
		if _, ok := c.Get(ctx, "qa", key(2)); ok {
			t.Fatal("an absent key was found")
		}
	}
	if tier.reads != 0 {
		t.Fatalf("%d reads of SQLite for a key it does not hold", tier.reads)
	}
	if _, ok := c.Get(ctx, "qa", key(1)); !ok || tier.reads != 1 {
		t.Fatalf("the stored key: found %v after %d reads", ok, tier.reads)
	}
}
