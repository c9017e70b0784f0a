// Package pgtest gives each test its own empty schema on the real
// PostgreSQL server the test services run, so tests and runs never see
// each other's rows (or, since the store's NOTIFY channel is per schema,
// each other's changes). It is used only from tests.
package pgtest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"net/url"
	"os"
	"testing"

	"github.com/jackc/pgx/v5"
)

// DSN returns a DSN for a new schema of the GATEHOUSE_TEST_POSTGRES
// database, named prefix plus random hex, dropped when the test ends. An
// unset variable or an unreachable server fails the test: it never skips.
func DSN(t testing.TB, prefix string) string {
	t.Helper()
	return DSNFrom(t, "GATEHOUSE_TEST_POSTGRES", prefix)
}

// DSNFrom is DSN on the server the environment variable env names
// (GATEHOUSE_TEST_PGVECTOR: PostgreSQL 18 with pgvector).
func DSNFrom(t testing.TB, env, prefix string) string {
	t.Helper()
	base := os.Getenv(env)
	if base == "" {
		t.Fatal(env + " is not set: this test needs the real PostgreSQL server that `make test` starts; " +
			"to run it by hand: eval \"$(scripts/test-services start)\" and go test again")
	}
	var b [6]byte
	_, _ = rand.Read(b[:])
	schema := prefix + hex.EncodeToString(b[:])
	ctx := context.Background()
	c, err := pgx.Connect(ctx, base)
	if err != nil {
		t.Fatalf("connect to GATEHOUSE_TEST_POSTGRES (is it running? scripts/test-services start): %v", err)
	}
	defer c.Close(ctx)
	if _, err := c.Exec(ctx, "CREATE SCHEMA "+schema); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		c, err := pgx.Connect(context.Background(), base)
		if err != nil {
			t.Errorf("cleanup: %v", err)
			return
		}
		defer c.Close(context.Background())
		if _, err := c.Exec(context.Background(), "DROP SCHEMA "+schema+" CASCADE"); err != nil {
			t.Errorf("cleanup: %v", err)
		}
	})
	u, err := url.Parse(base)
	if err != nil {
		t.Fatalf("GATEHOUSE_TEST_POSTGRES must be a postgres:// URL: %v", err)
	}
	q := u.Query()
	q.Set("search_path", schema)
	u.RawQuery = q.Encode()
	return u.String()
}
