package postgres

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"gatehouse/internal/auth"
	"gatehouse/internal/store"
)

func latestVersion(t *testing.T) int {
	t.Helper()
	ms, err := store.Migrations(migrationFiles, "migrations")
	if err != nil {
		t.Fatal(err)
	}
	return len(ms)
}

// schemaVersion is the version a store's schema records.
func schemaVersion(t *testing.T, s *Store) (version, rows int) {
	t.Helper()
	err := s.withConn(context.Background(), func(c *pgx.Conn) error {
		return c.QueryRow(context.Background(), `SELECT coalesce(max(version), 0), count(*) FROM schema_migrations`).Scan(&version, &rows)
	})
	if err != nil {
		t.Fatal(err)
	}
	return version, rows
}

// TestMigratesFromEveryOlderVersion opens a schema left by a gatehouse at
// each older version: Open brings it to the newest, keeps what it held,
// and the store works on it.
func TestMigratesFromEveryOlderVersion(t *testing.T) {
	latest := latestVersion(t)
	ctx := context.Background()
	for v := 1; v < latest; v++ {
		t.Run(fmt.Sprint(v), func(t *testing.T) {
			dsn, c, mustExec := oldSchema(t, v)
			mustExec(`INSERT INTO projects (id, name, created_at, updated_at) VALUES ('proj_old', 'old', now(), now())`)
			c.Close(ctx)
			s, err := Open(ctx, dsn)
			if err != nil {
				t.Fatalf("open a version %d schema: %v", v, err)
			}
			defer s.Close()
			if got, rows := schemaVersion(t, s); got != latest || rows != latest {
				t.Fatalf("after Open: version %d in %d rows, want %d", got, rows, latest)
			}
			if p, err := s.Project(ctx, "proj_old"); err != nil || p.Name != "old" {
				t.Fatalf("the project written at version %d: %+v, %v", v, p, err)
			}
			p := &auth.Project{Name: "new"}
			if err := s.CreateProject(ctx, p); err != nil {
				t.Fatal(err)
			}
			if err := s.CreateKey(ctx, &auth.Key{ProjectID: p.ID, Name: "k", Hash: auth.HashKey("k"), Prefix: "gh-k"}); err != nil {
				t.Fatal(err)
			}
		})
	}
}

// TestMigrationTakesTheLock holds the migration lock as another replica
// migrating would: a replica starting meanwhile waits for it instead of
// migrating alongside, then finds its schema and starts.
func TestMigrationTakesTheLock(t *testing.T) {
	dsn := testDSN(t)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	holder, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer holder.Close(ctx)
	tx, err := holder.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock(`+migrationLock+`)`); err != nil {
		t.Fatal(err)
	}
	opened := make(chan error, 1)
	go func() {
		s, err := Open(ctx, dsn)
		if err == nil {
			s.Close()
		}
		opened <- err
	}()
	select {
	case err := <-opened:
		t.Fatalf("Open returned (%v) while another replica held the migration lock", err)
	case <-time.After(500 * time.Millisecond):
	}
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-opened:
		if err != nil {
			t.Fatalf("Open after the lock was released: %v", err)
		}
	case <-ctx.Done():
		t.Fatal("Open still waiting after the lock was released")
	}
}

// TestNewerSchemaMessage: a schema migrated by a newer gatehouse is
// refused with a message naming its version and the newest this binary
// knows, and is left as it was.
func TestNewerSchemaMessage(t *testing.T) {
	dsn := testDSN(t)
	s := openTest(t, dsn)
	latest := latestVersion(t)
	err := s.withConn(context.Background(), func(c *pgx.Conn) error {
		_, err := c.Exec(context.Background(), `INSERT INTO schema_migrations (version, name) VALUES ($1, 'future.sql')`, latest+1)
		return err
	})
	s.Close()
	if err != nil {
		t.Fatal(err)
	}
	_, err = Open(context.Background(), dsn)
	if err == nil {
		t.Fatal("a newer schema was opened")
	}
	for _, want := range []string{fmt.Sprintf("version %d", latest+1), fmt.Sprintf("(%d)", latest), "newer"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("refusal %q does not say %q", err, want)
		}
	}
	c, err := pgx.Connect(context.Background(), dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close(context.Background())
	var v int
	if err := c.QueryRow(context.Background(), `SELECT max(version) FROM schema_migrations`).Scan(&v); err != nil || v != latest+1 {
		t.Errorf("the refused schema is at version %d (%v), want it left at %d", v, err, latest+1)
	}
}
