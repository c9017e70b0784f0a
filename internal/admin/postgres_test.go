package admin

import (
	"context"
	"gatehouse/internal/store/postgres/pgtest"
	"testing"

	"gatehouse/internal/auth"
	"gatehouse/internal/store/postgres"
)

// openPostgres opens the store on a new schema of the test database,
// dropped when the test ends.
func openPostgres(t *testing.T) auth.Store {
	t.Helper()
	ctx := context.Background()
	st, err := postgres.Open(ctx, pgtest.DSN(t, "gh_admin_"))
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
