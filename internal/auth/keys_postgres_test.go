package auth_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"net/url"
	"os"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"gatehouse/internal/auth"
	"gatehouse/internal/store/postgres"
)

// postgresDSN returns a DSN for a new schema of the test database, dropped
// when the test ends.
func postgresDSN(t *testing.T) string {
	t.Helper()
	base := os.Getenv("GATEHOUSE_TEST_POSTGRES")
	if base == "" {
		t.Fatal("GATEHOUSE_TEST_POSTGRES is not set: this test needs the real PostgreSQL server that `make test` starts; " +
			"to run it by hand: eval \"$(scripts/test-services start)\" and go test again")
	}
	var b [6]byte
	rand.Read(b[:])
	schema := "gh_auth_" + hex.EncodeToString(b[:])
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
	deadline := time.Now().Add(time.Second)
	for {
		_, err := k.Resolve(ctx, "gh-new-secret")
		if err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("key created on the other replica still refused after 1s: %v", err)
		}
		time.Sleep(5 * time.Millisecond)
	}

	if err := admin.RevokeKey(ctx, key.ID, time.Now()); err != nil {
		t.Fatal(err)
	}
	took := waitBad(t, k, "gh-replica-secret", time.Second)
	t.Logf("revocation on one replica refused on the other after %v", took)
}
