package sqlite

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"gatehouse/internal/auth"
	"gatehouse/internal/store"
)

// schemaVersion is the version a store's file records.
func schemaVersion(t *testing.T, s *Store) (version, rows int) {
	t.Helper()
	err := s.w.QueryRowContext(context.Background(), `SELECT coalesce(max(version), 0), count(*) FROM schema_migrations`).Scan(&version, &rows)
	if err != nil {
		t.Fatal(err)
	}
	return version, rows
}

func latestVersion(t *testing.T) int {
	t.Helper()
	ms, err := store.Migrations(migrationFiles, "migrations")
	if err != nil {
		t.Fatal(err)
	}
	return len(ms)
}

// TestMigratesFromEveryOlderVersion opens a file left by a gatehouse at
// each older schema version: Open brings it to the newest, keeps what it
// held, and the store works on it.
func TestMigratesFromEveryOlderVersion(t *testing.T) {
	latest := latestVersion(t)
	ctx := context.Background()
	for v := 1; v < latest; v++ {
		t.Run(fmt.Sprint(v), func(t *testing.T) {
			path, db, mustExec := oldDatabase(t, v)
			mustExec(`INSERT INTO projects (id, name, created_at, updated_at) VALUES ('proj_old', 'old', ?, ?)`,
				"2026-01-01T00:00:00.000000Z", "2026-01-01T00:00:00.000000Z")
			db.Close()
			s, err := Open(ctx, path)
			if err != nil {
				t.Fatalf("open a version %d file: %v", v, err)
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

// TestConcurrentOpens opens one new file from several goroutines at once,
// as two processes started together would (each Open has connections of
// its own): every Open succeeds and the migrations are applied once.
func TestConcurrentOpens(t *testing.T) {
	path := filepath.Join(t.TempDir(), "gatehouse.db")
	const n = 6
	var wg sync.WaitGroup
	stores := make([]*Store, n)
	errs := make([]error, n)
	for i := range n {
		wg.Go(func() { stores[i], errs[i] = Open(context.Background(), path) })
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Errorf("open %d: %v", i, err)
			continue
		}
		defer stores[i].Close()
	}
	if t.Failed() {
		return
	}
	latest := latestVersion(t)
	if v, rows := schemaVersion(t, stores[0]); v != latest || rows != latest {
		t.Fatalf("version %d in %d rows, want %d in %d: the migrations ran more than once or not at all", v, rows, latest, latest)
	}
}

// openEnv names the file a re-run of this test binary opens (see
// TestMain) instead of running the tests.
const openEnv = "GATEHOUSE_TEST_SQLITE_OPEN"

// TestMain lets TestConcurrentOpenProcesses run this binary as separate
// processes that each open one file: SQLite's locks between processes
// are the operating system's, not those between connections of one.
func TestMain(m *testing.M) {
	if path := os.Getenv(openEnv); path != "" {
		s, err := Open(context.Background(), path)
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		s.Close()
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// TestConcurrentOpenProcesses starts several processes that open one new
// file at the same moment, as gateways started together on one file
// would: each opens it, and the migrations are applied once.
func TestConcurrentOpenProcesses(t *testing.T) {
	path := filepath.Join(t.TempDir(), "gatehouse.db")
	const n = 4
	cmds := make([]*exec.Cmd, n)
	outs := make([]strings.Builder, n)
	for i := range n {
		cmds[i] = exec.Command(os.Args[0], "-test.run=^$")
		cmds[i].Env = append(os.Environ(), openEnv+"="+path)
		cmds[i].Stdout, cmds[i].Stderr = &outs[i], &outs[i]
	}
	for _, c := range cmds {
		if err := c.Start(); err != nil {
			t.Fatal(err)
		}
	}
	for i, c := range cmds {
		if err := c.Wait(); err != nil {
			t.Errorf("process %d: %v: %s", i, err, outs[i].String())
		}
	}
	if t.Failed() {
		return
	}
	s, err := Open(context.Background(), path)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	latest := latestVersion(t)
	if v, rows := schemaVersion(t, s); v != latest || rows != latest {
		t.Fatalf("version %d in %d rows, want %d in %d", v, rows, latest, latest)
	}
}

// TestNewerSchemaMessage: a file migrated by a newer gatehouse is refused
// with a message naming its version and the newest this binary knows,
// and is left as it was.
func TestNewerSchemaMessage(t *testing.T) {
	s, path := openTemp(t)
	latest := latestVersion(t)
	if _, err := s.w.ExecContext(context.Background(), `INSERT INTO schema_migrations (version, name, applied_at) VALUES (?, 'future.sql', '')`, latest+1); err != nil {
		t.Fatal(err)
	}
	s.Close()
	_, err := Open(context.Background(), path)
	if err == nil {
		t.Fatal("a newer schema was opened")
	}
	for _, want := range []string{fmt.Sprintf("version %d", latest+1), fmt.Sprintf("(%d)", latest), "newer", path} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("refusal %q does not say %q", err, want)
		}
	}
}
