package admin

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"net/url"
	"os"
	"testing"

	"github.com/jackc/pgx/v5"

	"gatehouse/internal/auth"
	"gatehouse/internal/store/postgres"
)

// openPostgres opens the store on a new schema of the test database,
// dropped when the test ends.
func openPostgres(t *testing.T) auth.Store {
	t.Helper()
	base := os.Getenv("GATEHOUSE_TEST_POSTGRES")
	if base == "" {
		t.Fatal("GATEHOUSE_TEST_POSTGRES is not set: this test needs the PostgreSQL server that `make test` starts; " +
			"by hand: eval \"$(scripts/test-services start)\" and run go test again")
	}
	ctx := context.Background()
	var b [6]byte
	rand.Read(b[:])
	schema := "gh_admin_" + hex.EncodeToString(b[:])
	c, err := pgx.Connect(ctx, base)
	if err != nil {
		t.Fatalf("connect to GATEHOUSE_TEST_POSTGRES (scripts/test-services start): %v", err)
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
	st, err := postgres.Open(ctx, u.String())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	return st
}

// TestAdminPostgres runs the whole scenario, CRUD, lists and bad input,
// against the cluster store.
func TestAdminPostgres(t *testing.T) {
	scenario(newEnv(t, openPostgres(t)))
}
