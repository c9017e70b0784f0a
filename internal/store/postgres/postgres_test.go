package postgres

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"gatehouse/internal/store/postgres/pgtest"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"gatehouse/internal/auth"
	"gatehouse/internal/store"
	"gatehouse/internal/store/storetest"
)

// testDSN returns a DSN for a new, empty schema of the test database,
// dropped when the test ends, so tests and runs never see each other's
// rows (or, since the NOTIFY channel is per schema, each other's changes).
func testDSN(t *testing.T) string { return pgtest.DSN(t, "gh_test_") }

func openTest(t *testing.T, dsn string) *Store {
	t.Helper()
	s, err := Open(context.Background(), dsn)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func TestContract(t *testing.T) {
	var mu sync.Mutex
	dsns := map[auth.Store]string{}
	storetest.Run(t, func(t *testing.T) auth.Store {
		dsn := testDSN(t)
		s := openTest(t, dsn)
		mu.Lock()
		dsns[s] = dsn
		mu.Unlock()
		return s
	}, storetest.Replica(func(t *testing.T, s auth.Store) auth.Store {
		mu.Lock()
		dsn := dsns[s]
		mu.Unlock()
		return openTest(t, dsn)
	}))
}

// TestMigrateTogether starts several replicas on one empty schema at once:
// the advisory lock must let exactly one of them migrate.
func TestMigrateTogether(t *testing.T) {
	dsn := testDSN(t)
	const n = 4
	var wg sync.WaitGroup
	errs := make([]error, n)
	stores := make([]*Store, n)
	for i := range n {
		wg.Go(func() { stores[i], errs[i] = Open(context.Background(), dsn) })
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Errorf("replica %d: %v", i, err)
			continue
		}
		defer stores[i].Close()
	}
	if t.Failed() {
		return
	}
	var rows int
	err := stores[0].withConn(context.Background(), func(c *pgx.Conn) error {
		return c.QueryRow(context.Background(), `SELECT count(*) FROM schema_migrations`).Scan(&rows)
	})
	if err != nil {
		t.Fatal(err)
	}
	if ms, _ := store.Migrations(migrationFiles, "migrations"); rows != len(ms) {
		t.Errorf("%d migration rows, want %d", rows, len(ms))
	}
}

func TestRefusesNewerSchema(t *testing.T) {
	dsn := testDSN(t)
	s := openTest(t, dsn)
	err := s.withConn(context.Background(), func(c *pgx.Conn) error {
		_, err := c.Exec(context.Background(), `INSERT INTO schema_migrations (version, name) VALUES (99, '0099_future.sql')`)
		return err
	})
	s.Close()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := Open(context.Background(), dsn); err == nil || !strings.Contains(err.Error(), "newer") {
		t.Fatalf("Open of a newer schema: %v, want a refusal", err)
	}
}

// TestListenerReconnects kills the listener's backend, as a server restart
// or failover would, and checks that the store says changes may have been
// missed (the zero Hash) and then hears changes again.
func TestListenerReconnects(t *testing.T) {
	dsn := testDSN(t)
	s := openTest(t, dsn)
	defer s.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	ch, err := s.KeyChanges(ctx)
	if err != nil {
		t.Fatal(err)
	}
	pid := s.lis.pid.Load()
	err = s.withConn(ctx, func(c *pgx.Conn) error {
		_, err := c.Exec(ctx, `SELECT pg_terminate_backend($1)`, pid)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	select {
	case h := <-ch:
		if !h.IsZero() {
			t.Fatalf("first delivery after the drop: %x, want the zero Hash", h[:4])
		}
	case <-ctx.Done():
		t.Fatal("no flush after the listener's connection was killed")
	}
	if s.lis.pid.Load() == pid {
		t.Fatal("listener did not reconnect")
	}
	p := &auth.Project{Name: "after-drop"}
	if err := s.CreateProject(ctx, p); err != nil {
		t.Fatal(err)
	}
	k := &auth.Key{ProjectID: p.ID, Name: "k", Hash: auth.HashKey("after-drop"), Prefix: "gh-a"}
	if err := s.CreateKey(ctx, k); err != nil {
		t.Fatal(err)
	}
	select {
	case h := <-ch:
		if h != k.Hash {
			t.Errorf("got %x, want the new key's hash", h[:4])
		}
	case <-time.After(time.Second):
		t.Fatal("change not delivered within a second after reconnecting")
	}
}

// TestPoolReplacesKilledConnections: after the server drops the pool's
// idle connections (a restart, a failover, a proxy's idle timeout), the
// next calls get fresh ones instead of failing.
func TestPoolReplacesKilledConnections(t *testing.T) {
	var b [4]byte
	rand.Read(b[:])
	app := "gh_pool_" + hex.EncodeToString(b[:])
	dsn := testDSN(t) + "&application_name=" + app
	s := openTest(t, dsn)
	defer s.Close()
	ctx := context.Background()
	// Several connections at once, so the pool holds more than one.
	var wg sync.WaitGroup
	for range 4 {
		wg.Go(func() {
			s.withConn(ctx, func(c *pgx.Conn) error {
				_, err := c.Exec(ctx, `SELECT pg_sleep(0.05)`)
				return err
			})
		})
	}
	wg.Wait()
	admin, err := pgx.Connect(ctx, os.Getenv("GATEHOUSE_TEST_POSTGRES"))
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close(ctx)
	var killed int
	err = admin.QueryRow(ctx, `SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity WHERE application_name = $1`, app).Scan(&killed)
	if err != nil {
		t.Fatal(err)
	}
	if killed < 2 {
		t.Fatalf("killed %d backends, want the pool's (at least 2)", killed)
	}
	// pgxpool pings a connection that sat idle for over a second before
	// handing it out, and replaces it when the ping fails.
	time.Sleep(1100 * time.Millisecond)
	for i := range 8 {
		if _, err := s.Projects(ctx, auth.Page{}); err != nil {
			t.Fatalf("call %d after the server dropped the pool's connections: %v", i, err)
		}
	}
}

// BenchmarkSink: usage records a second into PostgreSQL with COPY (make
// bench-sink; BENCHMARKS.md).
func BenchmarkSink(b *testing.B) {
	s, err := Open(context.Background(), pgtest.DSN(b, "gh_bench_"))
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	storetest.BenchSink(b, s)
}
