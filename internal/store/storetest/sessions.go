package storetest

import (
	"errors"
	"testing"
	"time"

	"gatehouse/internal/auth"
)

// testSessions holds a store to auth.SessionStore: every backend keeps the
// dashboard's sessions, so a login outlives a restart and, in a cluster,
// is seen by every replica.
func testSessions(t *testing.T, s auth.Store) {
	ss, ok := s.(auth.SessionStore)
	if !ok {
		t.Fatalf("%T does not implement auth.SessionStore", s)
	}
	ctx := ctxFor(t)
	now := time.Now().UTC().Truncate(time.Microsecond)
	live := &auth.Session{Hash: auth.HashKey("live"), AdminKey: auth.HashKey("admin fingerprint"),
		CreatedAt: now, ExpiresAt: now.Add(time.Hour)}
	old := &auth.Session{Hash: auth.HashKey("old"), AdminKey: auth.HashKey("admin fingerprint"),
		CreatedAt: now.Add(-2 * time.Hour), ExpiresAt: now.Add(-time.Hour)}
	for _, se := range []*auth.Session{live, old} {
		if err := ss.CreateSession(ctx, se); err != nil {
			t.Fatal(err)
		}
	}
	if err := ss.CreateSession(ctx, live); !errors.Is(err, auth.ErrConflict) {
		t.Errorf("CreateSession of an existing hash = %v, want ErrConflict", err)
	}
	got, err := ss.SessionByHash(ctx, live.Hash)
	if err != nil {
		t.Fatal(err)
	}
	diff(t, "SessionByHash", live, got)
	// An expired session is still returned: the caller decides.
	if got, err := ss.SessionByHash(ctx, old.Hash); err != nil || !got.ExpiresAt.Equal(old.ExpiresAt) {
		t.Errorf("SessionByHash(expired) = %v, %v; want it returned", got, err)
	}
	if _, err := ss.SessionByHash(ctx, auth.HashKey("never")); !errors.Is(err, auth.ErrNotFound) {
		t.Errorf("SessionByHash(unknown) = %v, want ErrNotFound", err)
	}

	if err := ss.DeleteExpiredSessions(ctx, now); err != nil {
		t.Fatal(err)
	}
	if _, err := ss.SessionByHash(ctx, old.Hash); !errors.Is(err, auth.ErrNotFound) {
		t.Errorf("expired session after DeleteExpiredSessions: err = %v, want ErrNotFound", err)
	}
	if _, err := ss.SessionByHash(ctx, live.Hash); err != nil {
		t.Errorf("live session after DeleteExpiredSessions: %v", err)
	}

	for range 2 { // deleting twice is not an error
		if err := ss.DeleteSession(ctx, live.Hash); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := ss.SessionByHash(ctx, live.Hash); !errors.Is(err, auth.ErrNotFound) {
		t.Errorf("session after DeleteSession: err = %v, want ErrNotFound", err)
	}
}
