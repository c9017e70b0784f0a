package main

import (
	"context"
	"database/sql"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"gatehouse/internal/mockllm"
	"gatehouse/internal/store/postgres"
	"gatehouse/internal/store/sqlite"
	"gatehouse/internal/testservers"
)

// TestRefusesNewerSchema starts `gatehouse serve` on a database that a
// newer gatehouse has migrated, for each backend: the process exits with
// status 1 before it listens, naming the database's schema version and
// the newest this binary knows, and leaves the database as it was.
func TestRefusesNewerSchema(t *testing.T) {
	up := startUpstream(t, mockllm.Options{})
	ctx := context.Background()
	t.Run("sqlite", func(t *testing.T) {
		dir := t.TempDir()
		path := filepath.Join(dir, "gatehouse.db")
		st, err := sqlite.Open(ctx, path)
		if err != nil {
			t.Fatal(err)
		}
		st.Close()
		db, err := sql.Open("sqlite", path)
		if err != nil {
			t.Fatal(err)
		}
		defer db.Close()
		var latest int
		if err := db.QueryRow(`SELECT max(version) FROM schema_migrations`).Scan(&latest); err != nil {
			t.Fatal(err)
		}
		if _, err := db.Exec(`INSERT INTO schema_migrations VALUES (?, 'future.sql', '')`, latest+1); err != nil {
			t.Fatal(err)
		}
		refusesToStart(t, baseConfig(up, "storage: {sqlite: "+path+"}\n"), latest)
	})
	t.Run("postgres", func(t *testing.T) {
		pg := testservers.StartPostgres(t)
		rd := testservers.StartRedis(t, testservers.RedisOptions{})
		st, err := postgres.Open(ctx, pg.DSN())
		if err != nil {
			t.Fatal(err)
		}
		st.Close()
		c, err := pgx.Connect(ctx, pg.DSN())
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close(ctx)
		var latest int
		if err := c.QueryRow(ctx, `SELECT max(version) FROM schema_migrations`).Scan(&latest); err != nil {
			t.Fatal(err)
		}
		if _, err := c.Exec(ctx, `INSERT INTO schema_migrations (version, name) VALUES ($1, 'future.sql')`, latest+1); err != nil {
			t.Fatal(err)
		}
		refusesToStart(t, baseConfig(up, fmt.Sprintf("storage: {redis: '%s', postgres: '%s'}\n", rd.URL(), pg.DSN())), latest)
	})
}

// refusesToStart runs gatehouse serve on cfg and wants it to exit with
// status 1, saying that the schema (at latest+1) is newer than latest.
func refusesToStart(t *testing.T, cfg string, latest int) {
	t.Helper()
	dir := t.TempDir()
	path := filepath.Join(dir, "gatehouse.yaml")
	if err := os.WriteFile(path, []byte(withTestStorage(cfg, dir)), 0o600); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, gatehouseBinary(t), "serve", "--config", path).CombinedOutput()
	ee, ok := err.(*exec.ExitError)
	if !ok || ee.ExitCode() != 1 {
		t.Fatalf("gatehouse serve on a newer schema: %v, want exit status 1; output:\n%s", err, out)
	}
	if strings.Contains(string(out), "gatehouse listening on") {
		t.Errorf("it listened before refusing:\n%s", out)
	}
	for _, want := range []string{fmt.Sprintf("version %d", latest+1), fmt.Sprintf("(%d)", latest), "newer", "upgrade gatehouse"} {
		if !strings.Contains(string(out), want) {
			t.Errorf("the refusal does not say %q:\n%s", want, out)
		}
	}
}
