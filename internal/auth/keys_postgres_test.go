package auth_test

import (
	"context"
	"gatehouse/internal/store/postgres/pgtest"
	"testing"
	"time"

	"gatehouse/internal/auth"
	"gatehouse/internal/store/postgres"
)

// postgresDSN returns a DSN for a new schema of the test database, dropped
// when the test ends.
func postgresDSN(t *testing.T) string { return pgtest.DSN(t, "gh_auth_") }

func openPostgres(t *testing.T, dsn string) *postgres.Store {
	t.Helper()
	s, err := postgres.Open(context.Background(), dsn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// TestKeysAcrossReplicas: two gateways share PostgreSQL; what the admin
// API of one changes reaches the key cache of the other within a second.
func TestKeysAcrossReplicas(t *testing.T) {
	dsn := postgresDSN(t)
	admin := openPostgres(t, dsn)   // the replica serving the admin API
	serving := openPostgres(t, dsn) // the replica serving the request
	ctx := context.Background()
	p := mustProject(t, admin, &auth.Project{Name: "p"})
	key := mustKey(t, admin, &auth.Key{ProjectID: p.ID, Limits: auth.Limits{RPM: 10}}, "gh-replica-secret")
	k := newKeys(t, serving, auth.KeysOptions{})

	if pr, err := k.Resolve(ctx, "gh-replica-secret"); err != nil || pr.RPM != 10 {
		t.Fatalf("%+v %v", pr, err)
	}
	// A key created on the other replica works at once, although this
	// one has just remembered its hash as unknown.
	if _, err := k.Resolve(ctx, "gh-new-secret"); err != auth.ErrBadKey {
		t.Fatalf("before creation: %v", err)
	}
	mustKey(t, admin, &auth.Key{ProjectID: p.ID}, "gh-new-secret")
	deadline := time.Now().Add(10 * time.Second)
	for {
		_, err := k.Resolve(ctx, "gh-new-secret")
		if err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("key created on the other replica still refused after 10s: %v", err)
		}
		time.Sleep(5 * time.Millisecond)
	}

	if err := admin.RevokeKey(ctx, key.ID, time.Now()); err != nil {
		t.Fatal(err)
	}
	took := waitBad(t, k, "gh-replica-secret", time.Second)
	t.Logf("revocation on one replica refused on the other after %v", took)
}
